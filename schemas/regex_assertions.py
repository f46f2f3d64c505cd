"""Anchors and look-arounds: a parsed regex (:func:`.regex.parse_regex`) → IR free of them.

All are assertions about the whole input, so each alternative is resolved as a sequence,
folded from the right with ``acc`` the language of the rest of the input: ``^`` / ``$``
require what comes before / after them to match the empty string, and a look-ahead ``(?=X)``
/ ``(?!X)`` intersects / subtracts "``X`` then anything" from ``acc``.  A look-behind of one
character (``(?<=[ab])``, ``(?<!\\\\)``, the halves of ``\\b`` / ``\\B``) or of a fixed string of
classes (``(?<=ab)``, ``(?<![0-9]x)``) is an *obligation* on the characters before its position,
carried leftwards through the fold until the items that consume those characters meet it (their
strings then end in the obligation's classes) or the input's start does; a negative one is the
union of the ways its string can fail (the first mismatch at each position, or the input's
start).  What must match reads a look-around's body narrow and what must not match reads it
wide, so the result stays a subset (narrow) or superset (wide) of what both ECMA-262 and Python
match.
"""

from __future__ import annotations

from typing import NamedTuple

from .charset import CharSet
from .errors import RegexError
from .ir import (
    EPSILON,
    NOTHING,
    Alt,
    Anchor,
    And,
    Automaton,
    Chars,
    Join,
    Lit,
    Look,
    Minus,
    Node,
    Rep,
    Seq,
    alt,
    char_length_bounds,
    children,
    lit,
    seq,
)
from .regex import parse_alternation_at, parse_regex, word_boundary_parts, word_class
from .regex_automaton import assertion_automaton

MAX_ASSERTION_BRANCHES = 64  # alternatives an anchor or look-ahead inside an alternation expands to


class _Unplaced(RegexError):
    """An assertion the fold cannot place (inside a repetition or a look-around, or past
    :data:`MAX_ASSERTION_BRANCHES`): :func:`resolve_anchors` builds the pattern's automaton
    instead (:func:`.regex_automaton.assertion_automaton`)."""


_ANYTHING = Rep(Chars(CharSet.any()), 0, None)


def _has_assertion(node: Node) -> bool:
    if isinstance(node, (Anchor, Look)):
        return True
    return any(_has_assertion(c) for c in children(node))


def _first_assertion(node: Node) -> int:
    """The pattern position of the first anchor or look-ahead in ``node`` (0 when none)."""
    if isinstance(node, (Anchor, Look)):
        return node.pos
    return next((p for p in (_first_assertion(c) for c in children(node)) if p), 0)


def _kind(node: Look) -> str:
    return "word boundary" if node.word else "look-behind" if node.behind else "look-ahead"


def _check_no_assertion(node: Node, pattern: str) -> None:
    if isinstance(node, Anchor):
        raise _Unplaced("anchor inside a repetition is not supported", pattern, node.pos)
    if isinstance(node, Look):
        raise _Unplaced(f"{_kind(node)} inside a repetition is not supported", pattern, node.pos)
    for child in children(node):
        _check_no_assertion(child, pattern)


def _check_no_behind(node: Node, pattern: str) -> None:
    if isinstance(node, Look) and (node.behind or node.word == "b"):
        raise _Unplaced(f"{_kind(node)} inside a repetition is not supported", pattern, node.pos)
    for child in children(node):
        _check_no_behind(child, pattern)


def _has_behind(node: Node) -> bool:
    if isinstance(node, Look) and (node.behind or node.word == "b"):
        return True
    return any(_has_behind(c) for c in children(node))


def _sequences(node: Node, pattern: str) -> list[tuple[Node, ...]]:
    """``node`` as alternatives of flat sequences in which every assertion outside a
    repetition is an item (groups inlined, alternations holding one distributed)."""
    if isinstance(node, Seq):
        out: list[tuple[Node, ...]] = [()]
        for item in node.items:
            parts = _sequences(item, pattern)
            out = [a + b for a in out for b in parts]
            if len(out) > MAX_ASSERTION_BRANCHES:
                why = f"anchors or look-arounds in alternations expand past {MAX_ASSERTION_BRANCHES} alternatives"
                raise _Unplaced(why, pattern, _first_assertion(node))
        return out
    if isinstance(node, Alt) and _has_assertion(node):
        return [s for item in node.items for s in _sequences(item, pattern)]
    if isinstance(node, Rep) and node.hi == 1 and _has_assertion(node.item):  # (…)? holding one
        return ([()] if node.lo == 0 else []) + _sequences(node.item, pattern)
    return [(node,)]


def nullable(node: Node) -> bool:
    """Whether ``node``'s language holds the empty string (regex IR without ``Members``)."""
    if isinstance(node, Lit):
        return not node.data
    if isinstance(node, Seq | And):
        return all(nullable(c) for c in node.items)
    if isinstance(node, Alt):
        return any(nullable(c) for c in node.items)
    if isinstance(node, Rep):
        return node.lo == 0 or nullable(node.item)
    if isinstance(node, Join):
        return nullable(node.item)
    if isinstance(node, Minus):
        return nullable(node.left) and not nullable(node.right)
    if isinstance(node, Automaton):
        return node.accepting[0]
    if isinstance(node, Chars):
        return False
    raise TypeError(f"nullable: unexpected {type(node).__name__}")


class _Behind(NamedTuple):
    """What the characters before a position must be, nearest first: the ``i``-th one back in
    ``classes[i]``; ``starts[i]``: whether the input's start right after ``i`` of them meets
    the obligation (none of them left to check).  ``(?<=X)`` is ``((X,), (False,))``,
    ``(?<!X)`` is ``((not X,), (True,))``; ``(?<=ab)`` is ``((b, a), (False, False))``."""

    classes: tuple[CharSet, ...]
    starts: tuple[bool, ...]

    def both(self, other: _Behind) -> _Behind:
        """Both obligations at once (position by position; the longer one's tail as it is)."""
        n = max(len(self.classes), len(other.classes))
        classes = tuple(_at(self.classes, i).intersect(_at(other.classes, i)) for i in range(n))
        starts = tuple((i >= len(self.starts) or self.starts[i]) and (i >= len(other.starts) or other.starts[i]) for i in range(n))
        return _Behind(classes, starts)

    def after(self, j: int) -> _Behind | None:
        """What is left once ``j`` characters met the nearest ``j`` classes (None: all met)."""
        return _Behind(self.classes[j:], self.starts[j:]) if j < len(self.classes) else None

    def impossible(self) -> bool:
        """No input meets it: the nearest class is empty and the input's start does not do."""
        return not self.classes[0] and not self.starts[0]


def _at(classes: tuple[CharSet, ...], i: int) -> CharSet:
    return classes[i] if i < len(classes) else CharSet.any()


def _spelled(classes: tuple[CharSet, ...]) -> Node:
    """The strings whose characters read backwards are in ``classes`` (nearest first)."""
    return seq(*(Chars(c) for c in reversed(classes)))


_Branches = dict[_Behind | None, Node]  # language of the rest of the input, per pending obligation


def _resolve_sequence(items: tuple[Node, ...], pattern: str, front: Node, tail: Node, wide: bool) -> Node:
    """The language of the whole input for one flat sequence: folded from the right, each
    branch holds the language of the rest of the input after each item, keyed by the
    look-behind obligation still pending there (``None``: none)."""
    starts = [k for k, item in enumerate(items) if isinstance(item, Anchor) and item.start]
    first = starts[-1] if starts else -1
    at_start = first + 1  # items[first + 1 : at_start] are assertions at input position 0 too
    while at_start < len(items) and isinstance(items[at_start], (Anchor, Look)):
        at_start += 1
    if first < 0 and front is not EPSILON:
        at_start = 0  # unanchored search: nothing is known to sit at position 0
    branches: _Branches = {None: tail}
    for k in range(len(items) - 1, first, -1):
        branches = _fold(items[k], branches, pattern, wide, k < at_start)
    if first < 0:
        return alt(*(seq(_front_under(front, ob), acc) for ob, acc in branches.items()))
    for before in reversed(items[:first]):  # all at input position 0: each must match ""
        if isinstance(before, (Anchor, Look)):
            branches = _fold(before, branches, pattern, wide, True)
        elif not nullable(before):
            return NOTHING
    return alt(*(acc for ob, acc in branches.items() if ob is None or ob.starts[0]))


def _fold(item: Node, branches: _Branches, pattern: str, wide: bool, at_start: bool) -> _Branches:
    """``branches`` with ``item`` put in front of each (see :func:`_resolve_sequence`)."""
    out: _Branches = {}
    if not branches:  # every way was ruled out further right
        return out

    def add(ob: _Behind | None, node: Node) -> None:
        if node is NOTHING or (ob is not None and ob.impossible()):
            return  # no input satisfies it
        out[ob] = alt(out[ob], node) if ob in out else node

    if isinstance(item, Look) and (item.behind or item.word == "b"):
        # each way the assertion holds: an obligation on the characters before, and for a word
        # boundary a look-ahead on the rest (worked out once, applied to every branch)
        pairs = word_boundary_parts(item, wide) if item.word == "b" else [(item, None)]
        ways = [(new, ahead) for behind, ahead in pairs for new in _behind(behind, pattern, wide)]
        if len(ways) * len(branches) > MAX_ASSERTION_BRANCHES:
            why = f"look-behinds expand past {MAX_ASSERTION_BRANCHES} alternatives"
            raise _Unplaced(why, pattern, item.pos)
        for ob, acc in branches.items():
            for new, ahead in ways:
                add(new if ob is None else ob.both(new), acc if ahead is None else _assert(ahead, acc, pattern, wide, at_start))
    elif isinstance(item, (Anchor, Look)):
        for ob, acc in branches.items():
            add(ob, _assert(item, acc, pattern, wide, at_start))
    elif _has_assertion(item):
        if _has_behind(item):
            _check_no_behind(item, pattern)
        if any(ob is not None for ob in branches):
            why = "a look-behind or word boundary next to a repetition holding assertions is not supported"
            raise _Unplaced(why, pattern, _first_assertion(item))
        add(None, _repetition(item, branches[None], pattern, wide))
    else:
        for ob, acc in branches.items():
            if ob is None:
                add(None, seq(item, acc))
            else:
                for piece, rest in _meeting(item, ob):
                    add(rest, seq(piece, acc))
    return out


def _meeting(item: Node, ob: _Behind) -> list[tuple[Node, _Behind | None]]:
    """``item``'s strings split by what they leave of obligation ``ob`` once read backwards:
    those as long as it that end in its classes (None left), and each shorter one that
    spells its nearest classes (the rest left; the empty string leaves it whole)."""
    k = len(ob.classes)
    lo, hi = char_length_bounds(item)
    out: list[tuple[Node, _Behind | None]] = []
    if hi is None or hi >= k:
        full = _ending_in(item, ob.classes[0]) if k == 1 else And((item, seq(_ANYTHING, _spelled(ob.classes))))
        out.append((full, None))
    for j in range(max(lo, 0), min(k - 1, k if hi is None else hi) + 1):
        if j == 0:
            if nullable(item):
                out.append((EPSILON, ob))
        else:
            out.append((And((item, _spelled(ob.classes[:j]))), ob.after(j)))
    return out


def _behind(item: Look, pattern: str, wide: bool) -> list[_Behind]:
    """The ways look-behind ``item`` holds, as obligations on the characters before it; its
    body (a fixed string of classes, or an alternation of them of one length) is read narrow
    where it must match and wide where it must not, as a look-ahead's.  A negative one holds
    where the first character read backwards misses its class, at every position, or where
    the input starts first."""
    body_wide = wide != item.negate
    if item.word:
        strings: list[tuple[CharSet, ...]] = [(word_class(item.word, body_wide),)]
    else:
        node = parse_alternation_at(pattern, item.start, wide=body_wide)
        if _has_assertion(node):
            raise _Unplaced("an anchor or look-around inside a look-behind is not supported", pattern, item.pos)
        got = _class_strings(node)
        if not got or len({len(x) for x in got}) != 1 or not got[0]:
            why = "look-behind of other than a fixed number of characters is not supported"
            raise RegexError(why, pattern, item.pos)
        strings = [tuple(reversed(x)) for x in got]  # nearest first
    if not item.negate:
        return [_Behind(x, (False,) * len(x)) for x in strings]
    ways = [_Behind((), ())]  # the conjunction so far: no obligation yet
    for x in strings:  # not (x1 or x2 …) = not x1 and not x2 …
        misses = [_Behind(x[:i] + (x[i].complement(),), (True,) * (i + 1)) for i in range(len(x))]
        ways = [w.both(m) for w in ways for m in misses]
        if len(ways) > MAX_ASSERTION_BRANCHES:
            raise _Unplaced(f"look-behinds expand past {MAX_ASSERTION_BRANCHES} alternatives", pattern, item.pos)
    return [w for w in ways if not w.impossible()]


def _class_strings(node: Node) -> list[tuple[CharSet, ...]] | None:
    """The strings of ``node`` as class strings (each a tuple of character classes), when it
    is a finite union of them (``None`` if it is not, or past 64 of them)."""
    if isinstance(node, Chars):
        return [(node.cs,)]
    if isinstance(node, Lit):
        return [tuple(CharSet.of_ranges([(ord(c), ord(c))]) for c in node.data.decode("utf-8"))]
    if isinstance(node, Seq):
        out: list[tuple[CharSet, ...]] = [()]
        for it in node.items:
            part = _class_strings(it)
            if part is None:
                return None
            out = [a + b for a in out for b in part]
            if len(out) > MAX_ASSERTION_BRANCHES:
                return None
        return out
    if isinstance(node, Alt):
        alts: list[tuple[CharSet, ...]] = []
        for branch in node.items:
            part = _class_strings(branch)
            if part is None:
                return None
            alts += part
        return alts if len(alts) <= MAX_ASSERTION_BRANCHES else None
    if isinstance(node, Rep) and node.hi is not None and node.lo == node.hi:
        return _class_strings(seq(*([node.item] * node.lo)))
    return None


def _ending_in(item: Node, chars: CharSet) -> Node:
    """The non-empty strings of assertion-free ``item`` whose last character is in ``chars``,
    built on ``item``'s structure (the last character's class narrowed where it is read) so
    no automaton of the whole item is needed; an ``And`` with "anything, then ``chars``" only
    for the node kinds that have no structure to follow."""
    if isinstance(item, Chars):
        return Chars(item.cs.intersect(chars))
    if isinstance(item, Rep):
        if item.hi == 0:
            return NOTHING
        # the last non-empty iteration ends in chars; iterations after it (if any) are empty
        lo = 0 if nullable(item.item) else max(item.lo - 1, 0)
        return seq(Rep(item.item, lo, None if item.hi is None else item.hi - 1), _ending_in(item.item, chars))
    if isinstance(item, Seq):
        if not item.items:
            return NOTHING
        *head, last = item.items
        out = seq(*head, _ending_in(last, chars))
        return alt(out, _ending_in(seq(*head), chars)) if nullable(last) else out  # last matching ""
    if isinstance(item, Alt):
        return alt(*(_ending_in(branch, chars) for branch in item.items))
    return And((item, seq(_ANYTHING, Chars(chars))))


def _front_under(front: Node, ob: _Behind | None) -> Node:
    """``front`` (nothing, or anything before an unanchored match) meeting obligation ``ob``."""
    if ob is None:
        return front
    empty = EPSILON if ob.starts[0] else NOTHING
    if front is EPSILON:
        return empty
    assert front is _ANYTHING, "look-behinds are resolved only with the whole input's front"
    short = [_spelled(ob.classes[:j]) for j in range(1, len(ob.classes)) if ob.starts[j]]  # the input starts inside
    return alt(empty, *short, seq(_ANYTHING, _spelled(ob.classes)))


def _repetition(item: Node, rest: Node, pattern: str, wide: bool) -> Node:
    """A repetition holding assertions, followed by ``rest``, in two forms: iterations
    that may end the input with ``$`` (``(a(,|$))*``), and single characters each behind
    negative look-aheads right before the end (``((?!ab).)*$``, "no ``ab`` from here on")."""
    if rest is NOTHING:
        return NOTHING  # nothing can follow: whatever the repetition matches
    if not isinstance(item, Rep):
        _check_no_assertion(item, pattern)
    assert isinstance(item, Rep)
    body = _sequences(item.item, pattern)
    plain = [s for s in body if not any(_has_assertion(x) for x in s)]
    ending = [s for s in body if s not in plain and all(not _has_assertion(x) or (isinstance(x, Anchor) and not x.start) for x in s)]
    if plain and len(plain) + len(ending) == len(body):
        once = Alt(tuple(seq(*s) for s in plain))
        lo, hi = item.lo, item.hi
        ended = [_resolve_sequence(s, pattern, EPSILON, rest, wide) for s in ending]  # the last iteration reaches `$`
        return alt(seq(Rep(once, lo, hi), rest), seq(Rep(once, max(lo - 1, 0), None if hi is None else hi - 1), alt(*ended)))
    looks = [x for x in body[0][:-1] if isinstance(x, Look) and x.negate and not x.behind and not x.word] if len(body) == 1 else []
    if looks and len(looks) == len(body[0]) - 1 and isinstance(body[0][-1], Chars):
        char = body[0][-1]
        if wide:  # a superset: the look-aheads dropped
            return seq(Rep(char, item.lo, item.hi), rest)
        if rest is EPSILON:  # right before the end: no match of a look-ahead starts in the run
            looked = Alt(tuple(_look_prefix(x, pattern, True, False) for x in looks))
            run = Minus(Rep(char, max(item.lo, 1), item.hi), seq(_ANYTHING, looked))
            return alt(EPSILON, run) if item.lo == 0 else run
    _check_no_assertion(item, pattern)
    raise AssertionError("unreachable")


def _look_prefix(item: Look, pattern: str, body_wide: bool, at_start: bool) -> Node:
    """The inputs that start with a match of look-ahead ``item``'s body, read wide or narrow."""
    if item.word:
        return seq(Chars(word_class(item.word, body_wide)), _ANYTHING)
    starts: list[Node] = []
    body = parse_alternation_at(pattern, item.start, wide=body_wide)
    if _has_behind(body):  # its look-behinds would need the input before the look-ahead
        raise _Unplaced("a look-behind or word boundary inside a look-ahead is not supported", pattern, item.pos)
    for items in _sequences(body, pattern):
        if not at_start and any(isinstance(x, Anchor) and x.start for x in items):
            raise _Unplaced("'^' inside a look-ahead is supported only at the input's start", pattern, item.pos)
        starts.append(_resolve_sequence(items, pattern, EPSILON, _ANYTHING, body_wide))
    return starts[0] if len(starts) == 1 else Alt(tuple(starts))


def _assert(item: Node, rest: Node, pattern: str, wide: bool, at_start: bool = False) -> Node:
    """``rest`` (the language of the rest of the input) under assertion ``item``; ``at_start``:
    it sits at the input's start."""
    if isinstance(item, Anchor):
        if item.start:
            return rest  # ^ before another ^: both at position 0
        at_end = EPSILON if nullable(rest) else NOTHING
        if wide:  # Python's `$` also matches before one final newline
            return alt(at_end, And((rest, lit("\n"))))
        return at_end
    assert isinstance(item, Look)
    # what must match reads the body narrow, what must not match reads it wide (and the
    # reverse for the wide reading), so the result stays on its side of both dialects
    prefix = _look_prefix(item, pattern, wide != item.negate, at_start)
    return Minus(rest, prefix) if item.negate else And((rest, prefix))


def resolve_anchors(node: Node, pattern: str, *, search: bool, wide: bool = False) -> Node:
    """Turn a parsed regex into an IR node free of anchors and look-aheads.

    ``search=False`` (fullmatch, for user regexes): the match is the whole input.
    ``search=True`` (JSON Schema ``pattern``, which is unanchored): the input is anything, a
    match, anything; ``^`` / ``$`` pin the match to the input's start / end.  Alternations
    holding an anchor or look-around are distributed into alternatives (at most
    ``MAX_ASSERTION_BRANCHES``), then each alternative is resolved as a sequence; where one sits
    where the fold cannot place it (inside a repetition or a look-around, or past that many
    alternatives) the whole pattern becomes a byte automaton instead
    (:func:`.regex_automaton.assertion_automaton`; :class:`RegexError` past its state cap).  ``wide``
    reads ``$`` as Python does (end, or before a final newline) for patterns used
    negatively; the result is then a superset of what both dialects match.
    """
    pad = _ANYTHING if search else EPSILON
    try:
        out = [_resolve_sequence(items, pattern, pad, pad, wide) for items in _sequences(node, pattern)]
    except _Unplaced:
        return assertion_automaton(node, pattern, search=search, wide=wide)
    return out[0] if len(out) == 1 else Alt(tuple(out))


def regex_to_ir(pattern: str) -> Node:
    """A user regex (fullmatch semantics) as anchor-free IR."""
    return resolve_anchors(parse_regex(pattern), pattern, search=False)
