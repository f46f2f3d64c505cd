"""Lazy length products: a JSON string whose content must match a pattern or format *and* a
length bound (``maxLength``, counted in code points), built on demand.

The eager product of the content automaton X with "at most ``hi`` characters" has about
|X| × (``hi`` + 1) states, past the state cap for common schemas (an ``email`` of at most 254
characters, a ``uri`` of at most 2,048).  Here the product is left implicit: a state is a pair
(state p of X's automaton, characters c read so far), and its NFA fragment is built only when
the lazy DFA first reaches it (:class:`CountedState` stubs).  A transition that completes a
character (the JSON encoding of one code point: raw UTF-8, a short escape or ``\\u00XX``)
counts one; it is kept only when the characters still allowed can reach acceptance
(``c + min_chars[p'] <= hi``), so every built state stays live, as pruning requires.  The
character boundaries come from running X's automaton beside the automaton of "any encoded
characters" (a minimized X alone may merge a boundary with the inside of an escape).

Used when the lower bound is implied (``lo`` ≤ the fewest characters X accepts: every string
of X that fits under ``hi`` then also meets ``lo``); otherwise the eager product is built as
before.  A ``maxLength`` alone (X any string) is a *plain* product, its ``minLength`` characters
read first: its positions' mask rows follow from one relaxed row by arithmetic
(:mod:`.counted_rows`).  A pair far from its bound has the mask row of its *relaxed* pair (the
same state with no count), so one walk serves every far position and discovers relaxed pairs
only.  The idea is the counter product of bounded repetition (as in RE2's and Rust
regex-automata's bounded-repeat handling, and llguidance's lazy lexer states), applied at the
level of the JSON string encoding.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from structgen.schemas.ir import And, Node, Rep
from structgen.schemas.json_strings import ANY_STRING_ENCODED

from .counted_paths import min_bytes, min_chars, reverse_runs
from .dfa import DEAD, ByteDFA
from .dfa_paths import NO_PATH
from .errors import GrammarCompileError

if TYPE_CHECKING:
    from .counted_rows import CharNeeds
    from .nfa import NFABuilder

LAZY_MIN_PRODUCT = 8192  # pairs × (hi + 1) from which the product is built lazily
MAX_PAIRS = 1 << 16  # states of X's automaton beside the character tracker, past which it is not tried
MAX_CHAR_BYTES = 6  # the longest encoding of one code point (``\\u00XX``)
PLAIN_MIN_CHARS = 4  # a plain bounded string of at least this many optional characters is counted lazily
RELAXED = -1  # the count of a relaxed pair: the same automaton state with no bound (mask rows only)
AHEAD_POSITIONS = 8  # far positions a whole expansion builds after the one it met (LengthProducts.ahead)


class CountedRow(NamedTuple):
    """A state's mask row by arithmetic (:meth:`.lazy_dfa.LazyDFA.counted_row`): the row of
    automaton state ``relaxed`` less the tokens needing more than ``room`` characters of
    ``automaton`` (a plain one)."""

    relaxed: int
    room: int
    automaton: CountedAutomaton


class Layer(NamedTuple):
    """The NFA fragment of one character position of a :class:`CountedAutomaton` from one of
    its states, with every pair far from the bound (:meth:`CountedAutomaton.layer`): the
    automaton ``states`` it holds (breadth-first from the start, which is first), the local
    indices of the ``accepting`` ones, ``runs`` in build order as (local source, lo, hi, local
    target or automaton state, completes: 1 when the run ends a character, its target then an
    automaton state of the next position), and the byte ``bounds`` of every run."""

    states: tuple[int, ...]
    accepting: tuple[int, ...]
    runs: tuple[tuple[int, int, int, int, int], ...]
    bounds: frozenset[int]


@dataclass(frozen=True, eq=False, slots=True)
class CountedState(Node):
    """The pending fragment of state ``state`` of occurrence ``occ``'s :class:`CountedAutomaton`
    with ``count`` characters read (an NFA-builder node; never in a schema's IR)."""

    occ: int
    state: int
    count: int


class CountedAutomaton:
    """X's automaton beside the character tracker, with the character count left out.

    - ``edges[p]``: ``(lo, hi, target, completes)`` byte runs (``completes``: 1 when the byte
      ends a character); state 0 is dead, ``initial`` the start.
    - ``accepting[p]``; ``min_chars[p]``: the fewest characters to acceptance (``NO_PATH`` when
      none); ``min_bytes[p]`` / ``chars_at_min_bytes[p]``: the fewest bytes to acceptance and
      the fewest characters among the paths of that many bytes.
    - ``hi``: the length bound (characters).
    - ``plain``: X is any string (a ``maxLength`` alone): mask rows follow from the count by
      arithmetic (:meth:`LengthProducts.plain_pair`).

    A pair's count may be :data:`RELAXED`: the state with no bound at all, whose mask row the
    rows of a plain product's pairs are cut from.
    """

    def __init__(
        self, edges: list[list[tuple[int, int, int, int]]], accepting: list[bool], initial: int, hi: int, *, plain: bool = False
    ) -> None:
        self.edges = edges
        self.accepting = accepting
        self.initial = initial
        self.hi = hi
        self.plain = plain
        self._shape: tuple[object, ...] | None = None  # shape_key, made on first use
        self._layers: dict[int, Layer] = {}  # start state -> its far layer (layer), made on first use
        back = reverse_runs(edges)
        self.min_chars = min_chars(back, accepting)
        self.min_bytes, self.chars_at_min_bytes = min_bytes(back, accepting)
        self.max_min_chars = max((c for c in self.min_chars if c < NO_PATH), default=0)

    def __getstate__(self) -> dict[str, object]:
        """Pickled without its layers (a cache, rebuilt on use where a copy builds positions)."""
        state = self.__dict__.copy()
        state["_layers"] = {}
        return state

    @property
    def num_states(self) -> int:
        return len(self.edges)

    def shape_key(self) -> tuple[object, ...]:
        """A hashable key equal for automata with the same runs, acceptance and initial state
        (every plain automaton has one shape, whatever its bound); made once."""
        if self._shape is None:
            self._shape = (self.initial, tuple(self.accepting), tuple(tuple(r) for r in self.edges))
        return self._shape

    def live(self, state: int, count: int) -> bool:
        """Whether ``count`` characters read and ``state`` can still reach acceptance (a
        :data:`RELAXED` pair: whenever ``state`` can)."""
        if count == RELAXED:
            return self.min_chars[state] < NO_PATH
        return count + self.min_chars[state] <= self.hi

    def shortest_bytes(self, state: int, count: int) -> int:
        """The bytes of the shortest way to acceptance from (``state``, ``count``) within the
        bound (exact; ``NO_PATH`` when there is none): the unbounded shortest when its
        characters fit, else a breadth-first search over (state, count) pairs."""
        if not self.live(state, count):
            return NO_PATH
        if count == RELAXED or count + self.chars_at_min_bytes[state] <= self.hi:
            return self.min_bytes[state]
        seen = {(state, count)}
        frontier = [(state, count)]
        steps = 0
        while frontier:
            nxt = []
            for p, c in frontier:
                if self.accepting[p]:
                    return steps
                for _lo, _hi, t, inc in self.edges[p]:
                    pair = (t, c + inc)
                    if pair not in seen and self.live(*pair):
                        seen.add(pair)
                        nxt.append(pair)
            frontier = nxt
            steps += 1
        return NO_PATH

    def far(self, count: int, token_bytes: int) -> bool:
        """Whether no token of at most ``token_bytes`` bytes read from a pair with ``count``
        characters can meet the bound: then the pair has the mask row of the same state with
        no bound (:data:`RELAXED`)."""
        return self.hi - count >= token_bytes + self.max_min_chars

    def far_layer(self, count: int) -> bool:
        """Whether every pair a position with ``count`` characters read can build (its own and
        the next position's) is live exactly when its state can reach acceptance at all, as
        for a :data:`RELAXED` pair: then the position's fragment is :meth:`layer`'s."""
        return count == RELAXED or count + 1 + self.max_min_chars <= self.hi

    def layer(self, state: int) -> Layer:
        """The fragment of the position starting at ``state`` where :meth:`far_layer` holds
        (:class:`Layer`; the same for every such count); made once per state."""
        got = self._layers.get(state)
        if got is not None:
            return got
        local = {state: 0}
        order = [state]
        runs: list[tuple[int, int, int, int, int]] = []
        bounds: set[int] = set()
        for i, x in enumerate(order):  # grows as it goes: breadth-first, as a position is built
            for lo, hi, target, inc in self.edges[x]:
                if self.min_chars[target] >= NO_PATH:
                    continue
                bounds.update((lo, hi + 1))
                if inc:
                    runs.append((i, lo, hi, target, 1))
                    continue
                j = local.get(target)
                if j is None:
                    j = local[target] = len(order)
                    order.append(target)
                runs.append((i, lo, hi, j, 0))
        accepting = tuple(i for i, x in enumerate(order) if self.accepting[x])
        got = self._layers[state] = Layer(tuple(order), accepting, tuple(runs), frozenset(bounds))
        return got

    def bytes_bound(self, count: int) -> int:
        """An upper bound on the bytes of any string from a state with ``count`` characters
        read to acceptance (its longest, and its shortest way out); ``NO_PATH`` for a
        :data:`RELAXED` pair (unbounded)."""
        return NO_PATH if count == RELAXED else MAX_CHAR_BYTES * (self.hi - count + 1)


def counted_automaton(content: ByteDFA, chars: ByteDFA, lo: int, hi: int, *, plain: bool = False) -> CountedAutomaton | None:
    """The :class:`CountedAutomaton` of ``content`` (X's trimmed DFA) under ``lo`` … ``hi``
    characters, ``chars`` being the DFA of any sequence of encoded characters (its initial
    state the only boundary), or None where the eager product is the better choice: it is
    small (under :data:`LAZY_MIN_PRODUCT`; not asked of a ``plain`` one, X being any string,
    whose alternative is a lazily unrolled counter), X's pairs pass :data:`MAX_PAIRS`, or
    ``lo`` is not implied by X."""
    if content.is_empty():
        return None
    index = {(content.initial, chars.initial): 1}
    order = [(content.initial, chars.initial)]
    edges: list[list[tuple[int, int, int, int]]] = [[]]
    accepting = [False]
    boundary = chars.initial
    i = 0
    while i < len(order):
        a, b = order[i]
        i += 1
        ta = content.table[a].astype(np.int64)  # [256]
        tb = chars.table[b].astype(np.int64)  # [256]
        live = (ta != DEAD) & (tb != DEAD)  # [256]
        pair = np.where(live, ta * chars.num_states + tb, -1)  # [256] the next pair, -1 dead
        targets = np.zeros(256, dtype=np.int64)  # [256] the next pair's id
        for key in np.unique(pair[live]).tolist():
            ab = divmod(key, chars.num_states)
            got = index.get(ab)
            if got is None:
                got = index[ab] = len(order) + 1
                order.append(ab)
                if len(order) > MAX_PAIRS:
                    return None
            targets[pair == key] = got
        edges.append(_runs(targets, tb == boundary))
        accepting.append(bool(content.accepting[a]) and b == boundary)
    if not plain and len(order) * (hi + 1) < LAZY_MIN_PRODUCT:
        return None
    automaton = CountedAutomaton(edges, accepting, 1, hi, plain=plain)
    if lo > automaton.min_chars[1]:
        return None  # some string of X is shorter than lo: the bound is not implied
    return automaton


def _runs(targets: np.ndarray, completes: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Maximal byte runs of one (target, completes) over ``targets`` ``[256]`` (0: dead)."""
    key = targets * 2 + completes  # [256]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])  # [R]
    ends = np.r_[starts[1:] - 1, 255]  # [R]
    to = targets[starts]  # [R]
    keep = to != 0
    return list(zip(starts[keep].tolist(), ends[keep].tolist(), to[keep].tolist(), completes[starts][keep].astype(int).tolist()))


@functools.lru_cache(maxsize=256)
def plain_automaton(hi: int) -> CountedAutomaton:
    """The plain :class:`CountedAutomaton` of any JSON string content of at most ``hi``
    characters (a ``maxLength`` alone).  Every bound has the same runs, built once per process
    from the automaton of any encoded characters; one instance per bound (memoized, so its
    layers are too), shared by every compile: it is never changed but for those caches."""
    from .nfa import compile_dfa  # the builder module imports this one

    if hi != PLAIN_MIN_CHARS:
        base = plain_automaton(PLAIN_MIN_CHARS)
        return CountedAutomaton(base.edges, base.accepting, base.initial, hi, plain=True)
    chars = compile_dfa(ANY_STRING_ENCODED, minimize=True)
    made = counted_automaton(chars, chars, 0, hi, plain=True)
    assert made is not None, "any string under a bound always has a counted automaton"
    return made


def prepare_plain_needs(needs: CharNeeds) -> None:
    """Compute ``needs``' tables (tokens, tails) for the plain automaton now (every plain automaton has the
    same shape, whatever its bound; about 50 ms on a 128k vocabulary): a start-up step, so
    that the first bounded string a process serves does not pay for it."""
    needs.prepare(plain_automaton(PLAIN_MIN_CHARS))


class LengthProducts:
    """The lazy length products of one lazy NFA builder: which ``And`` nodes are built this
    way (memoized by structure), each built occurrence (automaton, exit state), and the stub
    of each (occurrence, state, count) pair met so far.  Pickled with the builder."""

    def __init__(self) -> None:
        self._memo: dict[int, CountedAutomaton | None] = {}  # structural id of an And -> its lazy form
        self.occurrences: list[tuple[CountedAutomaton, int]] = []
        self._stubs: dict[tuple[int, int, int], int] = {}  # (occurrence, state, count) -> stub NFA state
        self._entries: dict[int, tuple[int, int, int]] = {}  # a built pair's entry NFA state -> (occurrence, state, count)
        self._plain: dict[int, CountedAutomaton] = {}  # bound -> the plain automaton (any string, at most that many characters)
        self.ahead = 0  # while an automaton is expanded whole: the pairs a plain product's position may still build after it

    def row_swaps(self, members: frozenset[int], token_bytes: int) -> list[tuple[int, int, int]]:
        """The counted pairs among ``members`` (an automaton state's NFA states) far from their
        bound (:meth:`CountedAutomaton.far`), as (entry NFA state, occurrence, state): swapped
        for their relaxed pairs (:data:`RELAXED`), they give a state with the same mask row."""
        out = []
        for s in members:
            got = self._entries.get(s)
            if got is not None and got[2] != RELAXED and self.occurrences[got[0]][0].far(got[2], token_bytes):
                out.append((s, got[0], got[1]))
        return out

    def entry(self, builder: NFABuilder, occ: int, state: int, count: int) -> int:
        """The entry NFA state of a built pair: where its stub's epsilon edge leads once
        :meth:`NFABuilder.expand_stub` built it."""
        stub = self._stubs[(occ, state, count)]
        assert stub not in builder.pending, "the pair is still a stub"
        return builder.nfa.eps[stub][0]

    def of(self, builder: NFABuilder, node: And) -> CountedAutomaton | None:
        """The :class:`CountedAutomaton` of ``node`` when it intersects a string content
        language with one bound on its characters and the eager product would be large
        (:func:`counted_automaton`), else None."""
        key = builder.structural_id(node)
        if key in self._memo:
            return self._memo[key]
        got = None
        char = builder.structural_id(ANY_STRING_ENCODED.item)
        bounds = [i for i in node.items if isinstance(i, Rep) and i.hi is not None and builder.structural_id(i.item) == char]
        if len(bounds) == 1 and len(node.items) > 1:
            rest = tuple(i for i in node.items if i is not bounds[0])
            try:
                content = builder.child_dfa(rest[0] if len(rest) == 1 else And(rest))
                hi = int(bounds[0].hi)  # type: ignore[arg-type]
                if content.num_states * (hi + 1) >= LAZY_MIN_PRODUCT:  # else the eager product is small
                    got = counted_automaton(content, builder.child_dfa(ANY_STRING_ENCODED), bounds[0].lo, hi)
            except GrammarCompileError as e:
                if e.product is None:  # an operand past a limit: the intersection names where (as NFABuilder.product)
                    e.product = node
                raise
        self._memo[key] = got
        return got

    def plain(self, builder: NFABuilder, hi: int) -> CountedAutomaton:
        """The plain automaton of any string of at most ``hi`` characters (memoized per bound):
        what a ``maxLength`` with no ``pattern`` or ``format`` counts."""
        got = self._plain.get(hi)
        if got is None:
            got = self._plain[hi] = plain_automaton(hi)
        return got

    @property
    def has_plain(self) -> bool:
        """Whether any plain automaton was made (so a state may hold a plain pair)."""
        return bool(self._plain)

    def plain_pair(self, members: frozenset[int]) -> tuple[int, int, int] | None:
        """``(occurrence, count, entry NFA state)`` of the one pair among ``members`` (an
        automaton state's NFA states) when it belongs to a plain product and sits on a
        character boundary (its automaton's initial state) with a count, else None (no such
        pair, or more than one pair of any product)."""
        found = None
        entries = self._entries
        for q in members:
            got = entries.get(q)
            if got is None:
                continue
            if found is not None:
                return None
            occ, state, count = got
            automaton = self.occurrences[occ][0]
            if not automaton.plain or state != automaton.initial or count == RELAXED:
                return None
            found = (occ, count, q)
        return found

    def body_bytes(self, occ: int) -> set[int]:
        """The bytes that continue occurrence ``occ``'s strings from a character boundary."""
        automaton = self.occurrences[occ][0]
        return {b for lo, hi, _t, _inc in automaton.edges[automaton.initial] for b in range(lo, hi + 1)}

    def build(self, builder: NFABuilder, automaton: CountedAutomaton) -> tuple[int, int]:
        """An occurrence of a lazy product (``automaton``, from :meth:`of`): its initial pair
        stubbed, one exit for all."""
        s, x = builder.nfa.new(), builder.nfa.new()
        self.occurrences.append((automaton, x))
        if automaton.live(automaton.initial, 0):
            builder.nfa.eps[s].append(self.stub(builder, len(self.occurrences) - 1, automaton.initial, 0))
        return s, x

    def stub(self, builder: NFABuilder, occ: int, state: int, count: int) -> int:
        """The stub state of pair (``state``, ``count``) of occurrence ``occ`` (one per pair, so
        its fragment is built once)."""
        key = (occ, state, count)
        q = self._stubs.get(key)
        if q is None:
            q = self._stubs[key] = builder.nfa.new()
            builder.pending[q] = (CountedState(occ, state, count), self.occurrences[occ][1])
        return q

    def build_state(self, builder: NFABuilder, node: CountedState) -> tuple[int, int]:
        """The NFA fragment of ``node`` and of the pairs it reaches inside the character it is
        in (byte runs that complete no character keep the count: the rest of a UTF-8 sequence
        or an escape), one NFA state each, built at once; runs that complete one go to the
        (stubbed) fragments of the live pairs of the next count.  One build per character
        position instead of one per pair: each build is a round trip out of the compiled
        expansion.  Every accepting pair reaches the fragment's exit."""
        automaton = self.occurrences[node.occ][0]
        if automaton.far_layer(node.count):
            s, e, stubs = self._build_layer(builder, node, automaton.layer(node.state))
            if self.ahead and automaton.plain and node.count != RELAXED:
                self._build_ahead(builder, automaton, node.count + AHEAD_POSITIONS, stubs)
            return s, e
        nfa = builder.nfa
        e = nfa.new()
        layer = {node.state: nfa.new()}  # automaton state -> its NFA state at this count
        order = [node.state]
        for x in order:
            q = layer[x]
            self._entries[q] = (node.occ, x, node.count)
            if automaton.accepting[x]:
                nfa.eps[q].append(e)
            for lo, hi, target, inc in automaton.edges[x]:
                count = RELAXED if node.count == RELAXED else node.count + inc
                if not automaton.live(target, count):
                    continue
                if inc:
                    nfa.edge(q, lo, hi, self.stub(builder, node.occ, target, count))
                    continue
                t = layer.get(target)
                if t is None:
                    t = layer[target] = nfa.new()
                    order.append(target)
                nfa.edge(q, lo, hi, t)
        return layer[node.state], e

    def _build_ahead(self, builder: NFABuilder, automaton: CountedAutomaton, last: int, stubs: list[int]) -> None:
        """With :attr:`ahead` pairs to spare: the pending pairs ``stubs`` of the next position
        built now, and those of the positions after them up to the one with ``last``
        characters read (:data:`AHEAD_POSITIONS` after the one just built), while they are far
        from the bound and the pairs last, as :meth:`NFABuilder.expand_stub` would build each
        later (one call out of the compiled expansion per few positions instead of one per
        position; an expansion cut short by its deadline ships few positions built ahead of
        it).  Each pair is about one automaton state of the expansion, whose states ``ahead``
        bounds."""
        pending = builder.pending
        todo = [q for q in stubs if q in pending]
        while todo:
            q = todo.pop()
            node = pending[q][0]
            assert isinstance(node, CountedState)
            layer = automaton.layer(node.state)
            if node.count > last or not automaton.far_layer(node.count) or self.ahead < len(layer.states):
                continue
            self.ahead -= len(layer.states)
            s, e, more = self._build_layer(builder, node, layer)
            builder.fill_stub(q, s, e)
            todo.extend(r for r in more if r in pending)

    def _build_layer(self, builder: NFABuilder, node: CountedState, layer: Layer) -> tuple[int, int, list[int]]:
        """:meth:`build_state` from the position's :class:`Layer` (every pair far from the
        bound): the same fragment, its NFA states allocated at once; also the stubs of the
        next position's pairs it leads to."""
        nfa = builder.nfa
        e = nfa.new_block(len(layer.states) + 1)
        base = e + 1
        eps, edges, entries = nfa.eps, nfa.edges, self._entries
        occ, count = node.occ, node.count
        for i, x in enumerate(layer.states):
            entries[base + i] = (occ, x, count)
        for i in layer.accepting:
            eps[base + i].append(e)
        after = count if count == RELAXED else count + 1
        stubs: dict[int, int] = {}
        for i, lo, hi, to, completes in layer.runs:
            if completes:
                q = stubs.get(to)
                if q is None:
                    q = stubs[to] = self.stub(builder, occ, to, after)
                edges[base + i].append((lo, hi, q))
            else:
                edges[base + i].append((lo, hi, base + to))
        nfa.bounds.update(layer.bounds)
        return base, e, list(stubs.values())
