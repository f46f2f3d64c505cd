"""Regex IR → byte NFA (Thompson construction; code-point classes expanded into UTF-8 byte
ranges that share their continuation tails), and :func:`compile_dfa` (IR → eager DFA through
it).  Fragments are built lazily where the lazy DFA asks for them; intersections (:class:`~structgen.schemas.regex.And`) and differences
(:class:`~structgen.schemas.regex.Minus`) are eager product DFAs (:mod:`.dfa`) spliced back in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

import numpy as np
from structgen.schemas.charset import CharSet, utf8_sequences
from structgen.schemas.ir import Alt, Anchor, And, Automaton, Chars, Join, Lit, Look, Members, Minus, Node, Rep, Seq, children
from structgen.schemas.json_strings import ANY_STRING_ENCODED

from .dfa import DEAD, Budget, ByteDFA, byte_classes, determinize, product_dfa, trim_and_minimize
from .eager_subsets import determinize_built
from .errors import GrammarCompileError
from .lazy_dfa import has_compiled_expansion
from .length_product import PLAIN_MIN_CHARS, CountedAutomaton, CountedState, LengthProducts
from .literal_minus import literal_strings, minus_literals
from .nfa_graph import NFA
from .node_lengths import NodeLengths
from .product_cache import ProductCache, structural_key


class NFABuilder:
    """Builds the NFA of IR nodes (``lazy``: sub-expressions left as stubs, expanded on
    demand), with the eager DFAs of ``And`` / ``Minus`` operands and products memoized by
    structure; ``shared``: a :class:`ProductCache` that keeps those DFAs across compiles (never
    pickled with the builder)."""

    def __init__(self, budget: Budget, lazy: bool = False, shared: ProductCache | None = None) -> None:
        self.budget = budget
        self.shared = shared
        self._gkeys: dict[int, bytes] = {}  # id(node) -> global structural key (a digest)
        self.nfa = NFA(budget)
        self.lazy = lazy
        self.pending: dict[int, tuple[Node, int]] = {}  # stub state -> (node to build, exit state)
        self.child_dfas: dict[int, ByteDFA] = {}
        self._keep: list[Node] = []
        self._node_ids: dict[int, int] = {}  # id(node) -> structural id
        self._interned: dict[tuple[Any, ...], int] = {}  # shallow structural key -> structural id
        self._products: dict[int, ByteDFA] = {}  # structural id -> eager DFA (And / Minus)
        self._chars: dict[Any, tuple[int, list[tuple[int, int, int, int]]]] = {}  # class ranges -> fragment
        self.lengths = NodeLengths(self)
        self.length_products = LengthProducts() if lazy else None  # they need stubs: lazy builders only

    def stub(self, node: Node) -> tuple[int, int]:
        """A fragment for ``node`` built only when an epsilon closure first reaches it."""
        q, x = self.nfa.new(), self.nfa.new()
        self.pending[q] = (node, x)
        return q, x

    def expand_stub(self, q: int, *, eager: bool = False) -> None:
        """Build the fragment pending at stub ``q`` and connect it (``eager``: whole, with no
        stubs inside; :meth:`NodeLengths.eager_states` tells its size).  The stub stays
        pending until its fragment is whole: a build that raises (a state cap while serving)
        leaves nothing half-connected, so a later expansion tries again and fails the same way
        instead of silently losing the strings through it."""
        node, _x = self.pending[q]
        lazy = self.lazy
        self.lazy = lazy and not eager
        try:
            s, e = self.build(node)
        finally:
            self.lazy = lazy
        self.fill_stub(q, s, e)

    def fill_stub(self, q: int, s: int, e: int) -> None:
        """Connect the fragment (``s``, ``e``) built for the pending stub ``q``: ``q`` leads
        into it and its end to the stub's exit; ``q`` is pending no more."""
        _node, x = self.pending.pop(q)
        self.nfa.eps[q].append(s)
        self.nfa.eps[e].append(x)

    def chars_states(self, cs: CharSet) -> int:
        """NFA states of the fragment of character class ``cs`` (as :meth:`build` copies it)."""
        return self._chars_fragment(cs)[0]

    def built_product(self, node: And | Minus | Automaton) -> ByteDFA | None:
        """The eager DFA of ``node`` when :meth:`product` has built it for this node, else None."""
        return self._products.get(self._node_ids.get(id(node), -1))

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
            k, local = self._chars_fragment(node.cs)
            s = nfa.new_block(k)
            edges = nfa.edges
            for a, lo, hi, b in local:
                edges[s + a].append((lo, hi, s + b))
            return s, s + 1
        if isinstance(node, Seq):
            if not node.items:
                s = nfa.new()
                return s, s
            s, e = self.build(node.items[0])
            for k in range(1, len(node.items)):
                if self.lazy and not self.lengths.nullable(node.items[k - 1]):
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
        if isinstance(node, And) and (counted := self.counted(node)) is not None:
            assert self.length_products is not None  # counted() is None without them
            return self.length_products.build(self, counted)
        if isinstance(node, (And, Minus, Automaton)):
            return self.embed(self.product(node))
        if isinstance(node, CountedState):
            assert self.length_products is not None
            return self.length_products.build_state(self, node)
        if isinstance(node, (Anchor, Look)):
            raise GrammarCompileError("regex IR still contains an anchor; resolve anchors before compiling")
        raise TypeError(f"not a regex IR node: {node!r}")

    def _plain_bound(self, node: Rep) -> bool:
        """Whether ``node`` is a bounded run of any JSON string characters with at least
        :data:`.length_product.PLAIN_MIN_CHARS` optional ones, built here as a plain length
        product (lazy builders only, eager fragments of theirs included: a compile process
        builds its fragments whole before shipping, and an unrolled counter there would give
        every character position its own trie walk on the engine's side)."""
        return (
            self.length_products is not None
            and node.hi is not None
            and node.hi - node.lo >= PLAIN_MIN_CHARS
            and self.structural_id(node.item) == self.structural_id(ANY_STRING_ENCODED.item)
        )

    def counted(self, node: And) -> CountedAutomaton | None:
        """``node``'s lazy length product (:meth:`.length_product.LengthProducts.of`), or None."""
        return None if self.length_products is None else self.length_products.of(self, node)

    def _chars_fragment(self, cs: CharSet) -> tuple[int, list[tuple[int, int, int, int]]]:
        """The fragment of a character class in local state ids (0 enters, 1 exits): (states,
        edges ``(from, lo, hi, to)``), made once per class and copied by :meth:`build`.  UTF-8
        sequences with shared suffixes: one state per distinct remaining tail ("two
        continuation bytes left", ...) instead of a chain per sequence, as in RE2's and Rust
        regex-automata's UTF-8 suffix caches; fewer NFA and DFA states, same language."""
        got = self._chars.get(cs.ranges)
        if got is not None:
            return got
        local: list[tuple[int, int, int, int]] = []
        tails: dict[tuple[tuple[int, int], ...], int] = {}  # remaining byte ranges -> their state
        count = 2
        for sq in utf8_sequences(cs):
            target = 1
            for i in range(len(sq) - 1, 0, -1):  # the continuation tails, innermost first
                rest = tuple(sq[i:])
                q = tails.get(rest)
                if q is None:
                    q = tails[rest] = count
                    count += 1
                    local.append((q, sq[i][0], sq[i][1], target))
                target = q
            local.append((0, sq[0][0], sq[0][1], target))
        for _a, lo, hi, _b in local:
            self.nfa.bounds.add(lo)
            self.nfa.bounds.add(hi + 1)
        got = self._chars[cs.ranges] = (count, local)
        return got

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
        if self.lazy and (node.hi is not None or node.lo > 1) and not self.lengths.nullable(node.item):
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
        if self._plain_bound(node):  # a maxLength alone: its first lo characters, then a counted plain product
            assert self.length_products is not None and node.hi is not None
            s, e = self.length_products.build(self, self.length_products.plain(self, node.hi - node.lo))
            if not node.lo:
                return s, e
            s0, e0 = self.build(Rep(node.item, node.lo, node.lo))
            nfa.eps[e0].append(s)
            return s0, e
        if self.lazy and (node.hi is not None or node.lo > 0) and not self.lengths.nullable(node.item) and node.hi != 0:
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
            key = self._shallow_key(node)
            got = self._interned.setdefault(key, len(self._interned))
            self._node_ids[id(node)] = got
            self._keep.append(node)  # ids stay valid while the builder lives
        return got

    def _shallow_key(self, node: Node) -> tuple[Any, ...]:
        """``node``'s key for :meth:`structural_id`: its type and fields, children by their
        structural ids (the common IR types spelled out; any other node through its fields)."""
        sid = self.structural_id
        if isinstance(node, Lit):
            return ("Lit", node.data)
        if isinstance(node, Chars):
            return ("Chars", node.cs.ranges)
        if isinstance(node, (Seq, Alt, And)):
            return (type(node).__name__, tuple([sid(i) for i in node.items]))
        if isinstance(node, Rep):
            return ("Rep", sid(node.item), node.lo, node.hi)
        if isinstance(node, Join):
            return ("Join", sid(node.item), sid(node.sep), node.lo, node.hi)
        if isinstance(node, Members):
            extra = None if node.extra is None else sid(node.extra)
            return ("Members", tuple([(sid(m), r) for m, r in node.items]), sid(node.sep), extra)
        if isinstance(node, Automaton):  # its key names its language; its edges may be many
            return ("Automaton", node.key)
        return (type(node).__name__, *(self._field_key(getattr(node, f.name)) for f in fields(node)))  # type: ignore[arg-type]

    def _field_key(self, value: Any) -> Any:
        if isinstance(value, Node):
            return ("node", self.structural_id(value))
        if isinstance(value, tuple):
            return tuple(self._field_key(v) for v in value)
        if isinstance(value, CharSet):
            return ("cs", value.ranges)
        return value

    def __getstate__(self) -> dict[str, Any]:
        """The builder without what names objects of this process: ``id(node)`` keys would
        name other nodes in the process that loads the copy (an engine, a row worker, a later
        run reading the disk cache), and a stale hit would give a node another's structural
        id, hence another's product DFA or lengths.  The structural memos (keyed by the
        interned shallow keys) travel: the copy recomputes each node's id and finds them.
        Pickles are only ever loaded by the code that wrote them (the disk cache keeps entries
        per :func:`~.compiler.code_digest`), so no older layout is read back."""
        state = self.__dict__.copy()
        state["shared"] = None  # the compiler's cache stays with the compiler
        # the operands' DFAs served the intersections the compile built (every one, when it
        # pruned the IR), and a product embedded already is in the NFA: a copy keeps the
        # products its pending fragments may still embed, and would rebuild any other only for
        # an intersection met for the first time
        state["child_dfas"] = {}
        keep = self._pending_products()
        state["_products"] = {k: v for k, v in self._products.items() if k in keep}
        state["_gkeys"] = {}
        state["_node_ids"] = {}
        state["_keep"] = []
        return state

    def _pending_products(self) -> set[int]:
        """Structural ids of the ``And`` / ``Minus`` / ``Automaton`` nodes that a pending
        fragment may still embed (a product is whole: nothing under it is built)."""
        keep: set[int] = set()
        seen: set[int] = set()
        todo = [node for node, _exit in self.pending.values()]
        while todo:
            node = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, (And, Minus, Automaton)):
                keep.add(self.structural_id(node))
            else:
                todo.extend(children(node))
        return keep

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.lengths.attach(self)  # its reference to this builder is weak, so it did not travel

    def global_key(self, node: Node) -> bytes:
        """A key equal for structurally equal IR nodes across builders
        (:func:`~structgen.fsm.product_cache.structural_key`, memoized for this builder)."""
        return structural_key(node, self._gkeys, self._keep)

    def release_keys(self) -> None:
        """Drop the memo of :meth:`global_key` (the keys the cache holds stay there)."""
        self._gkeys = {}

    def _shared_dfa(self, kind: str, node: Node, build: Callable[[], ByteDFA]) -> ByteDFA:
        """``build()``, or the DFA an earlier compile built for a structurally equal node."""
        if self.shared is None:
            return build()
        key = (kind, self.global_key(node))
        got = self.shared.get(key)
        if got is None:
            got = build()
            self.shared.put(key, got)
        return got

    def child_dfa(self, node: Node) -> ByteDFA:
        """Eager DFA of an operand of ``And`` / ``Minus``, memoized by structure (schemas share
        operands such as "any JSON string" across many objects), in this compile and, with
        ``shared``, across compiles."""
        key = self.structural_id(node)
        got = self.child_dfas.get(key)
        if got is None:
            got = self._shared_dfa("operand", node, lambda: compile_dfa(node, self.budget, minimize=True, shared=self.shared))
            self.child_dfas[key] = got
        return got

    def product(self, node: And | Minus | Automaton) -> ByteDFA:
        """Eager (trimmed, minimized) DFA of an ``And`` / ``Minus`` / ``Automaton`` node,
        memoized by structure (and across compiles with ``shared``)."""
        key = self.structural_id(node)
        got = self._products.get(key)
        if got is None:
            try:
                got = self._shared_dfa("product", node, lambda: self._product_uncached(node))
            except GrammarCompileError as e:
                if e.product is None:  # the innermost product past a limit names it
                    e.product = node
                raise
            self._products[key] = got
        return got

    def _product_uncached(self, node: And | Minus | Automaton) -> ByteDFA:
        if isinstance(node, Automaton):
            return explicit_dfa(node, self.budget)
        if isinstance(node, And):
            dfas = [self.child_dfa(it) for it in node.items]
            if not dfas:
                raise GrammarCompileError("intersection of no languages")
            acc = dfas[0]
            for d in dfas[1:]:
                acc = product_dfa(acc, d, self.budget, minus=False)
            return acc
        left = self.child_dfa(node.left)
        strings = literal_strings(node.right)
        if strings is not None:  # most often property names excluded from the undeclared ones
            return minus_literals(left, strings, self.budget)
        right = self.child_dfa(node.right)
        return product_dfa(left, right, self.budget, minus=True)

    def embed(self, dfa: ByteDFA) -> tuple[int, int]:
        nfa = self.nfa
        s_in, s_out = nfa.new(), nfa.new()
        if dfa.is_empty():
            return s_in, s_out
        base = nfa.new_block(dfa.num_states - 1) - 1  # DFA state st -> NFA state base + st
        nfa.eps[s_in].append(base + dfa.initial)
        for st in np.flatnonzero(dfa.accepting).tolist():
            nfa.eps[base + st].append(s_out)
        states, los, his, targets = table_runs(dfa.table[1:])
        for st, lo, hi, tgt in zip(states.tolist(), los.tolist(), his.tolist(), targets.tolist()):
            nfa.edge(base + 1 + st, lo, hi, base + tgt)
        return s_in, s_out


def explicit_dfa(node: Automaton, budget: Budget) -> ByteDFA:
    """The trimmed, minimized :class:`ByteDFA` of an :class:`Automaton` node.  Raises
    :class:`GrammarCompileError` past ``budget.max_states``."""
    n = len(node.edges)
    budget.check_states(n)
    trans = np.full((n, 256), -1, dtype=np.int32)  # [S, 256]; -1: no edge
    for q, out in enumerate(node.edges):
        for lo, hi, target in out:
            trans[q, lo : hi + 1] = target
    accepting = np.array(node.accepting, dtype=bool)  # [S]
    first, class_of_byte = byte_classes(trans)  # bytes with equal columns share a class
    classes = np.take(trans, first, axis=1)  # [S, C]
    return trim_and_minimize(classes, accepting, class_of_byte, 0, budget, minimize=True)


def table_runs(table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Maximal runs of equal non-dead targets in each row of ``table`` ``[S, 256]``, all rows at
    once: ``(row, lo, hi, target)``, each ``int64 [R]``, by row then ``lo``."""
    s = table.shape[0]
    starts = np.ones((s, 256), dtype=bool)  # [S, 256] a run starts at this byte
    starts[:, 1:] = table[:, 1:] != table[:, :-1]
    rows, los = np.nonzero(starts)  # [R'] row-major: by row, then byte
    last = np.ones(len(los), dtype=bool)  # [R'] the last run of its row
    last[:-1] = rows[:-1] != rows[1:]
    ends = np.where(last, 255, np.append(los[1:], 0) - 1)  # [R'] the next run's start - 1, or 255
    targets = table[rows, los].astype(np.int64)  # [R']
    live = targets != DEAD
    return rows[live], los[live], ends[live], targets[live]


def compile_dfa(
    node: Node, budget: Budget | None = None, *, minimize: bool = True, use_compiled: bool = True, shared: ProductCache | None = None
) -> ByteDFA:
    """Compile an anchor-free regex IR node into a trimmed (and, if small enough, minimal) ByteDFA.

    Subset construction and minimization run in C (``fsm/_lazy_expand.c``,
    ``fsm/_minimize.c``) where they are built and ``use_compiled``, else in Python and numpy;
    the same language and state count either way.  ``shared``: where the eager DFAs of the
    node's own intersections and differences are kept across compiles.
    Raises :class:`GrammarTimeoutError` / :class:`GrammarCompileError` when ``budget`` is
    exceeded.  The empty language compiles to a DFA whose ``initial`` is 0.
    """
    budget = budget or Budget()
    builder = NFABuilder(budget, shared=shared)
    start, end = builder.build(node)
    if use_compiled and has_compiled_expansion():
        trans, accepting, class_of_byte, initial = determinize_built(builder, start, end, budget)
    else:
        trans, accepting, class_of_byte = determinize(builder.nfa, start, end, budget)
        initial = 0
    return trim_and_minimize(trans, accepting, class_of_byte, initial, budget, minimize=minimize, use_compiled=use_compiled)
