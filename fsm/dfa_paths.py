"""Path lengths of eager byte DFAs (shortest and longest accepted strings, the largest distance to
acceptance) and the distances to acceptance of every state of a complete transition table
(breadth-first searches, backwards from the accepting states where every state is asked)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .dfa import DEAD, ByteDFA

_c_distances: Any
try:  # the compiled breadth-first search (fsm/_lazy_expand.c); optional, see setup.py
    from ._lazy_expand import distances_to_accept as _c_distances
except ImportError:  # pragma: no cover - exercised when no C compiler was available at install
    _c_distances = None


NO_PATH = 1 << 40
"""Distance of a state (or length of a language) with no accepted string: larger than any real one."""


def worst_dfa(dfa: ByteDFA) -> int:
    """The largest distance to acceptance over the live states of an eager :class:`ByteDFA`
    (0 for the empty language): :func:`distances_to_accept` over its table."""
    if dfa.num_states < 2:
        return 0
    return int(distances_to_accept(dfa.table, dfa.accepting)[1:].max())


def longest_dfa(dfa: ByteDFA) -> int | None:
    """Bytes in the longest string an eager, trimmed :class:`ByteDFA` accepts; None when a
    cycle makes it unbounded (every live state is on an accepting path)."""
    if dfa.is_empty():
        return 0
    longest: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[int, list[int]]] = []

    def succ(q: int) -> list[int]:
        return [t for t in np.unique(dfa.table[q]).tolist() if t != DEAD]

    stack.append((dfa.initial, succ(dfa.initial)))
    on_path.add(dfa.initial)
    while stack:
        q, todo = stack[-1]
        if todo:
            t = todo.pop()
            if t in on_path:
                return None
            if t not in longest:
                on_path.add(t)
                stack.append((t, succ(t)))
            continue
        stack.pop()
        on_path.discard(q)
        longest[q] = max([0 if dfa.accepting[q] else -1] + [longest[t] + 1 for t in succ(q)])
    return longest[dfa.initial]


def shortest_dfa(dfa: ByteDFA) -> int:
    """Bytes in the shortest string an eager :class:`ByteDFA` accepts (``NO_PATH`` if none): the
    initial state's distance to acceptance."""
    if dfa.is_empty():
        return NO_PATH
    return int(distances_to_accept(dfa.table, dfa.accepting)[dfa.initial])


def distances_to_accept(table: np.ndarray, accepting: np.ndarray, *, use_compiled: bool = True) -> np.ndarray:
    """Bytes in the shortest accepted continuation from each state of a complete transition
    table: ``table`` ``int32 [n, C]`` (every row expanded, state 0 dead), ``accepting`` ``bool
    [n]``.  Returns ``int64 [n]``: 0 for accepting states, ``NO_PATH`` for states that reach no
    accepting one (the dead state).  A breadth-first search backwards from the accepting states:
    in C over the reverse edges grouped by a counting sort (``fsm/_lazy_expand.c``) where it is
    built and ``use_compiled``, else in numpy over the distinct (state, successor) pairs; the
    same result.  Raises ``ValueError`` for shapes that disagree or a row not expanded
    (negative)."""
    n = table.shape[0]
    if table.ndim != 2 or accepting.shape != (n,):
        raise ValueError(f"table [n, C] and accepting [n] must agree, got {list(table.shape)} and {list(accepting.shape)}")
    if n and int(table.min()) < 0:
        raise ValueError("every row of the table must be expanded (no negative targets)")
    if use_compiled and _c_distances is not None and n:
        dist = np.full(n, NO_PATH, dtype=np.int64)
        flat = np.ascontiguousarray(table, dtype=np.int32)  # [n, C]
        _c_distances(flat, n, table.shape[1], np.ascontiguousarray(accepting, dtype=bool), dist)
        return dist
    src = np.repeat(np.arange(n, dtype=np.int64), table.shape[1])  # [n*C]
    dst = table.reshape(-1).astype(np.int64)  # [n*C]
    pairs = np.unique(dst * n + src)  # distinct (successor, state) pairs, sorted by successor
    succ, pred = np.divmod(pairs, n)
    starts = np.searchsorted(succ, np.arange(n + 1))  # [n + 1] where each successor's predecessors begin
    dist = np.full(n, NO_PATH, dtype=np.int64)
    frontier = np.flatnonzero(accepting)
    dist[frontier] = 0
    d = 0
    while frontier.size:
        d += 1
        preds = np.unique(np.concatenate([pred[starts[t] : starts[t + 1]] for t in frontier.tolist()]))
        new = preds[dist[preds] == NO_PATH]
        new = new[new != DEAD]
        dist[new] = d
        frontier = new
    return dist
