"""JSON Schema (draft 4 – 2020-12) → regex IR over the JSON text.

Rule 1, soundness: every text the IR accepts parses to a JSON value that validates against
the schema (with ``jsonschema`` and its format checker).  Narrowings (documented, never
widenings):

- one layout: canonical ``{"a": 1, "b": [1, 2]}`` by default, ``compact``, or
  ``flexible`` with at most ``max_ws`` whitespace characters at each insignificant position;
- declared properties in schema order, then any additional properties;
- undeclared properties are generated only where the schema allows them explicitly
  (``additionalProperties`` true or a schema, ``patternProperties``), unless
  ``allow_undeclared_properties=True`` restores JSON Schema's default of allowing them;
- strings use raw UTF-8 and the short escapes (``json.dumps(ensure_ascii=False)``'s output);
- numbers with bounds or ``multipleOf`` have no exponent; integers never have a fraction;
- unconstrained values (``true``, ``{}``) nest at most ``any_value_depth`` levels;
- recursive ``$ref`` is unrolled ``max_recursion_depth`` times, then only its non-recursive
  alternatives remain;
- property names matching several ``patternProperties`` are not generated.

Rule 2: a constraint that cannot be enforced exactly raises :class:`UnsupportedSchemaError`
naming the keyword and its JSON pointer.  With ``strict=False`` the keyword is dropped from
generation instead and the caller must post-validate (``structgen`` does).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

from .charset import CharSet
from .errors import RegexError, SchemaError, UnsupportedSchemaError
from .formats import STANDARD_FORMATS, format_ir
from .numbers import (
    INTEGER,
    NUMBER,
    integer_bounds,
    integer_range,
    multiple_of_decimal,
    multiple_of_integer,
    number_range,
    to_decimal,
)
from .regex import (
    EPSILON,
    NOTHING,
    Alt,
    And,
    Chars,
    Join,
    Lit,
    Members,
    Minus,
    Node,
    Rep,
    Seq,
    alt,
    chars,
    lit,
    parse_regex,
    rep,
    resolve_anchors,
    seq,
)

ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$schema",
        "$id",
        "id",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$defs",
        "definitions",
        "$anchor",
        "$dynamicAnchor",
        "$vocabulary",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "discriminator",
        "nullable",
        "xml",
        "externalDocs",
        "example",
        "markdownDescription",
        "deprecationMessage",
        "errorMessage",
    }
)
CONSTRAINTS = frozenset(
    {
        "type",
        "enum",
        "const",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "format",
        "items",
        "prefixItems",
        "additionalItems",
        "contains",
        "minContains",
        "maxContains",
        "maxItems",
        "minItems",
        "uniqueItems",
        "properties",
        "patternProperties",
        "additionalProperties",
        "propertyNames",
        "required",
        "maxProperties",
        "minProperties",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "$ref",
        "$dynamicRef",
        "$recursiveRef",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
TYPES = ("null", "boolean", "object", "array", "string", "number", "integer")
_TYPE_KEYWORDS = {
    "string": {"minLength", "maxLength", "pattern", "format"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "array": {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains"},
    "object": {
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "dependentRequired",
        "dependencies",
    },
}
_ANY_CHAR = CharSet.any()
_JSON_SPECIAL = CharSet.of_ranges([(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)])
_SHORT_ESCAPES = {0x22: '\\"', 0x5C: "\\\\", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}


@dataclass(frozen=True)
class SchemaOptions:
    """How a schema is turned into a grammar.

    ``whitespace``: ``"canonical"`` | ``"compact"`` | ``"flexible"``; ``max_ws``: bound per
    position for flexible; ``strict``: raise on unenforceable keywords (else drop them and
    post-validate); ``max_recursion_depth``: unrolling of recursive ``$ref``;
    ``any_value_depth``: nesting bound for unconstrained values;
    ``allow_undeclared_properties``: JSON Schema's default ``additionalProperties: true``
    when the keyword is absent (off by default: a narrowing most users want).
    """

    whitespace: str = "canonical"
    max_ws: int = 2
    strict: bool = True
    max_recursion_depth: int = 3
    any_value_depth: int = 3
    allow_undeclared_properties: bool = False

    def __post_init__(self) -> None:
        if self.whitespace not in ("canonical", "compact", "flexible"):
            raise ValueError(f"whitespace must be 'canonical', 'compact' or 'flexible', not {self.whitespace!r}")
        if not 0 <= self.max_ws <= 64:
            raise ValueError(f"max_ws must be in [0, 64], got {self.max_ws}")
        if self.max_recursion_depth < 0 or self.any_value_depth < 0:
            raise ValueError("max_recursion_depth and any_value_depth must be >= 0")

    def dumps(self, value: Any) -> str:
        """``value`` serialized in this layout (what generation produces)."""
        seps = (", ", ": ") if self.whitespace == "canonical" else (",", ":")
        return json.dumps(value, ensure_ascii=False, separators=seps, allow_nan=False)


class _RecursionLimit(Exception):
    """A recursive ``$ref`` was unrolled ``max_recursion_depth`` times on this path."""

    def __init__(self, pointer: str) -> None:
        self.pointer = pointer


@dataclass
class ConversionReport:
    """What the conversion did not enforce: ``dropped`` (keyword, pointer) pairs (``strict=False``
    only) and ``ignored_formats`` (format, pointer): formats JSON Schema does not define, which
    are annotations that no validator checks (e.g. OpenAPI's ``int32``)."""

    dropped: list[tuple[str, str]] = field(default_factory=list)
    ignored_formats: list[tuple[str, str]] = field(default_factory=list)


def _escape_pointer(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def encode_json_string_content(node: Node) -> Node:
    """Map a code-point-level IR (string *contents*) to the IR of their JSON encoding.

    The encoding (raw UTF-8, short escapes, ``\\u00XX`` for other control characters) is
    injective and prefix-free, so it commutes with union, intersection and difference.
    """
    if node is ANY_STRING_CONTENT:
        return _ANY_STRING_ENCODED
    memo: dict[int, Node] = {}

    def enc(n: Node) -> Node:
        got = memo.get(id(n))
        if got is not None:
            return got
        out: Node
        if isinstance(n, Chars):
            out = _encode_charset(n.cs)
        elif isinstance(n, Lit):
            text = n.data.decode("utf-8")
            out = seq(*[_encode_charset(CharSet.of_chars(c)) for c in text]) if text else EPSILON
        elif isinstance(n, Seq):
            out = seq(*[enc(i) for i in n.items]) if n.items else EPSILON
        elif isinstance(n, Alt):
            out = Alt(tuple(enc(i) for i in n.items))
        elif isinstance(n, Rep):
            out = Rep(enc(n.item), n.lo, n.hi)
        elif isinstance(n, And):
            out = And(tuple(enc(i) for i in n.items))
        elif isinstance(n, Minus):
            out = Minus(enc(n.left), enc(n.right))
        elif isinstance(n, Join):
            out = Join(enc(n.item), enc(n.sep), n.lo, n.hi)
        else:
            raise TypeError(f"cannot JSON-encode {n!r}")
        memo[id(n)] = out
        return out

    return enc(node)


@functools.lru_cache(maxsize=4096)
def _encode_charset(cs: CharSet) -> Node:
    """One code point of ``cs`` as JSON string text: raw UTF-8, or ``\\`` + a short escape
    letter, or ``\\u00`` + two lowercase hex digits (the control characters without a short
    escape), exactly as ``json.dumps(ensure_ascii=False)`` writes them."""
    raw = cs.difference(_JSON_SPECIAL)
    parts: list[Node] = [Chars(raw)] if raw else []
    special = cs.intersect(_JSON_SPECIAL)
    letters: list[str] = []
    by_high: dict[int, list[str]] = {}
    for lo, hi in special.ranges:
        for cp in range(lo, hi + 1):
            esc = _SHORT_ESCAPES.get(cp)
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


ANY_STRING_CONTENT = Rep(Chars(_ANY_CHAR), 0, None)
_ANY_STRING_ENCODED = Rep(_encode_charset(_ANY_CHAR), 0, None)


class _Converter:
    def __init__(self, root: Any, options: SchemaOptions, report: ConversionReport) -> None:
        self.root = root
        self.opt = options
        self.report = report
        self.ref_depth: dict[str, int] = {}
        self.any_cache: dict[int, Node] = {}
        self.minus_cache: dict[tuple[object, ...], Node] = {}
        self.memo: dict[tuple[object, ...], Node] = {}
        self._keep: list[Any] = []  # schema objects whose ids key the memo
        self.check: Callable[[], None] | None = None
        self.calls = 0
        if options.whitespace == "flexible":
            ws = rep(chars(CharSet.of_chars(" \t\n\r")), 0, options.max_ws)
            self.item_sep = seq(ws, lit(","), ws)
            self.key_sep = seq(ws, lit(":"), ws)
            self.open_obj, self.close_obj = seq(lit("{"), ws), seq(ws, lit("}"))
            self.open_arr, self.close_arr = seq(lit("["), ws), seq(ws, lit("]"))
            self.empty_obj, self.empty_arr = seq(lit("{"), ws, lit("}")), seq(lit("["), ws, lit("]"))
        else:
            canonical = options.whitespace == "canonical"
            self.item_sep = lit(", " if canonical else ",")
            self.key_sep = lit(": " if canonical else ":")
            self.open_obj, self.close_obj, self.open_arr, self.close_arr = lit("{"), lit("}"), lit("["), lit("]")
            self.empty_obj, self.empty_arr = lit("{}"), lit("[]")
        self._validator_cls: Any = None

    # ------------------------------------------------------------------ helpers

    def unsupported(self, keyword: str, pointer: str, why: str) -> None:
        """Raise in strict mode; otherwise record that ``keyword`` is not enforced."""
        if self.opt.strict:
            raise UnsupportedSchemaError(why, keyword=keyword, pointer=pointer)
        self.report.dropped.append((keyword, pointer))

    def resolve_ref(self, ref: Any, pointer: str) -> tuple[Any, str]:
        if not isinstance(ref, str):
            raise SchemaError("$ref must be a string", keyword="$ref", pointer=pointer)
        if not ref.startswith("#"):
            raise UnsupportedSchemaError(
                f"remote reference {ref!r} is never fetched; only local '#/...' references are supported",
                keyword="$ref",
                pointer=pointer,
            )
        frag = unquote(ref[1:])
        if frag and not frag.startswith("/"):
            target = self._find_anchor(self.root, frag)
            if target is None:
                raise SchemaError(f"$ref {ref!r}: no $anchor named {frag!r}", keyword="$ref", pointer=pointer)
            return target, "#"
        node = self.root
        for raw in frag.split("/")[1:] if frag else []:
            token = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise SchemaError(f"$ref {ref!r} does not resolve (no {token!r})", keyword="$ref", pointer=pointer)
        return node, "#" + frag

    def _find_anchor(self, node: Any, name: str) -> Any:
        if isinstance(node, dict):
            if node.get("$anchor") == name:
                return node
            for v in node.values():
                got = self._find_anchor(v, name)
                if got is not None:
                    return got
        elif isinstance(node, list):
            for v in node:
                got = self._find_anchor(v, name)
                if got is not None:
                    return got
        return None

    def validator(self, schema: Any) -> Any:
        import jsonschema

        if self._validator_cls is None:
            cls = jsonschema.validators.validator_for(self.root, default=jsonschema.Draft202012Validator)
            self._root_validator = cls(self.root, format_checker=cls.FORMAT_CHECKER)
            self._validator_cls = cls
        return self._root_validator.evolve(schema=schema)

    # ------------------------------------------------------------------ dispatch

    def convert(self, schema: Any, ptr: str) -> Node:
        """IR of ``schema`` (memoized: the result depends only on the schema object, the
        recursion depths of the ``$ref``s being unrolled, and the options)."""
        self.calls += 1
        if self.check is not None and not self.calls & 255:
            self.check()
        if not isinstance(schema, dict):
            return self._convert(schema, ptr)
        key = (id(schema), frozenset(kv for kv in self.ref_depth.items() if kv[1]), self.opt)
        got = self.memo.get(key)
        if got is None:
            got = self._convert(schema, ptr)
            self.memo[key] = got
            self._keep.append(schema)
        return got

    def _convert(self, schema: Any, ptr: str) -> Node:
        if schema is True:
            return self.any_value(self.opt.any_value_depth)
        if schema is False:
            return NOTHING
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(schema).__name__}", keyword="(schema)", pointer=ptr)
        for key in (
            "$dynamicRef",
            "$recursiveRef",
            "unevaluatedItems",
            "unevaluatedProperties",
            "if",
            "contains",
            "dependentSchemas",
            "dependentRequired",
            "dependencies",
        ):
            if key in schema:
                if key == "if" and "then" not in schema and "else" not in schema:
                    continue
                if key == "unevaluatedProperties" and schema[key] is True:
                    continue
                if key == "dependencies" and not schema[key]:
                    continue
                self.unsupported(key, ptr, f"'{key}' cannot be enforced by a regular grammar")
        if not any(k in CONSTRAINTS for k in schema):
            return self.any_value(self.opt.any_value_depth)  # {} (annotations only) is `true`
        if "$ref" in schema:
            return self.convert_ref(schema, ptr)
        if "allOf" in schema:
            return self.convert_all_of(schema, ptr)
        if "anyOf" in schema or "oneOf" in schema:
            return self.convert_union(schema, ptr)
        if "not" in schema:
            return self.convert_not(schema, ptr)
        if "enum" in schema or "const" in schema:
            return self.convert_enum(schema, ptr)
        return self.convert_types(schema, ptr)

    def convert_ref(self, schema: dict[str, Any], ptr: str) -> Node:
        target, target_ptr = self.resolve_ref(schema["$ref"], ptr + "/$ref")
        rest = {k: v for k, v in schema.items() if k != "$ref" and k not in ANNOTATIONS}
        depth = self.ref_depth.get(target_ptr, 0)
        if depth > self.opt.max_recursion_depth:
            raise _RecursionLimit(ptr)
        self.ref_depth[target_ptr] = depth + 1
        try:
            if rest:
                return self.convert({"allOf": [target, rest]}, ptr)
            return self.convert(target, target_ptr)
        finally:
            self.ref_depth[target_ptr] = depth

    def convert_all_of(self, schema: dict[str, Any], ptr: str) -> Node:
        items = schema["allOf"]
        if not isinstance(items, list) or not items:
            raise SchemaError("allOf must be a non-empty array", keyword="allOf", pointer=ptr)
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        parts: list[Any] = [rest] if any(k in CONSTRAINTS for k in rest) else []
        parts.extend(items)
        merged, residue = self.merge_all(parts, ptr + "/allOf")
        if not residue:
            return self.convert(merged, ptr)
        # intersected branches each constrain only what they declare: inside them undeclared
        # properties must be allowed, or a property declared by one branch would be rejected
        # by the others (the intersection itself still honours additionalProperties: false)
        saved = self.opt
        self.opt = dataclasses.replace(saved, allow_undeclared_properties=True)
        try:
            nodes = [self.convert(merged, ptr)] + [self.convert(r, ptr + "/allOf") for r in residue]
        finally:
            self.opt = saved
        return And(tuple(nodes))

    def merge_all(self, parts: list[Any], ptr: str) -> tuple[Any, list[Any]]:
        """Merge schemas keyword by keyword; what cannot be merged is returned as residue
        (converted separately and intersected, which is always sound)."""
        merged: dict[str, Any] = {}
        residue: list[Any] = []
        for part in parts:
            seen: set[str] = set()
            while isinstance(part, dict) and "$ref" in part and part["$ref"] not in seen:
                seen.add(part["$ref"])
                target, _ = self.resolve_ref(part["$ref"], ptr)
                extra = {k: v for k, v in part.items() if k != "$ref"}
                if isinstance(target, dict) and "$ref" in target and extra:
                    residue.append(extra)
                    part = target
                    continue
                if isinstance(target, dict):
                    dup = set(target) & set(extra) - ANNOTATIONS
                    if dup:
                        residue.append(extra)
                        part = target
                    else:
                        part = {**target, **extra}
                else:
                    part = target
            if part is True:
                continue
            if part is False:
                return False, []
            if not isinstance(part, dict):
                raise SchemaError("allOf items must be schemas", keyword="allOf", pointer=ptr)
            if "$ref" in part:
                residue.append(part)
                continue
            if "allOf" in part:
                inner_rest = {k: v for k, v in part.items() if k != "allOf"}
                sub, sub_res = self.merge_all([inner_rest, *part["allOf"]], ptr)
                residue.extend(sub_res)
                if sub is False:
                    return False, []
                part = sub
            ok = _merge_into(merged, part)
            if not ok:
                residue.append(part)
        return merged, residue

    def convert_union(self, schema: dict[str, Any], ptr: str) -> Node:
        key = "anyOf" if "anyOf" in schema else "oneOf"
        branches = schema[key]
        if not isinstance(branches, list) or not branches:
            raise SchemaError(f"{key} must be a non-empty array", keyword=key, pointer=ptr)
        rest = {k: v for k, v in schema.items() if k != key}
        if key == "oneOf" and len(branches) > 1:
            plan = self.disjoint_plan(branches, ptr)
            if plan is None:
                self.unsupported("oneOf", ptr, "oneOf branches are not provably disjoint (use anyOf if overlap is fine)")
            else:
                branches = plan
        has_rest = any(k in CONSTRAINTS for k in rest)
        nodes: list[Node] = []
        last_limit: _RecursionLimit | None = None
        for i, b in enumerate(branches):
            bptr = f"{ptr}/{key}/{i}"
            try:
                if has_rest:
                    nodes.append(self.convert({"allOf": [rest, b]}, bptr))
                else:
                    nodes.append(self.convert(b, bptr))
            except _RecursionLimit as e:
                last_limit = e
        if not nodes and last_limit is not None:
            raise last_limit
        return alt(*nodes) if nodes else NOTHING

    def disjoint_plan(self, branches: list[Any], ptr: str) -> list[Any] | None:
        """Branches of a ``oneOf`` rewritten so that no value generated from one validates
        another, or None when that cannot be shown.

        Sound sufficient tests, checked in both directions (what A generates vs what B accepts):
        disjoint JSON types, disjoint const/enum values, a property A requires that B forbids,
        or a shared property whose const/enum values differ (a discriminator); a discriminator
        A does not require is made required in A's generation (a narrowing).
        """
        infos: list[Any] = []
        for b in branches:
            seen: set[str] = set()
            while isinstance(b, dict) and "$ref" in b and not (set(b) - ANNOTATIONS - {"$ref"}) and b["$ref"] not in seen:
                seen.add(b["$ref"])
                b, _ = self.resolve_ref(b["$ref"], ptr)
            infos.append(b)
        forced: list[set[str]] = [set() for _ in infos]
        for i in range(len(infos)):
            for j in range(len(infos)):
                if i != j and not self._excludes(infos[i], infos[j], forced[i]):
                    return None
        out = []
        for b, f in zip(branches, forced):
            out.append({"allOf": [b, {"required": sorted(f)}]} if f else b)
        return out

    def _excludes(self, a: Any, b: Any, force: set[str]) -> bool:
        """True if no value generated from ``a`` (with ``force`` made required) validates ``b``."""
        if b is False or a is False:
            return True
        if not isinstance(a, dict) or not isinstance(b, dict):
            return False
        gen_types = self._generated_types(a)
        sem_types = _declared_types(b)
        if gen_types is not None and not (gen_types & sem_types):
            return True
        va, vb = _values_of(a), _values_of(b)
        if va is not None and vb is not None and not any(_json_equal(x, y) for x in va for y in vb):
            return True
        if gen_types is None or gen_types - {"object"}:
            return False
        req_a = set(a.get("required") or []) | force
        props_a = a.get("properties") or {}
        props_b = b.get("properties") or {}
        closed_b = b.get("additionalProperties") is False and not b.get("patternProperties")
        for k in req_a:
            if (closed_b and k not in props_b) or props_b.get(k) is False:
                return True
        for name in sorted(set(props_a) & set(props_b)):
            xa, xb = _values_of(props_a[name]), _values_of(props_b[name])
            if xa is not None and xb is not None and not any(_json_equal(x, y) for x in xa for y in xb):
                force.add(name)  # generate the discriminator even where a does not require it
                return True
        return False

    def _generated_types(self, s: dict[str, Any]) -> set[str] | None:
        """JSON types our grammar generates for ``s`` (None: unknown, e.g. nested applicators)."""
        if "const" in s or "enum" in s:
            vals = _values_of(s)
            return (
                None
                if vals is None
                else {_json_type(v) for v in vals} | ({"number"} if any(_json_type(v) == "integer" for v in vals) else set())
            )
        if any(k in s for k in ("anyOf", "oneOf", "allOf", "$ref", "not")):
            return None
        types = self.types_of(s)
        if "integer" in types or "number" in types:
            types = types | {"integer", "number"}
        return types

    def convert_not(self, schema: dict[str, Any], ptr: str) -> Node:
        neg = schema["not"]
        rest = {k: v for k, v in schema.items() if k != "not"}
        if neg is True or (isinstance(neg, dict) and not any(k in CONSTRAINTS for k in neg)):
            return NOTHING  # `not` of "anything" allows nothing
        if neg is False:
            return self.convert(rest, ptr) if rest else self.any_value(self.opt.any_value_depth)
        if isinstance(neg, dict) and set(neg) - ANNOTATIONS <= {"type"}:
            excluded = neg.get("type")
            excluded_set = set(excluded) if isinstance(excluded, list) else {excluded}
            allowed = self.types_of(rest) - excluded_set
            if "number" in excluded_set:
                allowed.discard("integer")
            if "integer" in excluded_set and "number" in allowed:
                self.unsupported("not", ptr + "/not", "'not: integer' next to 'number' needs fractional-only numbers")
            return self.convert_types({**rest, "type": sorted(allowed)}, ptr) if allowed else NOTHING
        values = None
        if isinstance(neg, dict) and set(neg) - ANNOTATIONS <= {"enum", "const", "type"}:
            values = [neg["const"]] if "const" in neg else neg.get("enum")
        if isinstance(values, list) and all(isinstance(v, (str, bool)) or v is None for v in values):
            base = self.convert(rest, ptr) if rest else self.any_value(self.opt.any_value_depth)
            return Minus(base, alt(*[lit(self.opt.dumps(v)) for v in values]))
        self.unsupported("not", ptr + "/not", "'not' is supported only for types and string/boolean/null values")
        return self.convert(rest, ptr) if rest else self.any_value(self.opt.any_value_depth)

    def convert_enum(self, schema: dict[str, Any], ptr: str) -> Node:
        if "const" in schema:
            values = [schema["const"]]
        else:
            values = schema["enum"]
            if not isinstance(values, list):
                raise SchemaError("enum must be an array", keyword="enum", pointer=ptr)
        rest = {k: v for k, v in schema.items() if k not in ("enum", "const")}
        keep = []
        constraining = {k for k in rest if k in CONSTRAINTS}
        for v in values:
            if constraining == {"type"} and isinstance(rest["type"], (str, list)):
                types = set(rest["type"]) if isinstance(rest["type"], list) else {rest["type"]}
                vt = _json_type(v)
                ok = vt in types or (vt == "integer" and "number" in types)
            elif constraining:
                try:
                    ok = self.validator(rest).is_valid(v)
                except Exception as e:  # a malformed sibling keyword
                    raise SchemaError(f"cannot check enum values against sibling keywords: {e}", keyword="enum", pointer=ptr) from e
            else:
                ok = True
            if ok:
                keep.append(v)
        out: list[Node] = []
        for v in keep:
            try:
                text = self.opt.dumps(v)
            except ValueError as e:
                raise SchemaError(f"enum/const value is not JSON: {e}", keyword="enum", pointer=ptr) from e
            out.append(self.value_literal(v, text))
        return alt(*out) if out else NOTHING

    def value_literal(self, value: Any, text: str) -> Node:
        """A JSON value as its text; in flexible mode containers get flexible whitespace."""
        if self.opt.whitespace != "flexible" or not isinstance(value, (dict, list)):
            return lit(text)
        if isinstance(value, list):
            if not value:
                return self.empty_arr
            items = [self.value_literal(v, self.opt.dumps(v)) for v in value]
            body: list[Node] = [self.open_arr]
            for i, it in enumerate(items):
                if i:
                    body.append(self.item_sep)
                body.append(it)
            body.append(self.close_arr)
            return seq(*body)
        if not value:
            return self.empty_obj
        body = [self.open_obj]
        for i, (k, v) in enumerate(value.items()):
            if i:
                body.append(self.item_sep)
            body.extend([lit(self.opt.dumps(k)), self.key_sep, self.value_literal(v, self.opt.dumps(v))])
        body.append(self.close_obj)
        return seq(*body)

    def types_of(self, schema: dict[str, Any]) -> set[str]:
        t = schema.get("type")
        if t is None:
            present = {ty for ty, kws in _TYPE_KEYWORDS.items() if kws & set(schema)}
            if "number" in present:
                present.add("integer")
            return present or set(TYPES)
        ts = t if isinstance(t, list) else [t]
        for x in ts:
            if x not in TYPES:
                raise SchemaError(f"unknown type {x!r}", keyword="type", pointer="")
        return set(ts)

    def convert_types(self, schema: dict[str, Any], ptr: str) -> Node:
        t = schema.get("type")
        if t is not None:
            ts = t if isinstance(t, list) else [t]
            for x in ts:
                if x not in TYPES:
                    raise SchemaError(f"unknown type {x!r}", keyword="type", pointer=ptr)
        types = self.types_of(schema)
        parts: list[Node] = []
        for ty in TYPES:
            if ty not in types:
                continue
            if ty == "integer" and "number" in types:
                continue
            if ty == "null":
                parts.append(lit("null"))
            elif ty == "boolean":
                parts.append(alt(lit("true"), lit("false")))
            elif ty == "string":
                parts.append(self.convert_string(schema, ptr))
            elif ty in ("number", "integer"):
                parts.append(self.convert_number(schema, ptr, integer=(ty == "integer")))
            elif ty == "array":
                parts.append(self.convert_array(schema, ptr))
            elif ty == "object":
                parts.append(self.convert_object(schema, ptr))
        return alt(*parts) if parts else NOTHING

    # ------------------------------------------------------------------ scalars

    def string_content(self, schema: dict[str, Any], ptr: str) -> Node:
        """Code-point IR of the decoded strings allowed by the string keywords of ``schema``."""
        parts: list[Node] = []
        fmt = schema.get("format")
        if fmt is not None:
            f_ir = format_ir(fmt) if isinstance(fmt, str) else None
            if f_ir is not None:
                parts.append(f_ir)
            elif isinstance(fmt, str) and fmt not in STANDARD_FORMATS:
                self.report.ignored_formats.append((fmt, ptr))  # not defined by JSON Schema: an annotation
            else:
                self.unsupported("format", ptr, f"format {fmt!r} is not supported")
        pats = schema.get("pattern")
        for pat in ([pats] if pats is not None else []) + list(schema.get("_patterns", [])):
            if not isinstance(pat, str):
                raise SchemaError("pattern must be a string", keyword="pattern", pointer=ptr)
            try:
                parts.append(resolve_anchors(parse_regex(pat), pat, search=True))
            except RegexError as e:
                if self.opt.strict:
                    raise UnsupportedSchemaError(
                        f"pattern: {e.reason} at position {e.position} of {pat!r}", keyword="pattern", pointer=ptr
                    ) from e
                self.report.dropped.append(("pattern", ptr))
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
                parts.append(rep(Chars(_ANY_CHAR), lo, hi))
        if not parts:
            return ANY_STRING_CONTENT
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def key_language(self, names: Any, ptr: str) -> Node | None:
        """Code-point IR of the property names ``propertyNames`` allows (None: any name)."""
        if names is None or names is True:
            return None
        if names is False:
            return NOTHING
        if not isinstance(names, dict):
            raise SchemaError("propertyNames must be a schema", keyword="propertyNames", pointer=ptr)
        allowed = {"type", "enum", "const", "minLength", "maxLength", "pattern", "format"}
        extra = [k for k in names if k in CONSTRAINTS and k not in allowed]
        if extra:
            self.unsupported("propertyNames", ptr, f"propertyNames with {extra[0]!r} is not supported")
        t = names.get("type")
        if t is not None and "string" not in (t if isinstance(t, list) else [t]):
            return NOTHING
        content = self.string_content(names, ptr)
        if "enum" in names or "const" in names:
            values = [names["const"]] if "const" in names else names["enum"]
            if not isinstance(values, list):
                raise SchemaError("enum must be an array", keyword="enum", pointer=ptr)
            lits = alt(*[lit(v) for v in values if isinstance(v, str)])
            content = And((content, lits)) if content is not ANY_STRING_CONTENT else lits
        return content

    def convert_string(self, schema: dict[str, Any], ptr: str) -> Node:
        return json_string(self.string_content(schema, ptr))

    def convert_number(self, schema: dict[str, Any], ptr: str, *, integer: bool) -> Node:
        def bound(kw: str) -> Decimal | None:
            v = schema.get(kw)
            if v is None or isinstance(v, bool):
                return None
            try:
                return to_decimal(v)
            except ValueError as e:
                raise SchemaError(str(e), keyword=kw, pointer=ptr) from e

        lo, hi = bound("minimum"), bound("maximum")
        lo_strict = hi_strict = False
        ex_lo, ex_hi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        if ex_lo is True:
            lo_strict = True
        elif ex_lo is not None and ex_lo is not False:
            e = bound("exclusiveMinimum")
            if e is not None and (lo is None or e >= lo):
                lo, lo_strict = e, True
        if ex_hi is True:
            hi_strict = True
        elif ex_hi is not None and ex_hi is not False:
            e = bound("exclusiveMaximum")
            if e is not None and (hi is None or e <= hi):
                hi, hi_strict = e, True
        mult = schema.get("multipleOf")
        if integer:
            ilo, ihi = integer_bounds(lo, lo_strict, hi, hi_strict)
            node = INTEGER if ilo is None and ihi is None else integer_range(ilo, ihi)
            if mult is not None:
                node = self.multiple_of(node, mult, ptr, integer=True)
            return node
        if lo is None and hi is None and mult is None:
            return NUMBER
        node = number_range(lo, lo_strict, hi, hi_strict)
        if mult is not None:
            node = self.multiple_of(node, mult, ptr, integer=False)
        return node

    def multiple_of(self, node: Node, mult: Any, ptr: str, *, integer: bool) -> Node:
        try:
            m = to_decimal(mult)
        except ValueError as e:
            raise SchemaError(str(e), keyword="multipleOf", pointer=ptr) from e
        if m <= 0:
            raise SchemaError("multipleOf must be > 0", keyword="multipleOf", pointer=ptr)
        if m == m.to_integral_value():
            mo = multiple_of_integer(int(m))
            if mo is None:
                self.unsupported("multipleOf", ptr, f"multipleOf {mult} (only divisors of a power of ten are supported)")
                return node
            return And((node, mo))
        if integer:
            # an integer is a multiple of p/10^q iff it is a multiple of p / gcd(p, 10^q)
            q = -int(m.normalize().as_tuple().exponent)  # type: ignore[arg-type]
            p = int(m.scaleb(q))
            k = p // math.gcd(p, 10**q)
            mo = multiple_of_integer(k)
            return And((node, mo)) if mo is not None else self._unsup_mult(node, mult, ptr)
        shape = multiple_of_decimal(m)
        return And((node, shape)) if shape is not None else self._unsup_mult(node, mult, ptr)

    def _unsup_mult(self, node: Node, mult: Any, ptr: str) -> Node:
        self.unsupported("multipleOf", ptr, f"multipleOf {mult} (supported: integer divisors of a power of ten, and 10^-k)")
        return node

    # ------------------------------------------------------------------ arrays

    def convert_array(self, schema: dict[str, Any], ptr: str) -> Node:
        if schema.get("uniqueItems") is True and schema.get("maxItems", 2) > 1:
            self.unsupported("uniqueItems", ptr, "uniqueItems cannot be enforced by a regular grammar")
        prefix: list[Any] = []
        rest: Any = True
        prefix_key = "prefixItems"
        if isinstance(schema.get("prefixItems"), list):
            prefix = schema["prefixItems"]
            rest = schema.get("items", True)
        elif isinstance(schema.get("items"), list):
            prefix = schema["items"]
            prefix_key = "items"
            rest = schema.get("additionalItems", True)
        elif "items" in schema:
            rest = schema["items"]
        lo = schema.get("minItems", 0)
        hi = schema.get("maxItems")
        for kw, v in (("minItems", lo), ("maxItems", hi)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v)):
                raise SchemaError(f"{kw} must be a non-negative integer", keyword=kw, pointer=ptr)
        lo = int(lo)
        hi = None if hi is None else int(hi)
        prefix_nodes: list[Node] = []
        limit: _RecursionLimit | None = None
        for i, s in enumerate(prefix):
            try:
                prefix_nodes.append(self.convert(s, f"{ptr}/{prefix_key}/{i}"))
            except _RecursionLimit as e:
                limit = e
                break
        k = len(prefix_nodes)
        try:
            rest_node = self.convert(rest, f"{ptr}/items") if rest is not False and limit is None else NOTHING
        except _RecursionLimit as e:
            rest_node, limit = NOTHING, e
        alts: list[Node] = []
        if lo == 0:
            alts.append(self.empty_arr)
        sep = self.item_sep
        for c in range(max(lo, 1), (k if hi is None else min(hi, k)) + 1):
            body: list[Node] = []
            for i in range(c):
                if i:
                    body.append(sep)
                body.append(prefix_nodes[i])
            alts.append(seq(self.open_arr, *body, self.close_arr))
        if rest_node is not NOTHING and (hi is None or hi > k):
            more_lo = max(lo - k, 1)
            more_hi = None if hi is None else hi - k
            head: list[Node] = []
            for i in range(k):
                if i:
                    head.append(sep)
                head.append(prefix_nodes[i])
            if k:
                tail = rep(seq(sep, rest_node), more_lo, more_hi)
                alts.append(seq(self.open_arr, *head, tail, self.close_arr))
            else:
                alts.append(seq(self.open_arr, Join(rest_node, sep, more_lo, more_hi), self.close_arr))
        if not alts:
            if limit is not None:
                raise limit
            return NOTHING
        return alt(*alts)

    # ------------------------------------------------------------------ objects

    def convert_object(self, schema: dict[str, Any], ptr: str) -> Node:
        props = schema.get("properties", {})
        if not isinstance(props, dict):
            raise SchemaError("properties must be an object", keyword="properties", pointer=ptr)
        required = schema.get("required", [])
        if required is None or isinstance(required, bool):
            required = []  # draft-3 style booleans carry no constraint at the object level
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise SchemaError("required must be an array of strings", keyword="required", pointer=ptr)
        pattern_props = schema.get("patternProperties", {})
        if not isinstance(pattern_props, dict):
            raise SchemaError("patternProperties must be an object", keyword="patternProperties", pointer=ptr)
        additional = schema.get("additionalProperties")
        if additional is None:
            additional = True if self.opt.allow_undeclared_properties else False
        names_schema = schema.get("propertyNames")
        compiled_patterns: list[tuple[str, Any, Node]] = []
        wide_patterns: list[Node] = []  # supersets of what each pattern matches, for exclusions
        for pat, sub in pattern_props.items():
            try:
                re.compile(pat)
                ir = resolve_anchors(parse_regex(pat), pat, search=True)
                wide_ir = resolve_anchors(parse_regex(pat, wide=True), pat, search=True, wide=True)
            except (re.error, RegexError) as e:
                self.unsupported("patternProperties", f"{ptr}/patternProperties/{_escape_pointer(pat)}", f"pattern {pat!r}: {e}")
                continue
            compiled_patterns.append((pat, sub, ir))
            wide_patterns.append(wide_ir)
        # declared properties (schema order), then required names that are not declared
        order = list(props)
        for r in required:
            if r not in props:
                order.append(r)
        req = set(required)
        items: list[tuple[Node, bool]] = []
        for name in order:
            pptr = f"{ptr}/properties/{_escape_pointer(name)}"
            subs: list[Any] = []
            if name in props:
                subs.append(props[name])
            for pat, sub, _ir in compiled_patterns:
                if re.search(pat, name):
                    subs.append(sub)
            if name not in props and not any(re.search(p, name) for p, _, _ in compiled_patterns):
                subs.append(additional)
            if names_schema is not None and not self.validator(names_schema).is_valid(name):
                subs = [False]
            sub_schema: Any = subs[0] if len(subs) == 1 else {"allOf": subs}
            is_req = name in req
            try:
                value = self.convert(sub_schema, pptr)
            except _RecursionLimit:
                if is_req:
                    raise
                continue
            if value is NOTHING:
                if is_req:
                    return NOTHING
                continue
            key = lit(self.opt.dumps(name))
            items.append((seq(key, self.key_sep, value), is_req))
        # additional properties
        extras: list[Node] = []
        names_content = self.key_language(names_schema, f"{ptr}/propertyNames")
        if names_schema is False:
            return self.empty_obj if not any(r for _, r in items) else NOTHING
        for i, (pat, sub, ir) in enumerate(compiled_patterns):
            others = [o for j, o in enumerate(wide_patterns) if j != i]
            key_lang = self.key_exclusion(ir, declared_names_raw(order) + others)
            if names_content is not None:
                key_lang = And((key_lang, names_content))
            try:
                val = self.convert(sub, f"{ptr}/patternProperties/{_escape_pointer(pat)}")
            except _RecursionLimit:
                continue
            if val is not NOTHING:
                extras.append(seq(json_string(key_lang), self.key_sep, val))
        if additional is not False:
            key_lang = self.key_exclusion(ANY_STRING_CONTENT, declared_names_raw(order) + wide_patterns)
            if names_content is not None:
                key_lang = And((key_lang, names_content))
            try:
                val = self.convert(additional, f"{ptr}/additionalProperties")
            except _RecursionLimit:
                val = NOTHING
            if val is not NOTHING:
                extras.append(seq(json_string(key_lang), self.key_sep, val))
        min_p, max_p = schema.get("minProperties"), schema.get("maxProperties")
        for kw, v in (("minProperties", min_p), ("maxProperties", max_p)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v)):
                raise SchemaError(f"{kw} must be a non-negative integer", keyword=kw, pointer=ptr)
        n_required = sum(1 for _, r in items if r)
        if min_p is not None and min_p > n_required:
            self.unsupported("minProperties", ptr, "minProperties above the number of required properties")
        if max_p is not None and (max_p < len(items) or extras):
            self.unsupported("maxProperties", ptr, "maxProperties below the number of possible properties")
        extra = alt(*extras) if extras else None
        if not items and extra is None:
            return self.empty_obj
        return seq(self.open_obj, Members(tuple(items), self.item_sep, extra), self.close_obj)

    def key_exclusion(self, lang: Node, excluded: list[Node]) -> Node:
        """``lang`` minus ``excluded`` (property names), one shared node per distinct key so
        that objects converted repeatedly (``$ref``) share one automaton."""
        key = (id(lang), _literal_key(excluded))
        got = self.minus_cache.get(key)
        if got is None:
            got = _minus_strings(lang, excluded)
            self.minus_cache[key] = got
        return got

    # ------------------------------------------------------------------ any value

    def any_value(self, depth: int) -> Node:
        got = self.any_cache.get(depth)
        if got is not None:
            return got
        scalars = [lit("null"), lit("true"), lit("false"), NUMBER, json_string(ANY_STRING_CONTENT)]
        if depth > 0:
            inner = self.any_value(depth - 1)
            sep = self.item_sep
            arr = alt(self.empty_arr, seq(self.open_arr, Join(inner, sep, 1, None), self.close_arr))
            member = seq(json_string(ANY_STRING_CONTENT), self.key_sep, inner)
            obj = alt(self.empty_obj, seq(self.open_obj, Join(member, sep, 1, None), self.close_obj))
            scalars += [arr, obj]
        node = alt(*scalars)
        self.any_cache[depth] = node
        return node


def char_length_bounds(node: Node) -> tuple[int, int | None]:
    """(min, max) length in code points of the strings of a code-point IR node (max None:
    unbounded or unknown).  Conservative for ``And`` / ``Minus`` (0, None)."""
    if isinstance(node, Lit):
        n = len(node.data.decode("utf-8"))
        return n, n
    if isinstance(node, Chars):
        return 1, 1
    if isinstance(node, Seq):
        lo = 0
        hi: int | None = 0
        for it in node.items:
            a, b = char_length_bounds(it)
            lo += a
            hi = None if hi is None or b is None else hi + b
        return lo, hi
    if isinstance(node, Alt):
        if not node.items:
            return 0, 0
        bounds = [char_length_bounds(i) for i in node.items]
        his = [b for _, b in bounds]
        return min(a for a, _ in bounds), None if any(h is None for h in his) else max(h for h in his if h is not None)
    if isinstance(node, Rep):
        a, b = char_length_bounds(node.item)
        return a * node.lo, None if node.hi is None or b is None else b * node.hi
    return 0, None


def declared_names_raw(names: list[str]) -> list[Node]:
    """Code-point IR literals of property names (decoded form)."""
    return [lit(n) for n in names]


def _minus_strings(lang: Node, excluded: list[Node]) -> Node:
    return Minus(lang, alt(*excluded)) if excluded else lang


def _literal_key(nodes: list[Node]) -> tuple[object, ...]:
    """A structural key for a list of IR nodes: literals by value, others by identity."""
    return tuple(n.data if isinstance(n, Lit) else id(n) for n in nodes)


def _declared_types(s: dict[str, Any]) -> set[str]:
    """JSON types a schema accepts by its ``type`` keyword alone (all when absent)."""
    t = s.get("type")
    if t is None:
        return set(TYPES)
    ts = set(t) if isinstance(t, list) else {t}
    if "number" in ts or "integer" in ts:
        ts |= {"number", "integer"}
    return ts


def _values_of(s: Any) -> list[Any] | None:
    if isinstance(s, dict) and "const" in s:
        return [s["const"]]
    if isinstance(s, dict) and isinstance(s.get("enum"), list):
        return s["enum"]
    return None


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "integer" if v == int(v) and math.isfinite(v) else "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


_MERGE_MIN = {"minimum", "minLength", "minItems", "minProperties"}
_MERGE_MAX = {"maximum", "maxLength", "maxItems", "maxProperties"}


def _merge_into(dst: dict[str, Any], src: dict[str, Any]) -> bool:
    """Merge schema ``src`` into ``dst`` in place; False if some keyword cannot be merged
    (``dst`` is then unchanged)."""
    # additionalProperties / items only see the properties / prefixItems of their own schema
    # object: merging those across schema objects would change what they apply to
    obj_keys, arr_keys = {"properties", "patternProperties", "additionalProperties"}, {"prefixItems", "items", "additionalItems"}
    for keys, only in ((obj_keys, "additionalProperties"), (arr_keys, "items")):
        if keys & dst.keys() and keys & src.keys() and (only in dst or only in src):
            if not (only in dst and only in src and _json_equal(dst, src)):
                return False
    if ("additionalItems" in dst or "additionalItems" in src) and arr_keys & dst.keys() and arr_keys & src.keys():
        return False
    out = dict(dst)
    for k, v in src.items():
        if k not in CONSTRAINTS and k != "_patterns":
            continue  # annotations and unknown keywords constrain nothing
        if k not in out:
            out[k] = v
            continue
        cur = out[k]
        if _json_equal(cur, v):
            continue
        if k in _MERGE_MIN:
            out[k] = max(cur, v)
        elif k in _MERGE_MAX:
            out[k] = min(cur, v)
        elif k == "type":
            a = set(cur) if isinstance(cur, list) else {cur}
            b = set(v) if isinstance(v, list) else {v}
            if "number" in a and "integer" in b:
                a.add("integer")
            if "number" in b and "integer" in a:
                b.add("integer")
            both = sorted(a & b)
            out[k] = both if len(both) != 1 else both[0]  # [] when disjoint: nothing validates
        elif k == "required":
            out[k] = list(dict.fromkeys(list(cur) + list(v)))
        elif k == "properties":
            merged = dict(cur)
            for name, sub in v.items():
                merged[name] = {"allOf": [merged[name], sub]} if name in merged else sub
            out[k] = merged
        elif k == "enum":
            out[k] = [x for x in cur if any(_json_equal(x, y) for y in v)]
        elif k == "pattern":
            out.setdefault("_patterns", [])
            out["_patterns"] = [*out["_patterns"], v]
        elif k in ("items", "additionalProperties") and isinstance(cur, dict) and isinstance(v, dict):
            out[k] = {"allOf": [cur, v]}
        elif k in ("additionalProperties",) and (cur is False or v is False):
            out[k] = False
        else:
            return False
    dst.clear()
    dst.update(out)
    return True


def load_schema(schema: Any) -> Any:
    """A schema given as JSON text (str/bytes) parsed; anything else returned as is.

    Raises :class:`SchemaError` (keyword ``(json)``) with the line and column of a JSON error.
    """
    if not isinstance(schema, (str, bytes)):
        return schema
    try:
        return json.loads(schema)
    except json.JSONDecodeError as e:
        raise SchemaError(f"schema is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}", keyword="(json)", pointer="#") from e


def schema_to_ir(
    schema: Any, options: SchemaOptions | None = None, *, check: Callable[[], None] | None = None
) -> tuple[Node, ConversionReport]:
    """Convert a JSON Schema (dict, bool, or JSON text) into regex IR over the JSON text.

    Returns ``(node, report)``; ``report.dropped`` lists keywords not enforced (only with
    ``strict=False``).  ``check`` is called periodically (a deadline hook: it raises to abort).
    Raises :class:`SchemaError` for malformed schemas and
    :class:`UnsupportedSchemaError` for unenforceable keywords (strict), both naming the keyword
    and its JSON pointer.
    """
    options = options or SchemaOptions()
    schema = load_schema(schema)
    report = ConversionReport()
    conv = _Converter(schema, options, report)
    conv.check = check
    try:
        node = conv.convert(schema, "#")
    except _RecursionLimit as e:
        raise UnsupportedSchemaError(
            f"recursive $ref has no non-recursive alternative within max_recursion_depth={options.max_recursion_depth}",
            keyword="$ref",
            pointer=e.pointer,
        ) from None
    except RecursionError:
        raise UnsupportedSchemaError("schema nesting is too deep", keyword="$ref", pointer="#") from None
    return node, report


def pydantic_schema(model: Any) -> dict[str, Any]:
    """The JSON Schema of a Pydantic v2 ``BaseModel`` subclass (``model_json_schema``).

    Raises ``TypeError`` for anything else.
    """
    try:
        from pydantic import BaseModel
    except ImportError as e:  # pragma: no cover - pydantic is a hard dependency
        raise TypeError("pydantic is not installed") from e
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"expected a pydantic BaseModel subclass, got {model!r}")
    return model.model_json_schema()
