"""JSON strings: the IR of a string's *contents* (code points: ``pattern`` ∩ length ∩ ``format``)
and its mapping through the JSON string encoding (raw UTF-8, the short escapes:
``json.dumps(ensure_ascii=False)``'s output)."""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

from .charset import CharSet
from .errors import RegexError, SchemaError, UnsupportedSchemaError
from .formats import STANDARD_FORMATS, format_ir
from .ir import EPSILON, NOTHING, Alt, And, Automaton, Chars, Join, Lit, Minus, Node, Rep, Seq, alt, char_length_bounds, lit, rep, seq
from .regex import parse_regex
from .regex_assertions import resolve_anchors

if TYPE_CHECKING:
    from .json_schema import Converter


ANY_CHAR = CharSet.any()


JSON_SPECIAL = CharSet.of_ranges([(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)])


SHORT_ESCAPES = {0x22: '\\"', 0x5C: "\\\\", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}


def encode_json_string_content(node: Node) -> Node:
    """Map a code-point-level IR (string *contents*) to the IR of their JSON encoding.

    The encoding (raw UTF-8, short escapes, ``\\u00XX`` for other control characters) is
    injective and prefix-free, so it commutes with union, intersection and difference.
    """
    if node is ANY_STRING_CONTENT:
        return ANY_STRING_ENCODED
    return _encode(node, {})


def _encode(n: Node, memo: dict[int, Node]) -> Node:
    """:func:`encode_json_string_content` of ``n``, shared sub-expressions encoded once
    (``memo``: id of a node of the input → its encoding; a module-level function, so that no
    closure refers to itself and every call's memo goes by reference counting)."""
    got = memo.get(id(n))
    if got is not None:
        return got
    out: Node
    if isinstance(n, Chars):
        out = encode_charset(n.cs)
    elif isinstance(n, Lit):  # one string: its one encoding, as json.dumps writes it
        out = lit(json.dumps(n.data.decode("utf-8"), ensure_ascii=False)[1:-1]) if n.data else EPSILON
    elif isinstance(n, Seq):
        out = seq(*[_encode(i, memo) for i in n.items]) if n.items else EPSILON
    elif isinstance(n, Alt):
        out = Alt(tuple(_encode(i, memo) for i in n.items))
    elif isinstance(n, Rep):
        out = Rep(_encode(n.item, memo), n.lo, n.hi)
    elif isinstance(n, And):
        out = And(tuple(_encode(i, memo) for i in n.items))
    elif isinstance(n, Minus):
        out = Minus(_encode(n.left, memo), _encode(n.right, memo))
    elif isinstance(n, Join):
        out = Join(_encode(n.item, memo), _encode(n.sep, memo), n.lo, n.hi)
    elif isinstance(n, Automaton):
        out = _encode_automaton(n)
    else:
        raise TypeError(f"cannot JSON-encode {n!r}")
    memo[id(n)] = out
    return out


def _escape(cp: int) -> bytes:
    return SHORT_ESCAPES.get(cp, f"\\u{cp:04x}").encode()


def _encode_automaton(a: Automaton) -> Automaton:
    """Automaton ``a`` over the raw UTF-8 text, read through the JSON string encoding: each
    edge on a byte that ``json.dumps`` escapes (control characters, ``"``, ``\\``; one-byte
    code points, so an edge of their own) becomes the path spelling its escape, the escapes
    of one state sharing their ``\\`` and what follows it (a trie of new states)."""
    edges: list[tuple[tuple[int, int, int], ...]] = []
    accepting = list(a.accepting)
    tries: dict[frozenset[tuple[bytes, int]], int] = {}

    def trie(items: frozenset[tuple[bytes, int]]) -> int:
        got = tries.get(items)
        if got is None:
            got = tries[items] = len(accepting)
            accepting.append(False)
            edges.append(())
            by_byte: dict[int, set[tuple[bytes, int]]] = {}
            for text, target in items:
                by_byte.setdefault(text[0], set()).add((text[1:], target))
            row = []
            for byte, rest in sorted(by_byte.items()):
                ends = [t for text, t in rest if not text]
                row.append((byte, byte, ends[0] if ends else trie(frozenset(rest))))
            edges[got - len(a.accepting)] = tuple(row)
        return got

    rows: list[tuple[tuple[int, int, int], ...]] = []
    for row in a.edges:
        plain: list[tuple[int, int, int]] = []
        escaped: set[tuple[bytes, int]] = set()
        for lo, hi, target in row:
            for plo, phi in CharSet.of_ranges([(lo, hi)]).difference(JSON_SPECIAL).ranges:
                plain.append((plo, phi, target))
            for slo, shi in CharSet.of_ranges([(lo, hi)]).intersect(JSON_SPECIAL).ranges:
                escaped |= {(_escape(b)[1:], target) for b in range(slo, shi + 1)}
        if escaped:
            plain.append((0x5C, 0x5C, trie(frozenset(escaped))))
        rows.append(tuple(sorted(plain)))
    return Automaton(f"json:{a.key}", (*rows, *edges), tuple(accepting))


@functools.lru_cache(maxsize=4096)
def encode_charset(cs: CharSet) -> Node:
    """One code point of ``cs`` as JSON string text: raw UTF-8, or ``\\`` + a short escape
    letter, or ``\\u00`` + two lowercase hex digits (the control characters without a short
    escape), exactly as ``json.dumps(ensure_ascii=False)`` writes them."""
    raw = cs.difference(JSON_SPECIAL)
    parts: list[Node] = [Chars(raw)] if raw else []
    special = cs.intersect(JSON_SPECIAL)
    letters: list[str] = []
    by_high: dict[int, list[str]] = {}
    for lo, hi in special.ranges:
        for cp in range(lo, hi + 1):
            esc = SHORT_ESCAPES.get(cp)
            if esc is not None:
                letters.append(esc[1])
            else:
                by_high.setdefault(cp >> 4, []).append(f"{cp & 15:x}")
    after: list[Node] = []
    if letters:
        after.append(Chars(CharSet.of_chars("".join(letters))))
    for high, lows in sorted(by_high.items()):
        after.append(seq(lit(f"u00{high:x}"), Chars(CharSet.of_chars("".join(lows)))))
    if after:
        parts.append(seq(lit("\\"), alt(*after)))
    return alt(*parts) if parts else NOTHING


def json_string(content: Node) -> Node:
    """The JSON string literal whose decoded content is in ``content`` (code-point IR)."""
    return seq(lit('"'), encode_json_string_content(content), lit('"'))


ANY_STRING_CONTENT = Rep(Chars(ANY_CHAR), 0, None)


ANY_STRING_ENCODED = Rep(encode_charset(ANY_CHAR), 0, None)


def string_content(cv: Converter, schema: dict[str, Any], ptr: str) -> Node:
    """Code-point IR of the decoded strings allowed by the string keywords of ``schema``."""
    parts: list[Node] = []
    fmt = schema.get("format")
    if fmt is not None:
        f_ir = format_ir(fmt) if isinstance(fmt, str) else None
        if f_ir is not None:
            parts.append(f_ir)
        elif isinstance(fmt, str) and fmt not in STANDARD_FORMATS:
            cv.report.ignored_formats.append((fmt, ptr))  # not defined by JSON Schema: an annotation
        else:
            cv.unsupported("format", ptr, f"format {fmt!r} is not supported")
    pats = schema.get("pattern")
    for pat in ([pats] if pats is not None else []) + list(schema.get("_patterns", [])):
        if not isinstance(pat, str):
            raise SchemaError("pattern must be a string", keyword="pattern", pointer=ptr)
        try:
            parts.append(resolve_anchors(parse_regex(pat), pat, search=True))
        except RegexError as e:
            if cv.opt.strict:
                raise UnsupportedSchemaError(
                    f"pattern: {e.reason} at position {e.position} of {pat!r}", keyword="pattern", pointer=ptr
                ) from e
            cv.report.dropped.append(("pattern", ptr))
    lo = schema.get("minLength", 0)
    hi = schema.get("maxLength")
    for kw, v in (("minLength", lo), ("maxLength", hi)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v)):
            raise SchemaError(f"{kw} must be a non-negative integer", keyword=kw, pointer=ptr)
    lo = int(lo)
    hi = None if hi is None else int(hi)
    if lo > 0 or hi is not None:
        implied = False
        if len(parts) == 1:
            plo, phi = char_length_bounds(parts[0])
            implied = plo >= lo and (hi is None or (phi is not None and phi <= hi))
        if not implied:
            parts.append(rep(Chars(ANY_CHAR), lo, hi))
    if not parts:
        return ANY_STRING_CONTENT
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def convert_string(cv: Converter, schema: dict[str, Any], ptr: str) -> Node:
    return json_string(string_content(cv, schema, ptr))
