"""``compile_lazy``: an anchor-free IR node → a :class:`~.lazy_dfa.LazyDFA` whose states are built
on demand, after pruning the IR's empty sub-languages so that every NFA state can reach
acceptance."""

from __future__ import annotations

import numpy as np
from structgen.schemas.charset import utf8_sequences
from structgen.schemas.ir import NOTHING, Alt, And, Automaton, Chars, Join, Lit, Members, Minus, Node, Rep, Seq

from .dfa import Budget
from .dfa_paths import NO_PATH
from .errors import GrammarCompileError
from .lazy_dfa import LazyDFA
from .nfa import NFABuilder
from .product_cache import ProductCache
from .prune import prune


def compile_lazy(node: Node, budget: Budget | None = None, shared: ProductCache | None = None) -> LazyDFA:
    """Compile an anchor-free IR node into a :class:`LazyDFA` (only the initial state is built).
    Raises :class:`GrammarCompileError` for an IR nested too deeply to walk, and the budget's
    errors past its limits.

    Sub-automata of ``And`` / ``Minus`` are built eagerly under ``budget``; the returned
    automaton caps its discovered states at ``budget.max_states``.  ``shared``: where those
    eager sub-automata are kept across compiles (:class:`ProductCache`).  The empty language
    gives ``initial == 0``.
    """
    budget = budget or Budget()
    builder = NFABuilder(budget, lazy=True, shared=shared)
    try:
        pruned = prune(node, builder, {})
        if pruned is NOTHING:
            pruned = Alt(())
        builder.nfa.bounds.update(byte_bounds(pruned, builder))
        start, end = builder.build(pruned)
        budget.check_time()
        dfa = LazyDFA(builder, start, end, budget.max_states)
        dfa.bound_root = pruned  # its worst distance: worked out when first asked for
        longest = builder.lengths.longest(pruned)
    except RecursionError:  # an IR nested deeper than the interpreter's stack (every pass here recurses)
        raise GrammarCompileError("the constraint is nested too deeply to compile") from None
    dfa.length_bound = None if longest >= NO_PATH else longest
    builder.release_keys()  # the cross-compile keys are not needed past the compile
    # later expansions happen while serving: the compile deadline no longer applies, the caps do
    serving = Budget(timeout_s=1e9, max_states=budget.max_states, max_nfa_states=budget.max_nfa_states)
    builder.budget = serving
    builder.nfa.budget = serving
    return dfa


def byte_bounds(node: Node, builder: NFABuilder) -> set[int]:
    """Every byte class boundary the NFA of ``node`` can ever need (sub-automata included): for
    each byte range an edge may carry, its first byte and the byte past its last."""
    out: set[int] = set()
    seen: set[int] = set()
    classes: set[tuple[tuple[int, int], ...]] = set()  # character classes already spelled out
    single: set[int] = set()  # the bytes of literals
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, Lit):
            single.update(n.data)
        elif isinstance(n, Chars):
            if n.cs.ranges not in classes:  # one class under many properties: its sequences once
                classes.add(n.cs.ranges)
                for sq in utf8_sequences(n.cs):
                    for lo, hi in sq:
                        out.add(lo)
                        out.add(hi + 1)
        elif isinstance(n, And) and (counted := builder.counted(n)) is not None:
            for runs in counted.edges:
                for lo, hi, _t, _c in runs:
                    out.add(lo)
                    out.add(hi + 1)
        elif isinstance(n, (And, Minus, Automaton)):
            table = builder.product(n).table  # [S, 256], memoized: built while pruning
            out.update((np.flatnonzero((table[:, 1:] != table[:, :-1]).any(axis=0)) + 1).tolist())  # where a column changes
        elif isinstance(n, (Seq, Alt)):
            stack.extend(n.items)
        elif isinstance(n, Rep):
            stack.append(n.item)
        elif isinstance(n, Join):
            stack.extend((n.item, n.sep))
        elif isinstance(n, Members):
            stack.extend(m for m, _ in n.items)
            stack.append(n.sep)
            if n.extra is not None:
                stack.append(n.extra)
    out.update(single)
    out.update(b + 1 for b in single)
    return out
