"""Lengths of regex IR nodes, as the NFA builder and the lazy DFA need them: whether a node
matches the empty string, its shortest string (exact), an upper bound on its longest, and the
worst shortest way out from inside it, each memoized by structure; and the NFA states an eager
build of a node makes.  ``And`` / ``Minus`` / ``Automaton`` nodes are read off their eager
product DFAs, which the builder owns.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from structgen.schemas.charset import utf8_sequences
from structgen.schemas.ir import Alt, And, Automaton, Chars, Join, Lit, Members, Minus, Node, Rep, Seq

from .dfa_paths import NO_PATH, longest_dfa, shortest_dfa, worst_dfa
from .length_product import CountedAutomaton, CountedState

if TYPE_CHECKING:
    from .nfa import NFABuilder


class NodeLengths:
    """The length analyses of one :class:`~.nfa.NFABuilder`'s IR nodes (its structural ids key
    the memos; its product DFAs answer for ``And`` / ``Minus`` / ``Automaton``).  Pickled with
    the builder, memos included."""

    def __init__(self, builder: NFABuilder) -> None:
        # a weak reference: the builder holds its NodeLengths, and a cycle between them would
        # leave every grammar's NFA to the cyclic collector, which never frees what gc.freeze
        # froze (the engine freezes a grammar once it serves)
        self._builder = weakref.ref(builder)
        self._nullable: dict[int, bool] = {}  # structural id -> matches the empty string
        self._shortest: dict[int, int] = {}  # structural id -> shortest string's bytes
        self._worst: dict[int, int] = {}  # structural id -> worst_distance
        self._longest: dict[int, int] = {}  # structural id -> longest bound

    @property
    def builder(self) -> NFABuilder:
        got = self._builder()
        assert got is not None, "NodeLengths outlived its NFABuilder"
        return got

    def attach(self, builder: NFABuilder) -> None:
        """Point at ``builder`` (a copy unpickled with its memos)."""
        self._builder = weakref.ref(builder)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_builder"]  # a weak reference does not pickle: the builder re-attaches its copy
        return state

    def _counted(self, node: Node) -> tuple[CountedAutomaton, int, int] | None:
        """(automaton, state, characters read) of a lazy length product or one of its pairs."""
        products = self.builder.length_products
        if isinstance(node, CountedState) and products is not None:
            return products.occurrences[node.occ][0], node.state, node.count
        if isinstance(node, And):
            got = self.builder.counted(node)
            if got is not None:
                return got, got.initial, 0
        return None

    def nullable(self, node: Node) -> bool:
        """Whether ``node`` matches the empty string (memoized by structure)."""
        key = self.builder.structural_id(node)
        got = self._nullable.get(key)
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
        elif (counted := self._counted(node)) is not None:
            automaton, state, count = counted
            out = automaton.accepting[state] and automaton.live(state, count)
        elif isinstance(node, (And, Minus, Automaton)):
            dfa = self.builder.product(node)
            out = not dfa.is_empty() and bool(dfa.accepting[dfa.initial])
        else:
            out = False
        self._nullable[key] = out
        return out

    def eager_states(self, node: Node, limit: int, memo: dict[int, tuple[Node, int]]) -> int:
        """NFA states an eager :meth:`NFABuilder.build` of ``node`` makes (no stubs inside), or
        a number above ``limit`` once the count passes it (the walk stops there).  An ``And`` /
        ``Minus`` / ``Automaton`` whose product is not built yet counts as above ``limit``.
        ``memo``: ``id(node) -> (node, count)`` (holding each node, so no id is reused while it
        lives)."""
        got = memo.get(id(node))
        if got is not None:
            return got[1]
        over = limit + 1
        if isinstance(node, Lit):
            n = len(node.data) + 1
        elif isinstance(node, Chars):
            n = self.builder.chars_states(node.cs)
        elif isinstance(node, (Seq, Alt)):
            n = 2 if isinstance(node, Alt) else int(not node.items)  # an Alt's entry and exit; an empty Seq's one state
            for it in node.items:
                n += self.eager_states(it, limit, memo)
                if n > limit:
                    return over
        elif isinstance(node, Rep):
            k = self.eager_states(node.item, limit, memo)
            copies = node.lo + (1 if node.hi is None else node.hi - node.lo)
            n = 1 + copies * k + (node.hi is None or node.hi > node.lo)
        elif isinstance(node, Join):
            k, sep = self.eager_states(node.item, limit, memo), self.eager_states(node.sep, limit, memo)
            copies = max(node.lo, 1) if node.hi is None else node.hi
            n = 2 + copies * (k + sep)
        elif isinstance(node, Members):
            sep = self.eager_states(node.sep, limit, memo)
            n = 2 * len(node.items) + 3
            for member, _required in node.items:
                n += self.eager_states(member, limit, memo) + sep
                if n > limit:
                    return over
            if node.extra is not None:
                n += self.eager_states(node.extra, limit, memo) + sep
        elif isinstance(node, (And, Minus, Automaton)):
            dfa = self.builder.built_product(node)
            n = over if dfa is None else dfa.num_states + 1
        else:
            return over  # anchors and anything else: built (and refused) the lazy way
        n = min(n, over)
        memo[id(node)] = (node, n)
        return n

    def _memoized(self, table: dict[int, int], node: Node, compute: Callable[[Node], int]) -> int:
        """``table[structural id of node]``, filled with ``compute(node)`` capped at ``NO_PATH``."""
        key = self.builder.structural_id(node)
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
        elif (counted := self._counted(node)) is not None:
            out = counted[0].shortest_bytes(counted[1], counted[2])
        elif isinstance(node, (And, Minus, Automaton)):
            out = shortest_dfa(self.builder.product(node))
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
        elif (counted := self._counted(node)) is not None:
            out = counted[0].bytes_bound(counted[2])
        elif isinstance(node, (And, Minus, Automaton)):
            most = longest_dfa(self.builder.product(node))
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
        elif (counted := self._counted(node)) is not None:
            out = counted[0].bytes_bound(counted[2])
        elif isinstance(node, (And, Minus, Automaton)):
            out = worst_dfa(self.builder.product(node))
        else:
            raise TypeError(f"not a regex IR node: {node!r}")
        return out
