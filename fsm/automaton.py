"""Regex IR → byte-level DFA.

Pipeline: Thompson construction of a byte NFA (code-point classes expanded into UTF-8 byte
ranges) → subset construction over byte equivalence classes → trimming (states that cannot
reach an accepting state become the dead state 0) → Moore partition refinement (minimisation)
→ :class:`ByteDFA`.  Intersections (:class:`~structgen.schemas.regex.And`) and differences
(:class:`~structgen.schemas.regex.Minus`) are built as product automata of their operands'
DFAs and spliced back into the NFA (textbook constructions: Hopcroft, Motwani & Ullman,
*Introduction to Automata Theory*, ch. 2 and 4).

All work is bounded by a :class:`Budget` (wall-clock deadline and state caps); exceeding it
raises :class:`GrammarTimeoutError` / :class:`GrammarCompileError` naming the limit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from structgen.schemas.charset import utf8_sequences
from structgen.schemas.regex import Alt, And, Anchor, Chars, Lit, Minus, Node, Rep, Seq

from .errors import GrammarCompileError, GrammarTimeoutError

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


# ----------------------------------------------------------------------------- NFA


class _NFA:
    def __init__(self, budget: Budget) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []
        self.budget = budget

    def new(self) -> int:
        self.eps.append([])
        self.edges.append([])
        n = len(self.eps)
        if n % 4096 == 0:
            if n > self.budget.max_nfa_states:
                raise GrammarCompileError(f"automaton exceeds max_nfa_states={self.budget.max_nfa_states} NFA states")
            self.budget.check_time()
        return n - 1


class _Builder:
    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.nfa = _NFA(budget)
        self.sub_dfas: dict[int, ByteDFA] = {}

    def build(self, node: Node) -> tuple[int, int]:
        nfa = self.nfa
        if isinstance(node, Lit):
            s = cur = nfa.new()
            for b in node.data:
                nxt = nfa.new()
                nfa.edges[cur].append((b, b, nxt))
                cur = nxt
            return s, cur
        if isinstance(node, Chars):
            s, e = nfa.new(), nfa.new()
            for sq in utf8_sequences(node.cs):
                cur = s
                for k, (lo, hi) in enumerate(sq):
                    nxt = e if k == len(sq) - 1 else nfa.new()
                    nfa.edges[cur].append((lo, hi, nxt))
                    cur = nxt
            return s, e
        if isinstance(node, Seq):
            if not node.items:
                s = nfa.new()
                return s, s
            s, e = self.build(node.items[0])
            for it in node.items[1:]:
                s2, e2 = self.build(it)
                nfa.eps[e].append(s2)
                e = e2
            return s, e
        if isinstance(node, Alt):
            s, e = nfa.new(), nfa.new()
            for it in node.items:
                s2, e2 = self.build(it)
                nfa.eps[s].append(s2)
                nfa.eps[e2].append(e)
            return s, e
        if isinstance(node, Rep):
            return self.build_rep(node)
        if isinstance(node, (And, Minus)):
            dfa = self.sub_dfas.get(id(node))
            if dfa is None:
                dfa = self.product(node)
                self.sub_dfas[id(node)] = dfa
            return self.embed(dfa)
        if isinstance(node, Anchor):
            raise GrammarCompileError("regex IR still contains an anchor; resolve anchors before compiling")
        raise TypeError(f"not a regex IR node: {node!r}")

    def build_rep(self, node: Rep) -> tuple[int, int]:
        nfa = self.nfa
        s = e = nfa.new()
        for _ in range(node.lo):
            s2, e2 = self.build(node.item)
            nfa.eps[e].append(s2)
            e = e2
        if node.hi is None:
            s2, e2 = self.build(node.item)
            loop_end = nfa.new()
            nfa.eps[e].append(s2)
            nfa.eps[e].append(loop_end)
            nfa.eps[e2].append(s2)
            nfa.eps[e2].append(loop_end)
            return s, loop_end
        optional = node.hi - node.lo
        if optional:
            end = nfa.new()
            for _ in range(optional):
                s2, e2 = self.build(node.item)
                nfa.eps[e].append(s2)
                nfa.eps[e].append(end)
                e = e2
            nfa.eps[e].append(end)
            e = end
        return s, e

    def product(self, node: And | Minus) -> ByteDFA:
        if isinstance(node, And):
            dfas = [compile_dfa(it, self.budget, minimize=True) for it in node.items]
            if not dfas:
                raise GrammarCompileError("intersection of no languages")
            acc = dfas[0]
            for d in dfas[1:]:
                acc = _product(acc, d, self.budget, minus=False)
            return acc
        left = compile_dfa(node.left, self.budget, minimize=True)
        right = compile_dfa(node.right, self.budget, minimize=True)
        return _product(left, right, self.budget, minus=True)

    def embed(self, dfa: ByteDFA) -> tuple[int, int]:
        nfa = self.nfa
        s_in, s_out = nfa.new(), nfa.new()
        if dfa.is_empty():
            return s_in, s_out
        ids = {st: nfa.new() for st in range(1, dfa.num_states)}
        nfa.eps[s_in].append(ids[dfa.initial])
        for st, q in ids.items():
            row = dfa.table[st]
            if dfa.accepting[st]:
                nfa.eps[q].append(s_out)
            for lo, hi, tgt in _runs(row):
                nfa.edges[q].append((lo, hi, ids[tgt]))
        return s_in, s_out


def _runs(row: np.ndarray) -> list[tuple[int, int, int]]:
    """Maximal runs of equal non-dead targets in a 256-entry row: (lo, hi, target)."""
    change = np.flatnonzero(np.diff(row)) + 1
    starts = np.concatenate(([0], change))
    ends = np.concatenate((change - 1, [255]))
    return [(int(a), int(b), int(row[a])) for a, b in zip(starts, ends) if row[a] != DEAD]


# ----------------------------------------------------------------------------- subset construction


def _determinize(nfa: _NFA, start: int, final: int, budget: Budget) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def _trim_and_minimize(
    trans: np.ndarray, accepting: np.ndarray, class_of_byte: np.ndarray, initial: int, budget: Budget, minimize: bool
) -> ByteDFA:
    """Drop states that cannot reach acceptance, optionally minimise, renumber with dead = 0."""
    n, c = trans.shape
    # co-reachability by reverse BFS over a CSR of reversed edges
    src = np.repeat(np.arange(n, dtype=np.int64), c)
    dst = trans.reshape(-1).astype(np.int64)
    ok = dst >= 0
    src, dst = src[ok], dst[ok]
    order = np.argsort(dst, kind="stable")
    rsrc = src[order]
    indptr = np.searchsorted(dst[order], np.arange(n + 1))
    live = accepting.copy()
    frontier = np.flatnonzero(live)
    while frontier.size:
        preds = np.concatenate([rsrc[indptr[f] : indptr[f + 1]] for f in frontier])
        preds = np.unique(preds)
        preds = preds[~live[preds]]
        live[preds] = True
        frontier = preds
    # map: dead/pruned -> 0, live states -> 1..L ; add an explicit dead row
    full = np.where(trans >= 0, trans, n)  # n = sink
    full = np.vstack([full, np.full((1, c), n, dtype=full.dtype)])
    live_ext = np.concatenate([live, [False]])
    full = np.where(live_ext[full], full, n)
    acc_ext = np.concatenate([accepting & live, [False]])
    if not live[initial]:
        return _empty_dfa()
    if minimize and n <= budget.max_states:
        part = _moore(full, acc_ext, live_ext, n, budget)
    else:
        part = None
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
    table = table_cls[:, class_of_byte]
    init = int(part[initial])
    return ByteDFA(table=np.ascontiguousarray(table), accepting=acc, initial=init, forced=_forced(table, acc))


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
    for it in range(4096):
        if it % 16 == 15:
            budget.check_time()
        nb = part[full].astype(np.uint64)  # [M, C]
        with np.errstate(over="ignore"):
            h1 = (nb * k1[1:]).sum(axis=1, dtype=np.uint64) + part.astype(np.uint64) * k1[0]
            h2 = (nb * k2[1:]).sum(axis=1, dtype=np.uint64) + part.astype(np.uint64) * k2[0]
        keys = np.stack([h1, h2], axis=1)
        _, inv = np.unique(keys, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
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


def _forced(table: np.ndarray, accepting: np.ndarray) -> tuple[bytes, ...]:
    n = table.shape[0]
    live_counts = (table != DEAD).sum(axis=1)
    first_live = np.argmax(table != DEAD, axis=1)
    single = (live_counts == 1) & ~accepting
    single[0] = False
    forced: list[bytes | None] = [None] * n
    forced[0] = b""
    for s in range(n):
        if forced[s] is not None:
            continue
        chain: list[int] = []
        cur = s
        while forced[cur] is None and single[cur] and len(chain) <= n:
            chain.append(cur)
            cur = int(table[cur, first_live[cur]])
        tail = forced[cur] if forced[cur] is not None else b""
        if forced[cur] is None:
            forced[cur] = b""
        for st in reversed(chain):
            tail = bytes([int(first_live[st])]) + tail
            forced[st] = tail
    return tuple(f if f is not None else b"" for f in forced)


def _empty_dfa() -> ByteDFA:
    return ByteDFA(
        table=np.zeros((1, 256), dtype=np.int32), accepting=np.zeros(1, dtype=bool), initial=DEAD, forced=(b"",)
    )


def _product(a: ByteDFA, b: ByteDFA, budget: Budget, *, minus: bool) -> ByteDFA:
    """Product automaton: intersection, or ``a`` minus ``b`` when ``minus``."""
    if a.is_empty() or (b.is_empty() and not minus):
        return _empty_dfa()
    # joint byte classes
    columns = np.concatenate([a.table, b.table], axis=0).T  # [256, Sa + Sb]
    _, rep_bytes, class_of_byte = np.unique(columns, axis=0, return_index=True, return_inverse=True)
    class_of_byte = class_of_byte.reshape(-1).astype(np.int32)
    ta = a.table[:, rep_bytes]  # [Sa, C]
    tb = b.table[:, rep_bytes]  # [Sb, C]
    c = len(rep_bytes)
    start = (a.initial, b.initial)
    index = {start: 0}
    order = [start]
    rows: list[np.ndarray] = []
    i = 0
    while i < len(order):
        if i % 256 == 255:
            budget.check_time()
        p, q = order[i]
        na, nb = ta[p], tb[q]
        row = np.full(c, -1, dtype=np.int32)
        for j in range(c):
            x = int(na[j])
            y = int(nb[j])
            if x == DEAD or (y == DEAD and not minus):
                continue
            key = (x, y)
            d = index.get(key)
            if d is None:
                d = len(order)
                index[key] = d
                order.append(key)
                budget.check_states(len(order))
            row[j] = d
        rows.append(row)
        i += 1
    trans = np.stack(rows)
    acc = np.array(
        [bool(a.accepting[p]) and (not bool(b.accepting[q]) if minus else bool(b.accepting[q])) for p, q in order]
    )
    return _trim_and_minimize(trans, acc, class_of_byte, 0, budget, minimize=True)


def compile_dfa(node: Node, budget: Budget | None = None, *, minimize: bool = True) -> ByteDFA:
    """Compile an anchor-free regex IR node into a trimmed (and, if small enough, minimal) ByteDFA.

    Raises :class:`GrammarTimeoutError` / :class:`GrammarCompileError` when ``budget`` is
    exceeded.  The empty language compiles to a DFA whose ``initial`` is 0.
    """
    budget = budget or Budget()
    builder = _Builder(budget)
    start, end = builder.build(node)
    trans, accepting, class_of_byte = _determinize(builder.nfa, start, end, budget)
    return _trim_and_minimize(trans, accepting, class_of_byte, 0, budget, minimize=minimize)
