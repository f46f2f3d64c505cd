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
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from structgen.schemas.charset import CharSet, utf8_sequences
from structgen.schemas.regex import NOTHING, Alt, Anchor, And, Chars, Join, Lit, Members, Minus, Node, Rep, Seq

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
        self.bounds: set[int] = {0, 256}

    def edge(self, q: int, lo: int, hi: int, target: int) -> None:
        self.edges[q].append((lo, hi, target))
        self.bounds.add(lo)
        self.bounds.add(hi + 1)

    def new(self) -> int:
        eps = self.eps
        eps.append([])
        self.edges.append([])
        n = len(eps)
        if not n & 4095:
            if n > self.budget.max_nfa_states:
                raise GrammarCompileError(f"automaton exceeds max_nfa_states={self.budget.max_nfa_states} NFA states")
            self.budget.check_time()
        return n - 1


class _Builder:
    def __init__(self, budget: Budget, lazy: bool = False) -> None:
        self.budget = budget
        self.nfa = _NFA(budget)
        self.lazy = lazy
        self.pending: dict[int, tuple[Node, int]] = {}  # stub state -> (node to build, exit state)
        self.child_dfas: dict[int, ByteDFA] = {}
        self._keep: list[Node] = []
        self._nullable: dict[int, bool] = {}
        self._node_ids: dict[int, int] = {}  # id(node) -> structural id
        self._interned: dict[tuple[Any, ...], int] = {}  # shallow structural key -> structural id
        self._products: dict[int, ByteDFA] = {}  # structural id -> eager DFA (And / Minus)
        self._shortest: dict[int, int] = {}  # structural id -> shortest string's bytes
        self._worst: dict[int, int] = {}  # structural id -> worst_distance
        self._longest: dict[int, int] = {}  # structural id -> longest bound

    def nullable(self, node: Node) -> bool:
        """Whether ``node`` matches the empty string (memoized by identity)."""
        got = self._nullable.get(id(node))
        if got is not None:
            return got
        if isinstance(node, Lit):
            out = not node.data
        elif isinstance(node, Chars):
            out = False
        elif isinstance(node, Seq):
            out = all(self.nullable(i) for i in node.items)
        elif isinstance(node, Alt):
            out = any(self.nullable(i) for i in node.items)
        elif isinstance(node, Rep):
            out = node.lo == 0 or self.nullable(node.item)
        elif isinstance(node, Join):
            out = self.nullable(node.item) and (node.lo <= 1 or self.nullable(node.sep))
        elif isinstance(node, Members):
            out = all(not req or self.nullable(m) for m, req in node.items)
        elif isinstance(node, (And, Minus)):
            dfa = self.product(node)
            out = not dfa.is_empty() and bool(dfa.accepting[dfa.initial])
        else:
            out = False
        self._nullable[id(node)] = out
        return out

    def _memoized(self, table: dict[int, int], node: Node, compute: Callable[[Node], int]) -> int:
        """``table[structural id of node]``, filled with ``compute(node)`` capped at ``NO_PATH``."""
        key = self.structural_id(node)
        got = table.get(key)
        if got is None:
            got = min(compute(node), NO_PATH)
            table[key] = got
        return got

    def shortest(self, node: Node) -> int:
        """Bytes in the shortest string of ``node`` (``NO_PATH`` for an empty language): exact,
        so a stub's cost in the distance-to-acceptance search is exact too.  Memoized by
        structure."""
        return self._memoized(self._shortest, node, self._shortest_uncached)

    def _shortest_uncached(self, node: Node) -> int:
        out: int
        if isinstance(node, Lit):
            out = len(node.data)
        elif isinstance(node, Chars):
            out = min((len(sq) for sq in utf8_sequences(node.cs)), default=NO_PATH)
        elif isinstance(node, Seq):
            out = min(sum(self.shortest(i) for i in node.items), NO_PATH)
        elif isinstance(node, Alt):
            out = min((self.shortest(i) for i in node.items), default=NO_PATH)
        elif isinstance(node, Rep):
            out = 0 if node.lo == 0 else min(node.lo * self.shortest(node.item), NO_PATH)
        elif isinstance(node, Join):
            lo = max(node.lo, 1)  # Join always has at least one item
            out = min(lo * self.shortest(node.item) + (lo - 1) * self.shortest(node.sep), NO_PATH)
        elif isinstance(node, Members):
            out = min(self._junction_costs(node)[0], NO_PATH)
        elif isinstance(node, (And, Minus)):
            out = _shortest_dfa(self.product(node))
        else:
            raise TypeError(f"not a regex IR node: {node!r}")
        return out

    def longest(self, node: Node) -> int:
        """An upper bound on the bytes of ``node``'s longest string, ``NO_PATH`` when it may be
        unbounded (an unbounded repetition or extra members).  Memoized by structure."""
        return self._memoized(self._longest, node, self._longest_uncached)

    def _longest_uncached(self, node: Node) -> int:
        out: int
        if isinstance(node, Lit):
            out = len(node.data)
        elif isinstance(node, Chars):
            out = max((len(sq) for sq in utf8_sequences(node.cs)), default=0)
        elif isinstance(node, Seq):
            out = sum(self.longest(i) for i in node.items)
        elif isinstance(node, Alt):
            out = max((self.longest(i) for i in node.items), default=0)
        elif isinstance(node, Rep):
            out = NO_PATH if node.hi is None else node.hi * self.longest(node.item)
        elif isinstance(node, Join):
            out = NO_PATH if node.hi is None else node.hi * self.longest(node.item) + max(node.hi - 1, 0) * self.longest(node.sep)
        elif isinstance(node, Members):
            sep = self.longest(node.sep)
            out = NO_PATH if node.extra is not None else sum(self.longest(m) + sep for m, _req in node.items)
        elif isinstance(node, (And, Minus)):
            most = _longest_dfa(self.product(node))
            out = NO_PATH if most is None else most
        else:
            raise TypeError(f"not a regex IR node: {node!r}")
        return out

    def _junction_costs(self, node: Members) -> tuple[int, list[int]]:
        """Shortest bytes from the junctions of :meth:`build_members` to the end: from J(0, F)
        (nothing emitted), and from each J(i, T) (something emitted before member i), i = 0..n."""
        sep = self.shortest(node.sep)
        none_yet, some = 0, 0
        after = [0]
        for member, required in reversed(node.items):
            m = self.shortest(member)
            take_first, take_more = m + some, sep + m + some
            none_yet, some = (take_first, take_more) if required else (min(take_first, none_yet), min(take_more, some))
            after.append(some)
        after.reverse()
        return none_yet, after

    def worst_distance(self, node: Node) -> int:
        """An upper bound on the shortest way out of ``node`` from any position inside it: over
        every prefix of its strings, the bytes of the shortest completion to the fragment's end.
        Bounds :meth:`LazyDFA.distance_to_accept` for every state when applied to the root
        (``NO_PATH``-capped).  Memoized by structure."""
        return self._memoized(self._worst, node, self._worst_distance_uncached)

    def _worst_distance_uncached(self, node: Node) -> int:
        short, worst = self.shortest, self.worst_distance
        out: int
        if isinstance(node, Lit):
            out = len(node.data)
        elif isinstance(node, Chars):
            out = max((len(sq) for sq in utf8_sequences(node.cs)), default=0)
        elif isinstance(node, Seq):
            out, tail = 0, 0
            for item in reversed(node.items):
                out = max(out, worst(item) + tail)
                tail += short(item)
        elif isinstance(node, Alt):
            out = max((worst(i) for i in node.items), default=0)
        elif isinstance(node, Rep):
            out = 0 if node.hi == 0 else worst(node.item) + max(node.lo - 1, 0) * short(node.item)
        elif isinstance(node, Join):
            lo = max(node.lo, 1)
            step = short(node.sep) + short(node.item)
            out = max(worst(node.item) + (lo - 1) * step, worst(node.sep) + short(node.item) + max(lo - 2, 0) * step)
        elif isinstance(node, Members):
            first, after = self._junction_costs(node)
            out = 0 if node.extra is None else max(worst(node.extra), worst(node.sep) + short(node.extra))
            for (member, _required), rest in zip(node.items, after[1:]):  # inside member i, or its separator
                out = max(out, max(worst(member), worst(node.sep) + short(member)) + rest)
            out = max(out, first)
        elif isinstance(node, (And, Minus)):
            out = _worst_dfa(self.product(node))
        else:
            raise TypeError(f"not a regex IR node: {node!r}")
        return out

    def stub(self, node: Node) -> tuple[int, int]:
        """A fragment for ``node`` built only when an epsilon closure first reaches it."""
        q, x = self.nfa.new(), self.nfa.new()
        self.pending[q] = (node, x)
        return q, x

    def expand_stub(self, q: int) -> None:
        node, x = self.pending.pop(q)
        s, e = self.build(node)
        self.nfa.eps[q].append(s)
        self.nfa.eps[e].append(x)

    def build(self, node: Node) -> tuple[int, int]:
        nfa = self.nfa
        if isinstance(node, Lit):
            s = cur = nfa.new()
            for b in node.data:
                nxt = nfa.new()
                nfa.edge(cur, b, b, nxt)
                cur = nxt
            return s, cur
        if isinstance(node, Chars):
            # UTF-8 sequences with shared suffixes: one state per distinct remaining tail
            # ("two continuation bytes left", ...) instead of a chain per sequence, as in RE2's
            # and Rust regex-automata's UTF-8 suffix caches; fewer NFA states and fewer DFA
            # states, same language
            s, e = nfa.new(), nfa.new()
            tails: dict[tuple[tuple[int, int], ...], int] = {}

            def tail_state(rest: tuple[tuple[int, int], ...]) -> int:
                q = tails.get(rest)
                if q is None:
                    q = nfa.new()
                    nfa.edge(q, rest[0][0], rest[0][1], e if len(rest) == 1 else tail_state(rest[1:]))
                    tails[rest] = q
                return q

            for sq in utf8_sequences(node.cs):
                nfa.edge(s, sq[0][0], sq[0][1], e if len(sq) == 1 else tail_state(tuple(sq[1:])))
            return s, e
        if isinstance(node, Seq):
            if not node.items:
                s = nfa.new()
                return s, s
            s, e = self.build(node.items[0])
            for k in range(1, len(node.items)):
                if self.lazy and not self.nullable(node.items[k - 1]):
                    rest = node.items[k:]
                    s2, e2 = self.stub(rest[0] if len(rest) == 1 else Seq(rest))
                    nfa.eps[e].append(s2)
                    return s, e2
                s2, e2 = self.build(node.items[k])
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
        if isinstance(node, Members):
            return self.build_members(node)
        if isinstance(node, Join):
            return self.build_join(node)
        if isinstance(node, (And, Minus)):
            return self.embed(self.product(node))
        if isinstance(node, Anchor):
            raise GrammarCompileError("regex IR still contains an anchor; resolve anchors before compiling")
        raise TypeError(f"not a regex IR node: {node!r}")

    def build_members(self, node: Members) -> tuple[int, int]:
        """Junction construction: J(i, F) / J(i, T) = before member i with nothing / something
        emitted; each member is built once and entered from both junctions."""
        nfa = self.nfa
        n = len(node.items)
        jf = [nfa.new() for _ in range(n + 1)]
        jt = [nfa.new() for _ in range(n + 1)]
        for i, (member, required) in enumerate(node.items):
            s, e = self.build(member)
            nfa.eps[jf[i]].append(s)
            ss, se = self.build(node.sep)
            nfa.eps[jt[i]].append(ss)
            nfa.eps[se].append(s)
            nfa.eps[e].append(jt[i + 1])
            if not required:
                nfa.eps[jf[i]].append(jf[i + 1])
                nfa.eps[jt[i]].append(jt[i + 1])
        end = nfa.new()
        nfa.eps[jf[n]].append(end)
        nfa.eps[jt[n]].append(end)
        if node.extra is not None:
            xs, xe = self.build(node.extra)
            nfa.eps[jf[n]].append(xs)
            ss, se = self.build(node.sep)
            nfa.eps[jt[n]].append(ss)
            nfa.eps[se].append(xs)
            nfa.eps[xe].append(jt[n])
        return jf[0], end

    def build_join(self, node: Join) -> tuple[int, int]:
        nfa = self.nfa
        if self.lazy and (node.hi is not None or node.lo > 1) and not self.nullable(node.item):
            # unroll one item: item (end if lo <= 1 | sep Join(lo-1, hi-1))
            if node.hi == 1:
                return self.build(node.item)
            more = Join(node.item, node.sep, max(node.lo - 1, 1), None if node.hi is None else node.hi - 1)
            tail = Seq((node.sep, more))
            return self.build(Seq((node.item, Alt((Seq(()), tail)) if node.lo <= 1 else tail)))
        s = e = nfa.new()
        if node.hi is not None:
            end = nfa.new()
            for k in range(node.hi):
                if k:
                    ss, se = self.build(node.sep)
                    nfa.eps[e].append(ss)
                    e = se
                s2, e2 = self.build(node.item)
                nfa.eps[e].append(s2)
                e = e2
                if k + 1 >= node.lo:
                    nfa.eps[e].append(end)
            return s, end
        for _ in range(node.lo - 1):
            s2, e2 = self.build(node.item)
            nfa.eps[e].append(s2)
            ss, se = self.build(node.sep)
            nfa.eps[e2].append(ss)
            e = se
        s2, e2 = self.build(node.item)  # the loop copy
        nfa.eps[e].append(s2)
        ss, se = self.build(node.sep)
        nfa.eps[e2].append(ss)
        nfa.eps[se].append(s2)
        return s, e2

    def build_rep(self, node: Rep) -> tuple[int, int]:
        nfa = self.nfa
        if self.lazy and (node.hi is not None or node.lo > 0) and not self.nullable(node.item) and node.hi != 0:
            # unroll one copy: item Rep(lo-1, hi-1), optional when lo == 0
            more = Rep(node.item, max(node.lo - 1, 0), None if node.hi is None else node.hi - 1)
            body = Seq((node.item, more)) if more.hi != 0 else node.item
            return self.build(body if node.lo > 0 else Alt((Seq(()), body)))
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

    def structural_id(self, node: Node) -> int:
        """A small int equal for structurally equal IR nodes (hash-consing: a node's key holds its
        children's ids, so keys stay shallow).  Nodes compare by identity; schemas often rebuild
        equal sub-expressions (one pattern or format under several properties), and this lets
        their eager DFAs be built once."""
        got = self._node_ids.get(id(node))
        if got is None:
            key = (type(node).__name__, *(self._field_key(getattr(node, f.name)) for f in fields(node)))  # type: ignore[arg-type]
            got = self._interned.setdefault(key, len(self._interned))
            self._node_ids[id(node)] = got
            self._keep.append(node)  # ids stay valid while the builder lives
        return got

    def _field_key(self, value: Any) -> Any:
        if isinstance(value, Node):
            return ("node", self.structural_id(value))
        if isinstance(value, tuple):
            return tuple(self._field_key(v) for v in value)
        if isinstance(value, CharSet):
            return ("cs", value.ranges)
        return value

    def child_dfa(self, node: Node) -> ByteDFA:
        """Eager DFA of an operand of ``And`` / ``Minus``, memoized by structure (schemas share
        operands such as "any JSON string" across many objects)."""
        key = self.structural_id(node)
        got = self.child_dfas.get(key)
        if got is None:
            got = compile_dfa(node, self.budget, minimize=True)
            self.child_dfas[key] = got
        return got

    def product(self, node: And | Minus) -> ByteDFA:
        """Eager (trimmed, minimized) DFA of an ``And`` / ``Minus`` node, memoized by structure."""
        key = self.structural_id(node)
        got = self._products.get(key)
        if got is None:
            got = self._product_uncached(node)
            self._products[key] = got
        return got

    def _product_uncached(self, node: And | Minus) -> ByteDFA:
        if isinstance(node, And):
            dfas = [self.child_dfa(it) for it in node.items]
            if not dfas:
                raise GrammarCompileError("intersection of no languages")
            acc = dfas[0]
            for d in dfas[1:]:
                acc = _product(acc, d, self.budget, minus=False)
            return acc
        left = self.child_dfa(node.left)
        right = self.child_dfa(node.right)
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
                nfa.edge(q, lo, hi, ids[tgt])
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
    if minimize and n <= _MOORE_MAX_STATES:
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
        known = forced[cur]
        tail: bytes = known if known is not None else b""
        if known is None:
            forced[cur] = b""
        for st in reversed(chain):
            tail = bytes([int(first_live[st])]) + tail
            forced[st] = tail
    return tuple(f if f is not None else b"" for f in forced)


def _empty_dfa() -> ByteDFA:
    return ByteDFA(table=np.zeros((1, 256), dtype=np.int32), accepting=np.zeros(1, dtype=bool), initial=DEAD, forced=(b"",))


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
    acc = np.array([bool(a.accepting[p]) and (not bool(b.accepting[q]) if minus else bool(b.accepting[q])) for p, q in order])
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


# ----------------------------------------------------------------------------- lazy determinization


def _prune(node: Node, builder: _Builder, memo: dict[int, Node]) -> Node:
    """Rewrite ``node`` without empty sub-languages (``NOTHING`` if the whole is empty).

    After pruning every NFA state the builder makes can reach the final state, which is what
    lets :class:`LazyDFA` discover states without a trimming pass: every non-empty state set
    is live.  ``And`` / ``Minus`` are compiled here (eagerly, trimmed) and memoized.
    """
    got = memo.get(id(node))
    if got is not None:
        return got
    out: Node
    if isinstance(node, Lit):
        out = node
    elif isinstance(node, Chars):
        out = node if utf8_sequences(node.cs) else NOTHING
    elif isinstance(node, Seq):
        items = [_prune(i, builder, memo) for i in node.items]
        out = NOTHING if any(i is NOTHING for i in items) else Seq(tuple(items))
    elif isinstance(node, Alt):
        items = [i for i in (_prune(b, builder, memo) for b in node.items) if i is not NOTHING]
        out = NOTHING if not items else items[0] if len(items) == 1 else Alt(tuple(items))
    elif isinstance(node, Rep):
        item = _prune(node.item, builder, memo)
        if item is NOTHING:
            out = Seq(()) if node.lo == 0 else NOTHING
        else:
            out = Rep(item, node.lo, node.hi)
    elif isinstance(node, Join):
        item = _prune(node.item, builder, memo)
        sep = _prune(node.sep, builder, memo)
        if item is NOTHING:
            out = NOTHING
        elif sep is NOTHING:
            out = item if node.lo <= 1 else NOTHING
        else:
            out = Join(item, sep, node.lo, node.hi)
    elif isinstance(node, Members):
        kept: list[tuple[Node, bool]] = []
        out = NOTHING
        dead = False
        for member, required in node.items:
            m = _prune(member, builder, memo)
            if m is NOTHING:
                if required:
                    dead = True
                    break
                continue
            kept.append((m, required))
        if not dead:
            sep = _prune(node.sep, builder, memo)
            extra = _prune(node.extra, builder, memo) if node.extra is not None else None
            if sep is NOTHING:
                raise GrammarCompileError("object member separator matches nothing")
            out = Members(tuple(kept), sep, None if extra is NOTHING else extra)
    elif isinstance(node, (And, Minus)):
        out = NOTHING if builder.product(node).is_empty() else node
    elif isinstance(node, Anchor):
        raise GrammarCompileError("regex IR still contains an anchor; resolve anchors before compiling")
    else:
        raise TypeError(f"not a regex IR node: {node!r}")
    memo[id(node)] = out
    return out


SMALL_CLOSURE = 64  # closures up to this many NFA states skip the memoizing SCC search


class LazyDFA:
    """A byte DFA whose states are built on demand by subset construction.

    State 0 is the dead state; every other state is live (can reach acceptance) because the
    NFA comes from a pruned IR.  ``table`` is ``int32 [capacity, C]`` over ``C`` byte classes
    (``class_of_byte``: ``int32 [256]``), ``-1`` in the rows of states not expanded yet.
    Expansion mutates the object but never changes the language or the meaning of a state id,
    so all queries are deterministic; callers serialize expansions (``TokenFSM`` holds a lock).
    Picklable.  ``max_states`` caps discovered states (:class:`GrammarCompileError`).
    """

    def __init__(self, builder: _Builder, start: int, final: int, max_states: int) -> None:
        nfa = builder.nfa
        self.builder = builder
        # byte classes must be fixed before lazily built fragments add edges: take them from
        # every byte range in the whole IR, not only from the part built so far
        cuts = sorted(nfa.bounds)
        class_of_byte = np.zeros(256, dtype=np.int32)
        for c, (a, b) in enumerate(zip(cuts, cuts[1:])):
            class_of_byte[a:b] = c
        self.class_of_byte = class_of_byte
        self._cob = class_of_byte.tolist()
        self.class_first_byte = np.array(cuts[:-1], dtype=np.int32)
        self.class_size = np.diff(np.array(cuts, dtype=np.int32))
        self.num_classes = len(cuts) - 1
        self.edges = nfa.edges
        self.eps = nfa.eps
        self.has_edges = [bool(e) for e in nfa.edges]
        self.final = final
        self.max_states = max_states
        self.index: dict[tuple[frozenset[int], bool], int] = {(frozenset(), False): 0}
        self.sets: list[frozenset[int]] = [frozenset()]
        self.acc: list[bool] = [False]
        self.table = np.full((64, self.num_classes), -1, dtype=np.int32)
        self.table[0] = 0
        self._forced: dict[int, bytes] = {0: b""}
        self._nfa_dist: list[int] = []  # NFA state -> bytes to final (distance_to_accept)
        self._nfa_dist_n = 0
        self._dfa_dist: dict[int, int] = {}
        self.distance_bound: int | None = None  # ≥ every state's distance_to_accept (compile_lazy)
        self.length_bound: int | None = None  # ≥ the longest accepted string's bytes; None: unbounded
        self._closures: dict[int, tuple[frozenset[int], bool]] = {}  # NFA state -> its closure
        self.initial = self._state_of(self._closure([start]))

    @property
    def num_states(self) -> int:
        """States discovered so far (including the dead state 0)."""
        return len(self.sets)

    def is_empty(self) -> bool:
        return self.initial == DEAD

    def _closure(self, seeds: list[int]) -> tuple[frozenset[int], bool]:
        """Epsilon closure of ``seeds``: (members with byte edges, whether ``final`` is reached).

        Single-state closures are memoized: once the stubs met on the way are expanded, no
        epsilon list reachable from a state changes again, so a closure never goes stale.
        """
        if len(seeds) == 1:
            return self._closure_one(seeds[0])
        parts = [self._closure_one(q) for q in seeds]
        return frozenset().union(*(p[0] for p in parts)), any(p[1] for p in parts)

    def _closure_one(self, seed: int) -> tuple[frozenset[int], bool]:
        """Closure of one NFA state, memoizing the closure of every state the search meets.

        Iterative Tarjan SCC search over epsilon edges: states of one strongly connected
        component share a closure, which is their own members with byte edges plus the closures
        of the components they reach.  A lazily unrolled counter (``x{0,2048}``: each copy's
        exit leads through the exits of all enclosing copies) then costs each exit once instead
        of once per closure through it (quadratic in the bound).  Stubs are expanded when
        reached, before their epsilon edges are read."""
        memo = self._closures
        got = memo.get(seed)
        if got is not None:
            return got
        got = self._closure_small(seed)
        if got is not None:
            memo[seed] = got
            return got
        eps = self.eps
        pending = self.builder.pending
        final = self.final
        index: dict[int, int] = {}
        low: dict[int, int] = {}
        parts: dict[int, tuple[set[int], bool]] = {}  # open state -> (members reached so far, final reached)
        scc_stack: list[int] = []
        work: list[tuple[int, int]] = []  # (state, next epsilon edge to follow)

        def enter(q: int) -> None:
            if q in pending:
                self._expand_stub(q)
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
            has = self.has_edges
            members.update(r for r in comp if has[r])
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

    def _expand_stub(self, q: int) -> None:
        """Build the pending fragment at NFA state ``q`` and note which new states have byte edges."""
        self.builder.expand_stub(q)
        self.has_edges.extend(bool(e) for e in self.edges[len(self.has_edges) :])

    def _closure_small(self, seed: int) -> tuple[frozenset[int], bool] | None:
        """Closure of ``seed`` by a plain depth-first search (memoizing only ``seed``), or None
        once it passes :data:`SMALL_CLOSURE` states: the common case without the SCC search's
        bookkeeping.  Stubs met are expanded (the SCC search then finds them built)."""
        eps = self.eps
        pending = self.builder.pending
        seen = {seed}
        stack = [seed]
        while stack:
            q = stack.pop()
            if q in pending:
                self._expand_stub(q)
            for r in eps[q]:
                if r not in seen:
                    if len(seen) >= SMALL_CLOSURE:
                        return None
                    seen.add(r)
                    stack.append(r)
        has = self.has_edges
        return frozenset(q for q in seen if has[q]), self.final in seen

    def _state_of(self, key: tuple[frozenset[int], bool]) -> int:
        d = self.index.get(key)
        if d is not None:
            return d
        d = len(self.sets)
        if d >= self.max_states:
            raise GrammarCompileError(f"automaton exceeds max_states={self.max_states} DFA states")
        if d >= self.table.shape[0]:
            grow = np.full((self.table.shape[0], self.num_classes), -1, dtype=np.int32)
            self.table = np.concatenate([self.table, grow])
        self.index[key] = d
        self.sets.append(key[0])
        self.acc.append(key[1])
        return d

    def expand(self, state: int) -> np.ndarray:
        """The transition row of ``state`` (``int32 [C]``), computing it on first use."""
        row = self.table[state]
        if row[0] >= 0:
            return row
        moves: dict[int, list[int]] = {}
        edges, cob = self.edges, self._cob
        for q in self.sets[state]:
            for lo, hi, t in edges[q]:
                for c in range(cob[lo], cob[hi] + 1):
                    lst = moves.get(c)
                    if lst is None:
                        moves[c] = [t]
                    else:
                        lst.append(t)
        new = [DEAD] * self.num_classes
        by_target: dict[int, int] = {}  # one NFA target (most classes) -> DFA state
        by_targets: dict[tuple[int, ...], int] = {}
        for c, targets in moves.items():
            if len(targets) == 1:
                t = targets[0]
                d = by_target.get(t)
                if d is None:
                    d = by_target[t] = self._state_of(self._closure(targets))
            else:
                tkey = tuple(sorted(set(targets)))
                d = by_targets.get(tkey)
                if d is None:
                    d = by_targets[tkey] = self._state_of(self._closure(list(tkey)))
            new[c] = d
        self.table[state] = new
        return self.table[state]

    def is_accepting(self, state: int) -> bool:
        return self.acc[state]

    def next_state(self, state: int, byte: int) -> int:
        return int(self.expand(state)[self.class_of_byte[byte]])

    def walk(self, state: int, data: bytes) -> int:
        """State after ``data`` from ``state`` (0 if it dies)."""
        for b in data:
            state = self.next_state(state, b)
            if state == DEAD:
                return DEAD
        return state

    def accepts(self, data: bytes) -> bool:
        s = self.walk(self.initial, data)
        return s != DEAD and self.acc[s]

    def forced(self, state: int) -> bytes:
        """The longest byte string every accepted continuation from ``state`` starts with."""
        got = self._forced.get(state)
        if got is not None:
            return got
        chain: list[tuple[int, int]] = []
        cur = state
        seen = set()
        while cur not in self._forced and not self.acc[cur] and cur not in seen:
            seen.add(cur)
            row = self.expand(cur)
            live = np.flatnonzero(row != DEAD)
            if len(live) != 1 or self.class_size[live[0]] != 1:
                break
            chain.append((cur, int(self.class_first_byte[live[0]])))
            cur = int(row[live[0]])
        tail = self._forced.setdefault(cur, b"")  # accepting, branching, or already known
        for st, b in reversed(chain):
            tail = bytes([b]) + tail
            self._forced[st] = tail
        return self._forced[state]

    def max_length(self, state: int | None = None) -> int | None:
        """Bytes in the longest accepted string from ``state`` (default: the initial state), or
        None when the language from there is infinite (a cycle is reachable: every state is
        live, so any reachable cycle repeats forever).  Expands every reachable state; the
        state cap raises ``GrammarCompileError`` as in any expansion.  Deterministic.  Raises
        ``ValueError`` for a state the automaton has not discovered."""
        start = self.initial if state is None else state
        if not 0 <= start < self.num_states:
            raise ValueError(f"state {start} is not a discovered automaton state (0..{self.num_states - 1})")
        if start == DEAD:
            return None
        longest: dict[int, int] = {}
        on_path: set[int] = set()
        stack: list[tuple[int, list[int], list[int]]] = []  # (state, successors, successors left to visit)

        def push(q: int) -> None:
            succ = [int(t) for t in np.unique(self.expand(q)).tolist() if t != DEAD]
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
            longest[q] = max([0 if self.acc[q] else -1] + [longest[t] + 1 for t in succ])  # live: -1 never wins
        return longest[start]

    def distance_to_accept(self, state: int) -> int:
        """Bytes in the shortest accepted continuation from ``state`` (0 when accepting;
        ``NO_PATH`` for the dead state).  Exact: NFA shortest paths where a fragment not built
        yet costs its language's exact shortest length (:meth:`_Builder.shortest`), so building
        it later never changes a known distance.  Memoized; updating the NFA distances costs
        O(states and edges added since the last call).  Callers serialize it with expansions.
        Raises ``ValueError`` for a state the automaton has not discovered."""
        if not 0 <= state < len(self.sets):
            raise ValueError(f"state {state} is not a discovered automaton state (0..{len(self.sets) - 1})")
        if self.acc[state]:
            return 0
        got = self._dfa_dist.get(state)
        if got is not None:
            return got
        if self._nfa_dist_n != len(self.eps):
            self._extend_nfa_dist()
        dist = self._nfa_dist
        out = min((dist[q] for q in self.sets[state]), default=NO_PATH)
        self._dfa_dist[state] = out
        return out

    def prepare_distances(self) -> None:
        """Bring the NFA distances behind :meth:`distance_to_accept` up to date now (e.g. after an
        eager expansion, so later queries cost a lookup).  Callers serialize it with expansions."""
        if self._nfa_dist_n != len(self.eps):
            self._extend_nfa_dist()

    def _extend_nfa_dist(self) -> None:
        """Distances to ``final`` for the NFA states added since the last call (Dijkstra over the
        new states only).  Sound because fragments only ever grow: a new state leaves its
        fragment through exits into older states, whose distances are already exact."""
        import heapq

        n0, n1 = self._nfa_dist_n, len(self.eps)
        dist = self._nfa_dist
        dist.extend([NO_PATH] * (n1 - n0))
        rev: defaultdict[int, list[tuple[int, int]]] = defaultdict(list)  # new state -> [(new predecessor, cost)]
        heap: list[tuple[int, int]] = []
        pending = self.builder.pending
        shortest = self.builder.shortest

        if n0 <= self.final < n1:
            dist[self.final] = 0
            heap.append((0, self.final))
        eps, edges = self.eps, self.edges
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
        self._nfa_dist_n = n1

    def __setstate__(self, state: dict[str, object]) -> None:
        state.setdefault("_closures", {})  # pickles from before the closure memo
        if not isinstance(state.get("_nfa_dist"), list):  # pickles from before exact distances
            state.update(_nfa_dist=[], _nfa_dist_n=0, _dfa_dist={})
        state.setdefault("distance_bound", None)  # unknown: budgets then always check successors
        state.setdefault("length_bound", None)
        self.__dict__.update(state)
        self.builder.__dict__.setdefault("_shortest", {})
        self.builder.__dict__.setdefault("_worst", {})
        self.builder.__dict__.setdefault("_longest", {})


def compile_lazy(node: Node, budget: Budget | None = None) -> LazyDFA:
    """Compile an anchor-free IR node into a :class:`LazyDFA` (only the initial state is built).

    Sub-automata of ``And`` / ``Minus`` are built eagerly under ``budget``; the returned
    automaton caps its discovered states at ``budget.max_states``.  The empty language gives
    ``initial == 0``.
    """
    budget = budget or Budget()
    builder = _Builder(budget, lazy=True)
    pruned = _prune(node, builder, {})
    if pruned is NOTHING:
        pruned = Alt(())
    for lo, hi in _byte_ranges(pruned, builder):
        builder.nfa.bounds.add(lo)
        builder.nfa.bounds.add(hi + 1)
    start, end = builder.build(pruned)
    budget.check_time()
    dfa = LazyDFA(builder, start, end, budget.max_states)
    dfa.distance_bound = builder.worst_distance(pruned)
    longest = builder.longest(pruned)
    dfa.length_bound = None if longest >= NO_PATH else longest
    # later expansions happen while serving: the compile deadline no longer applies, the caps do
    serving = Budget(timeout_s=1e9, max_states=budget.max_states, max_nfa_states=budget.max_nfa_states)
    builder.budget = serving
    builder.nfa.budget = serving
    return dfa


NO_PATH = 1 << 40
"""Distance of a state (or length of a language) with no accepted string: larger than any real one."""


def _worst_dfa(dfa: ByteDFA) -> int:
    """The largest distance to acceptance over the live states of an eager :class:`ByteDFA`
    (reverse BFS from its accepting states; 0 for the empty language)."""
    n = dfa.num_states
    preds: list[set[int]] = [set() for _ in range(n)]
    for q in range(1, n):
        for t in np.unique(dfa.table[q]).tolist():
            if t != DEAD:
                preds[t].add(q)
    dist = {q: 0 for q in range(1, n) if dfa.accepting[q]}
    frontier = list(dist)
    depth = 0
    while frontier:
        depth += 1
        nxt: list[int] = []
        for q in frontier:
            for p in preds[q]:
                if p not in dist:
                    dist[p] = depth
                    nxt.append(p)
        frontier = nxt
    return max(dist.values(), default=0)


def _longest_dfa(dfa: ByteDFA) -> int | None:
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


def _shortest_dfa(dfa: ByteDFA) -> int:
    """Bytes in the shortest string an eager :class:`ByteDFA` accepts (``NO_PATH`` if none): BFS."""
    if dfa.is_empty():
        return NO_PATH
    seen = {dfa.initial}
    frontier = [dfa.initial]
    depth = 0
    while frontier:
        if any(dfa.accepting[q] for q in frontier):
            return depth
        nxt: list[int] = []
        for q in frontier:
            for t in np.unique(dfa.table[q]).tolist():
                if t != DEAD and t not in seen:
                    seen.add(t)
                    nxt.append(t)
        frontier = nxt
        depth += 1
    return NO_PATH


def _byte_ranges(node: Node, builder: _Builder) -> set[tuple[int, int]]:
    """Every byte range the NFA of ``node`` can ever use (sub-automata included)."""
    out: set[tuple[int, int]] = set()
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, Lit):
            out.update((b, b) for b in n.data)
        elif isinstance(n, Chars):
            for sq in utf8_sequences(n.cs):
                out.update(sq)
        elif isinstance(n, (And, Minus)):
            dfa = builder.product(n)  # memoized: built while pruning
            for st in range(1, dfa.num_states):
                out.update((lo, hi) for lo, hi, _ in _runs(dfa.table[st]))
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
    return out
