"""``BudgetRows``: a state's token bitmask restricted to the tokens that can still end accepted
within the tokens left (the budget-aware completion used when ``max_tokens`` nears)."""

from __future__ import annotations

import weakref
from bisect import bisect_right
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .token_fsm import TokenFSM

Cuts = tuple[list[int], list[int]]  # (distinct successor distances ascending, one row index per cut)


class BudgetRows:
    """The budget rows of one :class:`~.token_fsm.TokenFSM` (its ``budgets``): per state, the
    distinct distances (:meth:`TokenFSM.distance`) of the states its allowed tokens lead to
    and, per such cut ``c``, the row keeping the tokens whose successor is within ``c`` bytes
    of acceptance (the last cut keeps all: the plain row).  One trie walk per state, memoized;
    the rows live in the FSM's deduplicated row store and travel with it when pickled
    (:attr:`by_state`).  Thread-safe through the FSM's lock."""

    def __init__(self, fsm: TokenFSM, by_state: dict[int, Cuts] | None = None) -> None:
        # a weak reference, as SharedTails holds its grammar: no cycle for the collector
        self._fsm = weakref.ref(fsm)
        self.by_state: dict[int, Cuts] = {} if by_state is None else by_state

    @property
    def fsm(self) -> TokenFSM:
        fsm = self._fsm()
        assert fsm is not None, "BudgetRows outlived its TokenFSM"
        return fsm

    def __contains__(self, state: object) -> bool:
        """Whether ``state``'s budget rows are known (walked here or put from elsewhere)."""
        return state in self.by_state

    def successor_distance(self, state: int) -> int:
        """The largest distance among the states one allowed token leads to from ``state``
        (0 when no token continues it).  Pure query (one trie walk the first time, shared with
        :meth:`row_index`)."""
        return self._cuts(state)[0][-1]

    def row_index(self, state: int, tokens_left: int) -> int:
        """Row index of ``state``'s token bitmask restricted to what can still end accepted
        within ``tokens_left`` tokens (this one included): a token is kept when the state it
        leads to has distance ≤ ``tokens_left − 1``; EOS is kept in accepting states.  When no
        token qualifies, the tokens leading nearest to acceptance are kept, so the row is never
        empty where the unrestricted one is not.  Equal to :meth:`TokenFSM.mask_row_index`
        whenever the budget does not bind: at no extra cost while ``tokens_left − 1`` ≥ the
        automaton's bound on every state's distance (:attr:`LazyDFA.distance_bound`) or, on a
        complete automaton, on the distances of the states ``state`` reaches
        (:meth:`LazyDFA.reach_bound`), else after one more trie walk of ``state`` (the first
        time; it yields the rows of every limit).

        Sampling from these rows keeps ``distance(state) ≤ tokens left`` true once it holds,
        and a vocabulary with every single byte as a token then always ends accepted within
        the budget (the first byte of a shortest continuation is a token that qualifies).
        Pure query.  Raises ``ValueError`` for ``tokens_left`` < 1."""
        if tokens_left < 1:
            raise ValueError(f"tokens_left must be >= 1, got {tokens_left}")
        limit = tokens_left - 1
        if self._loose(state, limit):
            return self.fsm.mask_row_index(state)
        cuts, rows = self._cuts(state)
        if limit >= cuts[-1]:
            return self.fsm.mask_row_index(state)
        return rows[max(bisect_right(cuts, limit) - 1, 0)]

    def walk_needed(self, state: int, tokens_left: int | None) -> bool:
        """Whether :meth:`row_index` of ``state`` at ``tokens_left`` (None: no budget) would
        walk ``state``'s successors now (their rows are not known and the bounds do not settle
        it): what a row worker can compute ahead (:meth:`rows_bytes`).  Pure query."""
        if tokens_left is None or state in self.by_state:
            return False
        return not self._loose(state, max(tokens_left, 1) - 1)

    def rows_bytes(self, state: int) -> tuple[list[int], list[bytes]]:
        """``state``'s distance cuts and, per cut, its budget row as ``int32 [ceil(V/32)]``
        little-endian bytes (the last: the plain row), for another copy of this FSM
        (:meth:`put`).  One trie walk the first time, memoized."""
        cuts, rows = self._cuts(state)
        return cuts, [self.fsm._row_bytes[r] for r in rows]  # the stored bytes, not a copy

    def put(self, state: int, cuts: list[int], rows: list[bytes]) -> None:
        """Record ``state``'s budget rows computed elsewhere (:meth:`rows_bytes` of an
        equivalent state of an identical FSM; the last row is the plain one).  A state whose
        budget rows are known keeps them.  Raises ``ValueError`` for rows of the wrong length
        or a count that does not match the cuts."""
        fsm = self.fsm
        if len(rows) != len(cuts) or not rows or any(len(r) != fsm.mask_words * 4 for r in rows):
            raise ValueError(f"budget rows: one row of {fsm.mask_words * 4} bytes per cut, got {len(rows)} rows for {len(cuts)} cuts")
        with fsm._lock:
            if state in self.by_state:
                return
            idx = [fsm._store_key(bytes(r)) for r in rows]
            fsm._state_to_row.setdefault(state, idx[-1])
            self.by_state[state] = (list(cuts), idx)

    def _loose(self, state: int, limit: int) -> bool:
        """Whether every state a token leads to from ``state`` is within ``limit`` of
        acceptance by the automaton's bounds alone (no successor walk)."""
        dfa = self.fsm.dfa
        bound = self.fsm.distance_bound()
        if bound is not None and bound <= limit:
            return True
        reach = dfa.reach_bound(state)
        return reach is not None and reach <= limit

    def _cuts(self, state: int) -> Cuts:
        """``state``'s cuts and rows (see the class), walked the first time."""
        got = self.by_state.get(state)
        if got is not None:
            return got
        fsm = self.fsm
        dfa = fsm.dfa
        with fsm._lock:
            ends = np.zeros(fsm.vocab.size, dtype=np.int32)  # [V] state after each allowed token
            reached = fsm._scratch()
            bits = fsm.vocab.trie.mask_bits(dfa, state, ends=ends, reached=reached)
            if state not in fsm._state_to_row:
                fsm._store_row(state, bits)
            succ = fsm._note_successors(state, reached)
            dist = {t: dfa.distance_to_accept(t) for t in succ}
            cuts = sorted(set(dist.values())) or [0]
            rows: list[int] = []
            keep = np.zeros(dfa.num_states, dtype=bool)  # [S] successors within the cut
            for c in cuts[:-1]:
                keep[[t for t, d in dist.items() if d == c]] = True
                allowed = np.zeros(fsm.mask_words * 32, dtype=bool)  # [32 W]
                allowed[: fsm.vocab.size] = keep[ends]
                rows.append(fsm._store_bits(np.packbits(allowed, bitorder="little").view("<u4").copy(), dfa.acc[state]))
            rows.append(fsm._state_to_row[state])
            got = (cuts, rows)
            self.by_state[state] = got
            return got
