"""Shortest ways to acceptance over the byte runs of a :class:`~.length_product.CountedAutomaton`
(runs ``(lo, hi, target, completes)``, ``completes`` 1 where the byte ends a character): the
fewest characters, and the fewest bytes with the fewest characters among them, from every
state, by breadth-first searches backwards (0-1 for characters)."""

from __future__ import annotations

from collections import deque

from .dfa_paths import NO_PATH


def reverse_runs(edges: list[list[tuple[int, int, int, int]]]) -> list[list[tuple[int, int]]]:
    """Per state, the (predecessor, completes) of every run into it."""
    back: list[list[tuple[int, int]]] = [[] for _ in edges]
    for p, out in enumerate(edges):
        for _lo, _hi, t, inc in out:
            back[t].append((p, inc))
    return back


def min_chars(back: list[list[tuple[int, int]]], accepting: list[bool]) -> list[int]:
    """Fewest characters from each state to acceptance: a 0-1 breadth-first search backwards."""
    dist = [NO_PATH] * len(back)
    todo: deque[int] = deque()
    for p, acc in enumerate(accepting):
        if acc:
            dist[p] = 0
            todo.append(p)
    while todo:
        q = todo.popleft()
        for p, inc in back[q]:
            d = dist[q] + inc
            if d < dist[p]:
                dist[p] = d
                if inc:
                    todo.append(p)
                else:
                    todo.appendleft(p)
    return dist


def min_bytes(back: list[list[tuple[int, int]]], accepting: list[bool]) -> tuple[list[int], list[int]]:
    """Fewest bytes from each state to acceptance, and the fewest characters among the paths
    of that many bytes (a breadth-first search backwards, states settled in byte order)."""
    dist = [NO_PATH] * len(back)
    chars = [NO_PATH] * len(back)
    layer = [p for p, acc in enumerate(accepting) if acc]
    for p in layer:
        dist[p] = chars[p] = 0
    while layer:
        nxt: list[int] = []
        for q in layer:
            for p, inc in back[q]:
                if dist[p] == NO_PATH:
                    dist[p] = dist[q] + 1
                    chars[p] = chars[q] + inc
                    nxt.append(p)
                elif dist[p] == dist[q] + 1:
                    chars[p] = min(chars[p], chars[q] + inc)
        layer = nxt
    return dist, chars
