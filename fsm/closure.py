"""Epsilon closures of a lazily built NFA (what :class:`~.lazy_dfa.LazyDFA` makes its states
of): a plain depth-first search for the small ones, and an iterative Tarjan SCC search that
memoizes the closure of every state it meets for the rest.  Both expand the stubs (pending
fragments) they reach before reading their epsilon edges."""

from __future__ import annotations

from collections.abc import Callable, Mapping

Closure = tuple[frozenset[int], bool]  # (members with byte edges, whether the final state is reached)


def small_closure(
    seed: int,
    eps: list[list[int]],
    pending: Mapping[int, object],
    expand_stub: Callable[[int], None],
    has_edges: list[bool],
    final: int,
    limit: int,
) -> Closure | None:
    """Closure of ``seed`` by a plain depth-first search (the caller memoizes it), or None
    once it passes ``limit`` states: the common case without the SCC search's
    bookkeeping.  Stubs met are expanded (the SCC search then finds them built)."""
    seen = {seed}
    stack = [seed]
    while stack:
        q = stack.pop()
        if q in pending:
            expand_stub(q)
        for r in eps[q]:
            if r not in seen:
                if len(seen) >= limit:
                    return None
                seen.add(r)
                stack.append(r)
    return frozenset(q for q in seen if has_edges[q]), final in seen


def scc_closure(
    seed: int,
    memo: dict[int, Closure],
    eps: list[list[int]],
    pending: Mapping[int, object],
    expand_stub: Callable[[int], None],
    has_edges: list[bool],
    final: int,
) -> Closure:
    """Closure of ``seed``, memoizing in ``memo`` the closure of every state the search meets.

    Iterative Tarjan SCC search over epsilon edges: states of one strongly connected
    component share a closure, which is their own members with byte edges plus the closures
    of the components they reach.  A lazily unrolled counter (``x{0,2048}``: each copy's
    exit leads through the exits of all enclosing copies) then costs each exit once instead
    of once per closure through it (quadratic in the bound).  Stubs are expanded when
    reached, before their epsilon edges are read."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    parts: dict[int, tuple[set[int], bool]] = {}  # open state -> (members reached so far, final reached)
    scc_stack: list[int] = []
    work: list[tuple[int, int]] = []  # (state, next epsilon edge to follow)

    def enter(q: int) -> None:
        if q in pending:
            expand_stub(q)
        index[q] = low[q] = len(index)
        parts[q] = (set(), q == final)
        scc_stack.append(q)
        work.append((q, 0))

    enter(seed)
    while work:
        q, i = work[-1]
        succ = eps[q]
        if i < len(succ):
            work[-1] = (q, i + 1)
            r = succ[i]
            done = memo.get(r)
            if done is not None:  # a finished component: take its closure whole
                qm, qf = parts[q]
                qm.update(done[0])
                if not qf and done[1]:
                    parts[q] = (qm, True)
            elif r not in index:
                enter(r)
            elif r in parts:  # on the stack: same component
                low[q] = min(low[q], index[r])
            continue
        work.pop()
        if work:
            p = work[-1][0]
            low[p] = min(low[p], low[q])
        if low[q] != index[q]:
            continue
        comp: list[int] = []  # q roots a component: pop it and publish its closure
        members: set[int] = set()
        fin = False
        while True:
            r = scc_stack.pop()
            comp.append(r)
            m, f = parts.pop(r)
            members |= m
            fin = fin or f
            if r == q:
                break
        members.update(r for r in comp if has_edges[r])
        closure = (frozenset(members), fin)
        for r in comp:
            memo[r] = closure
        if work:  # the parent reaches this component
            p = work[-1][0]
            pm, pf = parts[p]
            pm |= members
            if fin and not pf:
                parts[p] = (pm, True)
    return memo[seed]
