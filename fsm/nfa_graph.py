"""``NFA``: the epsilon lists and byte edges of a byte NFA as :class:`~.nfa.NFABuilder` builds
it (Thompson construction) and the lazy and eager determinizations read it."""

from __future__ import annotations

from .dfa import Budget
from .errors import GrammarCompileError


class NFA:
    """A byte NFA under construction: per state its epsilon targets (``eps``) and byte edges
    (``edges``: ``(lo, hi, target)``, inclusive), and ``bounds``, every byte range's start and
    end + 1 (the cuts of the byte classes).  States are ints allocated in order; every 4,096
    new states it checks ``budget`` (``max_nfa_states``: :class:`GrammarCompileError`; the
    deadline: ``GrammarTimeoutError``)."""

    def __init__(self, budget: Budget) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []
        self.budget = budget
        self.bounds: set[int] = {0, 256}

    def edge(self, q: int, lo: int, hi: int, target: int) -> None:
        self.edges[q].append((lo, hi, target))
        self.bounds.add(lo)
        self.bounds.add(hi + 1)

    def new(self) -> int:
        eps = self.eps
        eps.append([])
        self.edges.append([])
        n = len(eps)
        if not n & 4095:
            if n > self.budget.max_nfa_states:
                raise GrammarCompileError(f"automaton exceeds max_nfa_states={self.budget.max_nfa_states} NFA states")
            self.budget.check_time()
        return n - 1

    def new_block(self, k: int) -> int:
        """``k`` new states at once (what ``k`` calls of :meth:`new` make, with the same checks);
        returns the first one's id."""
        first = len(self.eps)
        self.eps.extend([[] for _ in range(k)])
        self.edges.extend([[] for _ in range(k)])
        n = first + k
        if first >> 12 != n >> 12:
            if n > self.budget.max_nfa_states:
                raise GrammarCompileError(f"automaton exceeds max_nfa_states={self.budget.max_nfa_states} NFA states")
            self.budget.check_time()
        return first
