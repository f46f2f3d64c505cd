"""``compile_lazy``: an anchor-free IR node → a :class:`~.lazy_dfa.LazyDFA` whose states are built
on demand, after pruning the IR's empty sub-languages so that every NFA state can reach
acceptance."""

from __future__ import annotations

from structgen.schemas.ir import NOTHING, Alt, Node

from .dfa import Budget
from .dfa_paths import NO_PATH
from .errors import GrammarCompileError
from .lazy_dfa import LazyDFA
from .nfa import NFABuilder, byte_ranges
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
        for lo, hi in byte_ranges(pruned, builder):
            builder.nfa.bounds.add(lo)
            builder.nfa.bounds.add(hi + 1)
        start, end = builder.build(pruned)
        budget.check_time()
        dfa = LazyDFA(builder, start, end, budget.max_states)
        dfa.distance_bound = builder.lengths.worst_distance(pruned)
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
