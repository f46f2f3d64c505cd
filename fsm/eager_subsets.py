"""Subset construction of a built NFA run to completion with the compiled expansion steps of
:class:`~.lazy_dfa.LazyDFA` (``fsm/_lazy_expand.c``): the eager DFAs of intersections,
differences and other sub-automata built whole."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .dfa import DEAD, Budget
from .lazy_dfa import LazyDFA, has_compiled_expansion

if TYPE_CHECKING:
    from .nfa import NFABuilder


def determinize_built(builder: NFABuilder, start: int, final: int, budget: Budget) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Subset construction of a built NFA (no pending fragments) run to completion with the
    compiled expansion steps of :class:`LazyDFA`, checking ``budget``'s deadline between
    batches.  Returns ``(trans, accepting, class_of_byte, initial)`` as
    :func:`~.dfa.determinize` does (``int32 [S, C]`` with -1 = no transition, ``bool [S]``,
    ``int32 [256]``) plus the initial state; state 0 is an unreachable empty row.  Raises
    :class:`GrammarCompileError` past ``budget.max_states`` states, ``GrammarTimeoutError`` past
    the deadline, ``RuntimeError`` without the compiled extension."""
    if not has_compiled_expansion():
        raise RuntimeError("determinize_built needs the compiled extension fsm/_lazy_expand.c")
    dfa = LazyDFA(builder, start, final, budget.max_states)
    s = 1
    while s < len(dfa.sets):
        budget.check_time()
        s = dfa.expand_batch(s, budget.max_states + dfa.num_classes + 1)  # the state cap raises first
    n = len(dfa.sets)
    trans = dfa.table[:n].copy()  # [S, C]
    trans[trans == DEAD] = -1
    return trans, np.array(dfa.acc, dtype=bool), dfa.class_of_byte, dfa.initial
