"""Eager byte DFAs: subset construction over byte equivalence classes, trimming (states that
cannot reach acceptance become the dead state 0), minimisation (Hopcroft's partition refinement
in ``fsm/_minimize.c``, else Moore's in numpy), the product automata of intersections and
differences, forced strings; path lengths and distances to acceptance are in
:mod:`.dfa_paths`.  Textbook constructions: Hopcroft, Motwani & Ullman, *Introduction to
Automata Theory*, ch. 2 and 4; J. Hopcroft, "An n log n algorithm for minimizing states in a
finite automaton" (1971).

All work is bounded by a :class:`Budget` (wall-clock deadline and state caps); exceeding it
raises :class:`GrammarTimeoutError` / :class:`GrammarCompileError` naming the limit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import GrammarCompileError, GrammarTimeoutError

_c_minimize: Any
_c_refine_byte_classes: Any
_c_coreachable: Any
_c_forced_strings: Any
try:  # minimization, byte classes, co-reachability, forced strings (fsm/_minimize.c); optional, see setup.py
    from ._minimize import coreachable as _c_coreachable
    from ._minimize import forced_strings as _c_forced_strings
    from ._minimize import minimize as _c_minimize
    from ._minimize import refine_byte_classes as _c_refine_byte_classes
except ImportError:  # pragma: no cover - exercised when no C compiler was available at install
    _c_minimize = _c_refine_byte_classes = _c_coreachable = _c_forced_strings = None

if TYPE_CHECKING:
    from .nfa_graph import NFA

DEAD = 0


@dataclass
class Budget:
    """Limits for one compilation.

    ``timeout_s``: wall-clock seconds from construction; ``max_states``: cap on DFA states
    (each automaton, including intermediate products); ``max_nfa_states``: cap on NFA states.
    """

    timeout_s: float = 10.0
    max_states: int = 50_000
    max_nfa_states: int = 2_000_000
    deadline: float = field(default=0.0)

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.max_states <= 0 or self.max_nfa_states <= 0:
            raise ValueError("Budget limits must be positive")
        self.deadline = time.perf_counter() + self.timeout_s

    def check_time(self) -> None:
        if time.perf_counter() > self.deadline:
            raise GrammarTimeoutError(f"grammar compilation exceeded timeout_s={self.timeout_s:g}")

    def check_states(self, n: int) -> None:
        if n > self.max_states:
            raise GrammarCompileError(f"automaton exceeds max_states={self.max_states} DFA states")


@dataclass(frozen=True, eq=False)
class ByteDFA:
    """A trimmed deterministic automaton over bytes.

    - ``table``: ``int32 [S, 256]``; ``table[s, b]`` is the next state; state 0 is the dead
      state (all transitions to 0, never accepting).  Every other state can reach an accepting
      state (trimmed), so a walk that stays out of state 0 can always be completed.
    - ``accepting``: ``bool [S]``.
    - ``initial``: the start state (0 only for the empty language).
    - ``forced``: per state, the longest byte string that every accepted continuation starts
      with (empty at accepting or branching states).

    Immutable and picklable.
    """

    table: np.ndarray
    accepting: np.ndarray
    initial: int
    forced: tuple[bytes, ...]

    @property
    def num_states(self) -> int:
        return int(self.table.shape[0])

    def is_empty(self) -> bool:
        return self.initial == DEAD

    def walk(self, state: int, data: bytes) -> int:
        """State after reading ``data`` from ``state`` (0 if it dies). Does not change self."""
        t = self.table
        for b in data:
            state = int(t[state, b])
            if state == DEAD:
                return DEAD
        return state

    def accepts(self, data: bytes) -> bool:
        s = self.walk(self.initial, data)
        return s != DEAD and bool(self.accepting[s])


# ----------------------------------------------------------------------------- subset construction


def determinize(nfa: NFA, start: int, final: int, budget: Budget) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Subset construction. Returns (trans [S, C] int32 with -1 = none, accepting [S], class_of_byte [256])."""
    bounds = {0, 256}
    for out in nfa.edges:
        for lo, hi, _ in out:
            bounds.add(lo)
            bounds.add(hi + 1)
    cuts = sorted(bounds)
    class_of_byte = np.zeros(256, dtype=np.int32)
    for c, (a, b) in enumerate(zip(cuts, cuts[1:])):
        class_of_byte[a:b] = c
    num_classes = len(cuts) - 1
    cls_edges: list[list[tuple[int, int, int]]] = [
        [(int(class_of_byte[lo]), int(class_of_byte[hi]), t) for lo, hi, t in out] for out in nfa.edges
    ]
    eps = nfa.eps
    has_edges = [bool(e) for e in nfa.edges]

    def closure(seeds: list[int]) -> tuple[frozenset[int], bool]:
        seen = set(seeds)
        stack = list(seeds)
        while stack:
            q = stack.pop()
            for r in eps[q]:
                if r not in seen:
                    seen.add(r)
                    stack.append(r)
        return frozenset(q for q in seen if has_edges[q]), final in seen

    start_key = closure([start])
    index: dict[tuple[frozenset[int], bool], int] = {start_key: 0}
    sets = [start_key[0]]
    accepting = [start_key[1]]
    rows: list[list[int]] = []
    i = 0
    while i < len(sets):
        if i % 256 == 255:
            budget.check_time()
        moves: dict[int, list[int]] = {}
        for q in sets[i]:
            for clo, chi, t in cls_edges[q]:
                for c in range(clo, chi + 1):
                    lst = moves.get(c)
                    if lst is None:
                        moves[c] = [t]
                    else:
                        lst.append(t)
        row = [-1] * num_classes
        by_targets: dict[tuple[int, ...], int] = {}
        for c, targets in moves.items():
            tkey = tuple(sorted(set(targets)))
            d = by_targets.get(tkey)
            if d is None:
                key = closure(list(tkey))
                d = index.get(key, -1)
                if d < 0:
                    if not key[0] and not key[1]:
                        continue
                    d = len(sets)
                    index[key] = d
                    sets.append(key[0])
                    accepting.append(key[1])
                    budget.check_states(len(sets))
                by_targets[tkey] = d
            row[c] = d
        rows.append(row)
        i += 1
    trans = np.array(rows, dtype=np.int32).reshape(len(rows), num_classes)
    return trans, np.array(accepting, dtype=bool), class_of_byte


def trim_and_minimize(
    trans: np.ndarray,
    accepting: np.ndarray,
    class_of_byte: np.ndarray,
    initial: int,
    budget: Budget,
    minimize: bool,
    *,
    use_compiled: bool = True,
) -> ByteDFA:
    """Drop states that cannot reach acceptance, optionally minimise, renumber with dead = 0.

    ``trans``: ``int32 [S, C]`` over ``C`` byte classes, -1 for no transition; ``accepting``:
    ``bool [S]``; ``class_of_byte``: ``int32 [256]``.  Co-reachability and minimization
    (Hopcroft's algorithm) run in C where ``fsm/_minimize.c`` is built and ``use_compiled``,
    else in numpy (Moore's refinement, up to ``_MOORE_MAX_STATES`` states); the same automaton
    up to state numbering."""
    n, c = trans.shape
    live = _coreachable(trans, accepting, use_compiled=use_compiled)  # [S]
    # map: dead/pruned -> 0, live states -> 1..L ; add an explicit dead row
    full = np.where(trans >= 0, trans, n)  # n = sink
    full = np.vstack([full, np.full((1, c), n, dtype=full.dtype)])
    live_ext = np.concatenate([live, [False]])
    full = np.where(live_ext[full], full, n)
    acc_ext = np.concatenate([accepting & live, [False]])
    if not live[initial]:
        return empty_dfa()
    part = _minimal_partition(full, acc_ext, live_ext, n, budget, use_compiled) if minimize else None
    if part is None:
        # renumber live states only
        part = np.zeros(n + 1, dtype=np.int64)
        part[np.flatnonzero(live_ext)] = np.arange(1, int(live_ext.sum()) + 1)
    # part: block id per state, dead sink block = 0
    num = int(part.max()) + 1
    rep = np.zeros(num, dtype=np.int64)
    rep[part] = np.arange(n + 1)
    table_cls = part[full[rep]].astype(np.int32)  # [num, C]
    table_cls[0] = 0
    acc = acc_ext[rep].copy()
    acc[0] = False
    table = np.take(table_cls, class_of_byte, axis=1)  # [num, 256], C order (a[:, idx] is not)
    init = int(part[initial])
    forced = forced_strings(table, acc, use_compiled=use_compiled)
    return ByteDFA(table=np.ascontiguousarray(table), accepting=acc, initial=init, forced=forced)


def _coreachable(trans: np.ndarray, accepting: np.ndarray, *, use_compiled: bool = True) -> np.ndarray:
    """``bool [S]``: the states of ``trans`` (``[S, C]``, -1 for no edge) that reach an
    accepting one; a breadth-first search backwards over the reversed edges, in C where
    ``fsm/_minimize.c`` is built and ``use_compiled`` (``coreachable`` there), else over a CSR
    in numpy."""
    n, c = trans.shape
    if use_compiled and _c_coreachable is not None:
        live = np.empty(n, dtype=bool)  # [S]
        _c_coreachable(np.ascontiguousarray(trans, dtype=np.int32), n, c, np.ascontiguousarray(accepting, dtype=bool), live)
        return live
    src = np.repeat(np.arange(n, dtype=np.int64), c)
    dst = trans.reshape(-1).astype(np.int64)
    ok = dst >= 0
    src, dst = src[ok], dst[ok]
    order = np.argsort(dst, kind="stable")
    rsrc = src[order]
    indptr = np.searchsorted(dst[order], np.arange(n + 1))
    live = np.asarray(accepting, dtype=bool).copy()
    frontier = np.flatnonzero(live)
    while frontier.size:
        lens = indptr[frontier + 1] - indptr[frontier]  # [F] each frontier state's predecessor count
        # the frontier's CSR segments gathered at once: segment i starts at indptr[f_i]
        at = np.repeat(indptr[frontier] - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        preds = np.unique(rsrc[at])
        preds = preds[~live[preds]]
        live[preds] = True
        frontier = preds
    return live


def _minimal_partition(
    full: np.ndarray, acc: np.ndarray, live: np.ndarray, sink: int, budget: Budget, use_compiled: bool
) -> np.ndarray | None:
    """Block per state of the minimal automaton (``int64 [M]``, the sink's block 0) for the
    complete table ``full`` ``[M, C]`` whose dead states all lead to ``sink``; None when Moore's
    refinement is skipped (too many states) or does not converge."""
    if use_compiled and _c_minimize is not None:
        m, c = full.shape
        labels = np.where(live, np.where(acc, 2, 1), 0).astype(np.int64)  # [M] dead / live / accepting
        part = np.empty(m, dtype=np.int64)  # [M]
        _c_minimize(np.ascontiguousarray(full, dtype=np.int32), m, c, labels, part)
        sink_block = part[sink]
        return np.where(part == sink_block, 0, part + (part < sink_block))  # the sink's block first
    if full.shape[0] - 1 > _MOORE_MAX_STATES:
        return None
    return _moore(full, acc, live, sink, budget)


_MOORE_MAX_STATES = 20_000
_MOORE_MAX_ITERATIONS = 256


def _moore(full: np.ndarray, acc: np.ndarray, live: np.ndarray, sink: int, budget: Budget) -> np.ndarray | None:
    """Moore partition refinement with 128-bit signatures; sink block is 0.

    Returns None if it does not converge within its iteration cap (the caller then keeps the
    unminimised, still correct, automaton).
    """
    m, c = full.shape
    rng = np.random.default_rng(0x5EED)
    k1 = rng.integers(1, 2**62, size=c + 1, dtype=np.uint64) | np.uint64(1)
    k2 = rng.integers(1, 2**62, size=c + 1, dtype=np.uint64) | np.uint64(1)
    part = np.where(live, np.where(acc, 2, 1), 0).astype(np.int64)
    blocks = len(np.unique(part))
    for it in range(_MOORE_MAX_ITERATIONS):
        if it % 16 == 15:
            budget.check_time()
        nb = part[full].astype(np.uint64)  # [M, C]
        with np.errstate(over="ignore"):
            h1 = (nb * k1[1:]).sum(axis=1, dtype=np.uint64) + part.astype(np.uint64) * k1[0]
            h2 = (nb * k2[1:]).sum(axis=1, dtype=np.uint64) + part.astype(np.uint64) * k2[0]
        order = np.lexsort((h2, h1))
        sh1, sh2 = h1[order], h2[order]
        starts = np.empty(m, dtype=bool)
        starts[0] = True
        starts[1:] = (sh1[1:] != sh1[:-1]) | (sh2[1:] != sh2[:-1])
        inv = np.empty(m, dtype=np.int64)
        inv[order] = np.cumsum(starts) - 1
        new_blocks = int(inv.max()) + 1
        # make the sink's block 0
        sink_block = inv[sink]
        inv = np.where(inv == sink_block, -1, inv)
        inv = np.where(inv > sink_block, inv - 1, inv) + 1
        if new_blocks == blocks:
            return inv.astype(np.int64)
        blocks = new_blocks
        part = inv.astype(np.int64)
    return None


def forced_strings(table: np.ndarray, accepting: np.ndarray, *, use_compiled: bool = True) -> tuple[bytes, ...]:
    """Per state of the byte table ``table`` (``int32 [S, 256]``, row 0 dead; ``accepting``
    ``bool [S]``), the bytes every continuation starts with: the chain of non-accepting states
    with one live byte each, followed from it (``b""`` for the others).  In C where
    ``fsm/_minimize.c`` is built and ``use_compiled`` (``forced_strings`` there), else here; a
    trimmed table has no such chain that closes on itself (its states could not reach
    acceptance)."""
    if use_compiled and _c_forced_strings is not None:
        return _c_forced_strings(np.ascontiguousarray(table, dtype=np.int32), np.ascontiguousarray(accepting, dtype=bool))  # type: ignore[no-any-return]
    n = table.shape[0]
    live_counts = (table != DEAD).sum(axis=1)
    first_live = np.argmax(table != DEAD, axis=1)
    single = (live_counts == 1) & ~accepting
    single[0] = False
    forced: list[bytes | None] = [None if one else b"" for one in single.tolist()]  # only single states force bytes
    for s in np.flatnonzero(single).tolist():
        if forced[s] is not None:
            continue
        chain: list[int] = []
        cur = s
        while forced[cur] is None and single[cur] and len(chain) <= n:
            chain.append(cur)
            cur = int(table[cur, first_live[cur]])
        known = forced[cur]
        tail: bytes = known if known is not None else b""
        if known is None:
            forced[cur] = b""
        for st in reversed(chain):
            tail = bytes([int(first_live[st])]) + tail
            forced[st] = tail
    return tuple(f if f is not None else b"" for f in forced)


def empty_dfa() -> ByteDFA:
    return ByteDFA(table=np.zeros((1, 256), dtype=np.int32), accepting=np.zeros(1, dtype=bool), initial=DEAD, forced=(b"",))


_CLASS_KEYS = np.random.default_rng(0xC1A55).integers(1, 2**63, size=(2, 1 << 16), dtype=np.uint64) | np.uint64(1)


def byte_classes(*tables: np.ndarray, use_compiled: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Bytes whose columns agree in every table share a class.  ``tables``: integer ``[S_i, 256]``
    transition tables.  Returns ``(rep_bytes, class_of_byte)``: ``int64 [C]``, each class's first
    byte, ascending (classes are numbered by it), and ``int32 [256]``.

    With the C extension (and ``use_compiled``), one pass over each table's rows refines the
    partition (``refine_byte_classes`` in fsm/_minimize.c: a row costs 256 compares unless it
    splits a class, which at most 255 rows do).  Otherwise each column is hashed to 128 bits
    (a random linear combination of its entries, two keys, arithmetic mod 2**64) and bytes are
    grouped by hash: O(S * 256) instead of a lexicographic sort of the 256 columns.  The
    grouping is then checked entry by entry, and an exact ``np.unique`` over the columns takes
    over in the (astronomically unlikely) case of a collision, so the result is always exact."""
    if use_compiled and _c_refine_byte_classes is not None:
        class_of_byte = np.zeros(256, dtype=np.int32)  # [256]
        for t in tables:
            _c_refine_byte_classes(np.ascontiguousarray(t, dtype=np.int32), class_of_byte)
        _, rep = np.unique(class_of_byte, return_index=True)  # classes are numbered by their first byte
        return rep.astype(np.int64), class_of_byte
    h = np.zeros((2, 256), dtype=np.uint64)  # [2, 256]
    with np.errstate(over="ignore"):
        for t in tables:
            for lo in range(0, t.shape[0], _CLASS_KEYS.shape[1]):
                part = t[lo : lo + _CLASS_KEYS.shape[1]].astype(np.uint64)  # [s, 256]
                h += _CLASS_KEYS[:, : part.shape[0]] @ part  # [2, 256]
            h = h * np.uint64(0x9E3779B97F4A7C15) + np.uint64(1)  # tables apart: (x, y) and (y, x) differ
    rep_bytes, class_of_byte = _grouped(h.T)
    rep_of_byte = rep_bytes[class_of_byte]  # [256]
    if all(np.array_equal(t[:, rep_of_byte], t) for t in tables):
        return rep_bytes, class_of_byte
    return _grouped(np.concatenate(tables, axis=0).T)  # [256, sum S_i]: exact


def _grouped(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``keys`` ``[256, K]`` grouped by equality: (each group's first row ``int64 [C]``,
    ascending; the group of each row ``int32 [256]``, groups numbered by their first row)."""
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)  # [G], [256]
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return first[order].astype(np.int64), rank[inverse.reshape(-1)].astype(np.int32)


def product_dfa(a: ByteDFA, b: ByteDFA, budget: Budget, *, minus: bool) -> ByteDFA:
    """Product automaton: intersection, or ``a`` minus ``b`` when ``minus``."""
    if a.is_empty() or (b.is_empty() and not minus):
        return empty_dfa()
    rep_bytes, class_of_byte = byte_classes(a.table, b.table)
    ta = np.take(a.table, rep_bytes, axis=1)  # [Sa, C]
    tb = np.take(b.table, rep_bytes, axis=1)  # [Sb, C]
    c = len(rep_bytes)
    sb = tb.shape[0]
    # breadth-first, a whole level at a time: a pair (x, y) is the code x * Sb + y, and only the
    # distinct codes a level reaches go through the Python dict (not every state × class)
    index: dict[int, int] = {a.initial * sb + b.initial: 0}
    order = [(a.initial, b.initial)]
    rows: list[np.ndarray] = []
    lo = 0
    while lo < len(order):
        budget.check_time()
        hi = len(order)
        ps = np.array([p for p, _q in order[lo:hi]], dtype=np.int64)  # [F]
        qs = np.array([q for _p, q in order[lo:hi]], dtype=np.int64)  # [F]
        x = ta[ps].astype(np.int64)  # [F, C]
        y = tb[qs].astype(np.int64)  # [F, C]
        live = x != DEAD if minus else (x != DEAD) & (y != DEAD)  # [F, C]
        code = x * sb + y  # [F, C]
        reached = np.unique(code[live])  # [U] sorted
        ids = np.empty(len(reached), dtype=np.int32)  # [U]
        for k, cd in enumerate(reached.tolist()):
            d = index.get(cd)
            if d is None:
                d = index[cd] = len(order)
                order.append(divmod(cd, sb))
            ids[k] = d
        budget.check_states(len(order))
        level = np.full((hi - lo, c), -1, dtype=np.int32)  # [F, C]
        level[live] = ids[np.searchsorted(reached, code[live])]
        rows.extend(level)
        lo = hi
    trans = np.stack(rows)
    acc = np.array([bool(a.accepting[p]) and (not bool(b.accepting[q]) if minus else bool(b.accepting[q])) for p, q in order])
    return trim_and_minimize(trans, acc, class_of_byte, 0, budget, minimize=True)
