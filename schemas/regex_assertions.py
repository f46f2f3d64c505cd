"""Anchors and look-aheads: a parsed regex (:func:`.regex.parse_regex`) → IR free of them.

Both are assertions about the whole input, so each alternative is resolved as a sequence,
folded from the right with ``acc`` the language of the rest of the input: ``^`` / ``$``
require what comes before / after them to match the empty string, and a look-ahead ``(?=X)``
/ ``(?!X)`` intersects / subtracts "``X`` then anything" from ``acc``.  What must match reads a
look-ahead's body narrow and what must not match reads it wide, so the result stays a subset
(narrow) or superset (wide) of what both ECMA-262 and Python match.
"""

from __future__ import annotations

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
    children,
    lit,
    seq,
)
from .regex import parse_alternation_at, parse_regex

MAX_ASSERTION_BRANCHES = 64  # alternatives an anchor or look-ahead inside an alternation expands to
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


def _check_no_assertion(node: Node, pattern: str) -> None:
    if isinstance(node, Anchor):
        raise RegexError("anchor inside a repetition is not supported", pattern, node.pos)
    if isinstance(node, Look):
        raise RegexError("look-ahead inside a repetition is not supported", pattern, node.pos)
    for child in children(node):
        _check_no_assertion(child, pattern)


def _sequences(node: Node, pattern: str) -> list[tuple[Node, ...]]:
    """``node`` as alternatives of flat sequences in which every assertion outside a
    repetition is an item (groups inlined, alternations holding one distributed)."""
    if isinstance(node, Seq):
        out: list[tuple[Node, ...]] = [()]
        for item in node.items:
            parts = _sequences(item, pattern)
            out = [a + b for a in out for b in parts]
            if len(out) > MAX_ASSERTION_BRANCHES:
                why = f"anchors or look-aheads in alternations expand past {MAX_ASSERTION_BRANCHES} alternatives"
                raise RegexError(why, pattern, _first_assertion(node))
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


def _resolve_sequence(items: tuple[Node, ...], pattern: str, front: Node, tail: Node, wide: bool) -> Node:
    """The language of the whole input for one flat sequence: folded from the right, ``acc``
    is the language of the rest of the input after each item."""
    starts = [k for k, item in enumerate(items) if isinstance(item, Anchor) and item.start]
    first = starts[-1] if starts else -1
    at_start = first + 1  # items[first + 1 : at_start] are assertions at input position 0 too
    while at_start < len(items) and isinstance(items[at_start], (Anchor, Look)):
        at_start += 1
    if first < 0 and front is not EPSILON:
        at_start = 0  # unanchored search: nothing is known to sit at position 0
    acc = tail
    for k in range(len(items) - 1, first, -1):
        item = items[k]
        if isinstance(item, (Anchor, Look)):
            acc = _assert(item, acc, pattern, wide, k < at_start)
        elif _has_assertion(item):
            acc = _repetition(item, acc, pattern, wide)
        else:
            acc = seq(item, acc)
    if first < 0:
        return seq(front, acc)
    for before in reversed(items[:first]):  # all at input position 0: each must match ""
        if isinstance(before, (Anchor, Look)):
            acc = _assert(before, acc, pattern, wide, True)
        elif not nullable(before):
            return NOTHING
    return acc


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
    looks = [x for x in body[0][:-1] if isinstance(x, Look) and x.negate] if len(body) == 1 else []
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
    starts: list[Node] = []
    for items in _sequences(parse_alternation_at(pattern, item.start, wide=body_wide), pattern):
        if not at_start and any(isinstance(x, Anchor) and x.start for x in items):
            raise RegexError("'^' inside a look-ahead is supported only at the input's start", pattern, item.pos)
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
    match, anything; ``^`` / ``$`` pin the match to the input's start / end.  An anchor or
    look-ahead may sit anywhere outside a repetition (inside one it raises
    :class:`RegexError`): alternations holding one are distributed into alternatives (at most
    ``MAX_ASSERTION_BRANCHES``), then each alternative is resolved as a sequence.  ``wide``
    reads ``$`` as Python does (end, or before a final newline) for patterns used
    negatively; the result is then a superset of what both dialects match.
    """
    pad = _ANYTHING if search else EPSILON
    out = [_resolve_sequence(items, pattern, pad, pad, wide) for items in _sequences(node, pattern)]
    return out[0] if len(out) == 1 else Alt(tuple(out))


def regex_to_ir(pattern: str) -> Node:
    """A user regex (fullmatch semantics) as anchor-free IR."""
    return resolve_anchors(parse_regex(pattern), pattern, search=False)
