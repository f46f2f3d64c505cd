"""The JSON Schema vocabulary the converter reads (annotation vs constraint keywords, the keywords
of each type) and helpers on JSON values: their type, equality as JSON Schema defines it, and
keyword merging for ``allOf``."""

from __future__ import annotations

import json
import math
from typing import Any

from .errors import SchemaError

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


TYPE_KEYWORDS = {
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


def escape_pointer(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def json_type(v: Any) -> str:
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


def json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def values_of(s: Any) -> list[Any] | None:
    if isinstance(s, dict) and "const" in s:
        return [s["const"]]
    if isinstance(s, dict) and isinstance(s.get("enum"), list):
        return s["enum"]
    return None


def declared_types(s: dict[str, Any]) -> set[str]:
    """JSON types a schema accepts by its ``type`` keyword alone (all when absent)."""
    t = s.get("type")
    if t is None:
        return set(TYPES)
    ts = set(t) if isinstance(t, list) else {t}
    if "number" in ts or "integer" in ts:
        ts |= {"number", "integer"}
    return ts


MERGE_MIN = {"minimum", "minLength", "minItems", "minProperties"}


MERGE_MAX = {"maximum", "maxLength", "maxItems", "maxProperties"}


def merge_into(dst: dict[str, Any], src: dict[str, Any]) -> bool:
    """Merge schema ``src`` into ``dst`` in place; False if some keyword cannot be merged
    (``dst`` is then unchanged)."""
    # additionalProperties / items only see the properties / prefixItems of their own schema
    # object: merging those across schema objects would change what they apply to
    # (where neither has patternProperties, nor unevaluatedProperties, which reads where each
    # name was evaluated, _merged_members merges properties and additionalProperties exactly)
    obj_keys, arr_keys = {"properties", "patternProperties", "additionalProperties"}, {"prefixItems", "items", "additionalItems"}
    members: dict[str, Any] = {}
    for keys, only in ((obj_keys, "additionalProperties"), (arr_keys, "items")):
        if keys & dst.keys() and keys & src.keys() and (only in dst or only in src):
            if only == "additionalProperties" and not {"patternProperties", "unevaluatedProperties"} & (dst.keys() | src.keys()):
                members = _merged_members(dst, src)
            elif not (only in dst and only in src and json_equal(dst, src)):
                return False
    if ("additionalItems" in dst or "additionalItems" in src) and arr_keys & dst.keys() and arr_keys & src.keys():
        return False
    out = {**dst, **members}
    for k, v in src.items():
        if k in members:
            continue
        if k not in CONSTRAINTS and k != "_patterns":
            continue  # annotations and unknown keywords constrain nothing
        if k not in out:
            out[k] = v
            continue
        cur = out[k]
        if json_equal(cur, v):
            continue
        if k in MERGE_MIN:
            out[k] = max(cur, v)
        elif k in MERGE_MAX:
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
            out[k] = [x for x in cur if any(json_equal(x, y) for y in v)]
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


def _merged_members(dst: dict[str, Any], src: dict[str, Any]) -> dict[str, Any]:
    """``properties`` and ``additionalProperties`` of two schemas of one object, one of which
    has ``additionalProperties`` (which sees only its own schema's ``properties``) and neither
    ``patternProperties`` (whose matches it would skip): each name either declares takes both
    schemas' words for it (its own ``properties`` entry, else that schema's
    ``additionalProperties``, else anything), other names both ``additionalProperties``; exact."""
    pa, pb = dst.get("properties", {}), src.get("properties", {})
    sa, sb = dst.get("additionalProperties", True), src.get("additionalProperties", True)
    props = {n: _both(pa.get(n, sa), pb.get(n, sb)) for n in dict.fromkeys([*pa, *pb])}
    return {"properties": props, "additionalProperties": _both(sa, sb)}


def _both(a: Any, b: Any) -> Any:
    """The schema of values valid under both ``a`` and ``b``."""
    if a is True or b is False or json_equal(a, b):
        return b
    if b is True or a is False:
        return a
    return {"allOf": [a, b]}


class RecursionLimit(Exception):
    """A recursive ``$ref`` was unrolled ``max_recursion_depth`` times on this path."""

    def __init__(self, pointer: str) -> None:
        self.pointer = pointer


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_count(v: Any) -> bool:
    return _is_number(v) and v >= 0 and float(v).is_integer()


def _is_schema(v: Any) -> bool:
    return isinstance(v, (dict, bool))


def _is_type(v: Any) -> bool:
    return isinstance(v, str) or (isinstance(v, list) and all(isinstance(t, str) for t in v))


def _is_required(v: Any) -> bool:  # a boolean is draft 3's form, which the converter reads as no constraint
    return isinstance(v, bool) or (isinstance(v, list) and all(isinstance(r, str) for r in v))


def _is_items(v: Any) -> bool:
    return _is_schema(v) or (isinstance(v, list) and all(_is_schema(s) for s in v))


def _is_schema_list(v: Any) -> bool:
    return isinstance(v, list) and all(_is_schema(s) for s in v)


def _is_schema_map(v: Any) -> bool:
    return isinstance(v, dict) and all(_is_schema(s) for s in v.values())


_NUMBER = (_is_number, "a number")
_BOUND = (lambda v: _is_number(v) or isinstance(v, bool), "a number (or, in draft 4, a boolean)")
_COUNT = (_is_count, "a non-negative integer")
_STRING = (lambda v: isinstance(v, str), "a string")
_SCHEMA = (_is_schema, "a schema (an object or a boolean)")
_SCHEMA_MAP = (_is_schema_map, "an object of schemas")
_COMBINATOR = (lambda v: _is_schema_list(v) and bool(v), "a non-empty array of schemas")
# keyword → (check, what it must be): the meta-schemas' type rules (drafts 4 – 2020-12)
KEYWORD_CHECKS: dict[str, tuple[Any, str]] = {
    "minimum": _NUMBER, "maximum": _NUMBER, "exclusiveMinimum": _BOUND, "exclusiveMaximum": _BOUND,
    "multipleOf": (lambda v: _is_number(v) and v > 0, "a number above 0"),
    "minLength": _COUNT, "maxLength": _COUNT, "minItems": _COUNT, "maxItems": _COUNT,
    "minProperties": _COUNT, "maxProperties": _COUNT, "minContains": _COUNT, "maxContains": _COUNT,
    "pattern": _STRING, "format": _STRING, "$ref": _STRING, "$anchor": _STRING,
    "$dynamicRef": _STRING, "$dynamicAnchor": _STRING, "$recursiveRef": _STRING,
    "$recursiveAnchor": (lambda v: isinstance(v, bool), "a boolean"),
    "type": (_is_type, "a type name or an array of them"),
    "required": (_is_required, "an array of strings"),
    "enum": (lambda v: isinstance(v, list), "an array"),
    "not": _SCHEMA, "additionalProperties": _SCHEMA, "additionalItems": _SCHEMA, "contains": _SCHEMA,
    "propertyNames": _SCHEMA, "if": _SCHEMA, "then": _SCHEMA, "else": _SCHEMA,
    "unevaluatedItems": _SCHEMA, "unevaluatedProperties": _SCHEMA,
    "items": (_is_items, "a schema or an array of schemas"),
    "allOf": _COMBINATOR, "anyOf": _COMBINATOR, "oneOf": _COMBINATOR,
    "prefixItems": (_is_schema_list, "an array of schemas"),
    "properties": _SCHEMA_MAP, "patternProperties": _SCHEMA_MAP, "$defs": _SCHEMA_MAP,
    "definitions": _SCHEMA_MAP, "dependentSchemas": _SCHEMA_MAP,
}  # fmt: skip
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_SUBSCHEMAS = ("not", "additionalProperties", "additionalItems", "contains", "propertyNames", "if", "then", "else",
               "unevaluatedItems", "unevaluatedProperties", "items", "allOf", "anyOf", "oneOf", "prefixItems",
               "properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")  # fmt: skip


def check_keyword_types(schema: Any, draft: int = 2020) -> None:
    """Raise :class:`SchemaError` naming the keyword and JSON pointer of the first keyword value
    of the wrong kind anywhere in ``schema`` (``minimum: null``, ``maxLength: "3"``, …), so that
    a bound is never silently ignored.  The checks are the meta-schemas' type rules for the
    keywords the converter reads, applied iteratively (any nesting depth); ``draft`` (3, 4, 6,
    7, 2019, 2020): the root's, whose 2020-12 meta-schema takes ``items`` as a schema only."""
    stack: list[tuple[Any, str]] = [(schema, "#")]
    while stack:
        node, ptr = stack.pop()
        if not isinstance(node, dict):
            continue
        for kw, v in node.items():
            rule = KEYWORD_CHECKS.get(kw)
            if rule is not None and not rule[0](v):
                raise SchemaError(f"{kw} must be {rule[1]}, got {_shown(v)}", keyword=kw, pointer=ptr)
            if kw == "items" and isinstance(v, list) and draft >= 2020:
                raise SchemaError("items must be a schema in draft 2020-12 (an array of schemas is prefixItems)", keyword=kw, pointer=ptr)
            if kw not in _SUBSCHEMAS:
                continue
            here = f"{ptr}/{escape_pointer(kw)}"
            if isinstance(v, dict) and kw in _SCHEMA_MAPS:
                stack.extend((s, f"{here}/{escape_pointer(str(k))}") for k, s in v.items())
            elif isinstance(v, list):
                stack.extend((s, f"{here}/{i}") for i, s in enumerate(v))
            else:
                stack.append((v, here))


def _shown(v: Any) -> str:
    try:
        return json.dumps(v)[:80]
    except (TypeError, ValueError):
        return repr(v)[:80]
