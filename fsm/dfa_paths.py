"""Path lengths of eager byte DFAs (shortest and longest accepted strings, the largest distance to
acceptance), the distances to acceptance of every state of a complete transition table
(breadth-first searches, backwards from the accepting states where every state is asked), and
the largest such distance among the states each state can reach; and the distances to
acceptance of a lazily built NFA, extended as it grows."""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .dfa import DEAD, ByteDFA

_c_distances: Any
_c_reach_max: Any
_c_extend: Any
try:  # the compiled searches (fsm/_paths.c); optional, see setup.py
    from ._paths import distances_to_accept as _c_distances
    from ._paths import extend_nfa_distances as _c_extend
    from ._paths import reach_max as _c_reach_max
except ImportError:  # pragma: no cover - exercised when no C compiler was available at install
    _c_distances = _c_reach_max = _c_extend = None


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
    return longest_path(dfa.initial, lambda q: [t for t in np.unique(dfa.table[q]).tolist() if t != DEAD], dfa.accepting)


def longest_path(start: int, successors: Callable[[int], list[int]], accepting: Sequence[bool] | np.ndarray) -> int | None:
    """Edges on the longest path from ``start`` to an accepting state of an automaton whose
    states are all live (each reaches acceptance), or None when a cycle is reachable from
    ``start`` (it repeats forever).  ``successors(q)``: the distinct live states one byte leads
    to from ``q`` (called once per state); ``accepting[q]``: whether ``q`` accepts.  An
    iterative depth-first search, each state finished once."""
    longest: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[int, list[int], list[int]]] = []  # (state, successors, successors left to visit)

    def push(q: int) -> None:
        succ = successors(q)
        on_path.add(q)
        stack.append((q, succ, list(succ)))

    push(start)
    while stack:
        q, succ, todo = stack[-1]
        if todo:
            t = todo.pop()
            if t in on_path:
                return None
            if t not in longest:
                push(t)
            continue
        stack.pop()
        on_path.discard(q)
        longest[q] = max([0 if accepting[q] else -1] + [longest[t] + 1 for t in succ])  # live: -1 never wins
    return longest[start]


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
    in C over the reverse edges grouped by a counting sort (``fsm/_paths.c``) where it is
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


def reach_max(table: np.ndarray, dist: np.ndarray, *, use_compiled: bool = True) -> np.ndarray:
    """For every state of a complete transition table, the largest ``dist`` among the states it
    can reach, itself included: ``table`` ``int32 [n, C]`` (every row expanded, state 0 dead,
    edges into it ignored), ``dist`` ``int64 [n]`` (:func:`distances_to_accept`).  Returns
    ``int64 [n]``.  An upper bound on the distance of any state a token can lead to, so a
    budget at least this large cannot bind.  Strongly connected components by Tarjan's
    algorithm (Tarjan 1972), each finished after every component it reaches: in C
    (``fsm/_paths.c``) where built and ``use_compiled``, else the same search in Python.
    Raises ``ValueError`` for shapes that disagree or a row not expanded (negative)."""
    n = table.shape[0]
    if table.ndim != 2 or dist.shape != (n,) or n < 1:
        raise ValueError(f"table [n, C] and dist [n] must agree (n >= 1), got {list(table.shape)} and {list(dist.shape)}")
    if int(table.min()) < 0:
        raise ValueError("every row of the table must be expanded (no negative targets)")
    out = np.zeros(n, dtype=np.int64)
    if use_compiled and _c_reach_max is not None:
        _c_reach_max(np.ascontiguousarray(table, dtype=np.int32), n, table.shape[1], np.ascontiguousarray(dist, dtype=np.int64), out)
        return out
    succ = [sorted({int(t) for t in row if t != DEAD}) for row in table.tolist()]
    d = [int(x) for x in dist.tolist()]
    index = [-1] * n
    low = [0] * n
    done = [False] * n
    done[DEAD], out[DEAD] = True, d[DEAD]
    stack: list[int] = []
    counter = 0
    for root in range(1, n):
        if index[root] >= 0:
            continue
        frames = [(root, iter(succ[root]))]
        index[root] = low[root] = counter = counter + 1
        stack.append(root)
        while frames:
            v, it = frames[-1]
            w = next(it, None)
            if w is not None:
                if index[w] < 0:
                    index[w] = low[w] = counter = counter + 1
                    stack.append(w)
                    frames.append((w, iter(succ[w])))
                elif not done[w]:
                    low[v] = min(low[v], index[w])
                continue
            frames.pop()
            if frames:
                low[frames[-1][0]] = min(low[frames[-1][0]], low[v])
            if low[v] != index[v]:
                continue
            members = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            member_set = set(members)
            m = max(d[x] for x in members)
            m = max([m] + [int(out[w]) for x in members for w in succ[x] if w not in member_set])
            for x in members:
                out[x] = m
                done[x] = True
    return out


def extend_nfa_distances(
    dist: list[int],
    eps: Sequence[Sequence[int]],
    edges: Sequence[Sequence[tuple[int, int, int]]],
    final: int,
    n0: int,
    pending: Mapping[int, tuple[Any, int]],
    shortest: Callable[[Any], int],
    *,
    use_compiled: bool = True,
) -> None:
    """Extend ``dist`` (bytes from each NFA state to ``final``, exact for states ``< n0``) to the
    states added since, ``n0 .. len(eps) - 1``, in place: Dijkstra (Dijkstra 1959) over the new
    states only, with edges of cost 0 (epsilon), 1 (a byte range) and, from a stub still
    ``pending`` (``state -> (node, exit)``), ``shortest(node)`` to its exit.  Sound because
    fragments only ever grow: a new state leaves its fragment through exits into older states,
    whose distances are already exact.  Unreachable states get :data:`NO_PATH`.  In C
    (``fsm/_paths.c``) where built and ``use_compiled``, else in Python; the same result."""
    n1 = len(eps)
    dist.extend([NO_PATH] * (n1 - n0))
    if use_compiled and _c_extend is not None and isinstance(eps, list) and isinstance(edges, list):
        if len(pending) <= n1 - n0:  # the stubs among the new states: through whichever is shorter
            stubs = [(q, stub[1], shortest(stub[0])) for q, stub in pending.items() if n0 <= q < n1]
        else:
            stubs = [(q, stub[1], shortest(stub[0])) for q in range(n0, n1) if (stub := pending.get(q)) is not None]
        _c_extend(dist, eps, edges, final, n0, stubs, NO_PATH)
        return
    rev: defaultdict[int, list[tuple[int, int]]] = defaultdict(list)  # new state -> [(new predecessor, cost)]
    heap: list[tuple[int, int]] = []
    if n0 <= final < n1:
        dist[final] = 0
        heap.append((0, final))
    for q in range(n0, n1):  # each edge q -> r of cost 0 / 1 / a stub's shortest length
        best = dist[q]
        for r in eps[q]:
            if r >= n0:
                rev[r].append((q, 0))
            elif dist[r] < best:
                best = dist[r]
        for _lo, _hi, r in edges[q]:
            if r >= n0:
                rev[r].append((q, 1))
            elif dist[r] + 1 < best:
                best = dist[r] + 1
        stub = pending.get(q)
        if stub is not None:
            r, cost = stub[1], shortest(stub[0])
            if r >= n0:
                rev[r].append((q, cost))
            elif dist[r] + cost < best:
                best = dist[r] + cost
        if best < dist[q]:
            dist[q] = best
            heapq.heappush(heap, (best, q))
    while heap:
        d, r = heapq.heappop(heap)
        if d > dist[r]:
            continue
        for q, cost in rev.get(r, ()):
            if d + cost < dist[q]:
                dist[q] = d + cost
                heapq.heappush(heap, (d + cost, q))
