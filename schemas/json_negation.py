"""The complement of a schema as a union of schemas: ``not``, ``if`` / ``else``, overlapping
``oneOf`` and the negated branches of ``dependentSchemas`` all reduce to it.

A schema is a conjunction of its keywords, so a value fails it exactly when it fails one
keyword: :func:`complement` returns one or more *violation* schemas per keyword (De Morgan,
pushed down through ``allOf`` / ``anyOf`` / ``oneOf`` / ``not`` / ``if`` / ``$ref``), each of
which only values failing that keyword validate, and whose union is every such value.  Each
violation is an ordinary schema (``type``, ``required``, ``properties``, bounds, ``contains``,
…) that the converter then compiles like any other, so the result is as sound as the converter
itself.  Some leaves are left as ``not`` of a primitive that :mod:`.json_not` compiles
directly: ``not`` of a value set (``enum`` / ``const``), of a ``pattern``, of a ``multipleOf``
(numbers minus the remainder automaton's) and ``{"type": "number", "not": {"type": "integer"}}``.

Only keywords the root's draft evaluates are negated (``dependencies`` before 2019-09,
``dependentRequired`` from it, …): a keyword the validator ignores constrains nothing, and
negating it would admit values that validate.  A keyword whose violations cannot be stated this
way (``uniqueItems``, ``format``, …)
raises :class:`NotExpressible`, which the converter reports as an unsupported ``not``.

The construction is the negation normal form of JSON Schema used by, e.g., hypothesis-jsonschema's
canonicalisation and the JSON-Schema-witness work of Attouche et al., "Witness generation for
JSON Schema" (VLDB 2022).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import SchemaError
from .formats import EXACT_FORMATS, NO_WIDE_FORMATS, STANDARD_FORMATS, WIDE_FORMAT_REGEXES
from .ir import alt
from .json_containers import MAX_UNIQUE_VALUES, counted_items, finite_item_values, unique_value_classes
from .json_keywords import CONSTRAINTS, escape_pointer
from .json_refs import dynamic_target, followed_scope
from .json_scalars import value_literal

if TYPE_CHECKING:
    from .json_schema import Converter

MAX_REF_NEGATIONS = 8  # a $ref negated this many times on one path is treated as recursive
_SCALAR_TYPES = ("null", "boolean", "object", "array", "string")


class NotExpressible(Exception):
    """The complement of a keyword cannot be written as violation schemas (``keyword`` at
    ``pointer``, ``why``)."""

    def __init__(self, keyword: str, pointer: str, why: str) -> None:
        super().__init__(why)
        self.keyword = keyword
        self.pointer = pointer
        self.why = why


def complement(cv: Converter, schema: Any, ptr: str) -> list[Any]:
    """Schemas whose union is exactly the set of JSON values that fail ``schema``.

    ``[]`` means every value validates ``schema`` (its complement is empty); ``[True]`` that
    none does.  Raises :class:`NotExpressible` for a keyword whose violations cannot be stated,
    :class:`SchemaError` for a malformed subschema.
    """
    if schema is True:
        return []
    if schema is False:
        return [True]
    if not isinstance(schema, dict):
        raise SchemaError("a schema must be an object or a boolean", keyword="not", pointer=ptr)
    if any(schema.get(k, True) is not True for k in ("unevaluatedProperties", "unevaluatedItems")) and cv.draft_number() >= 2019:
        static = cv.unevaluated_in_place(schema)  # (one whose evaluated set a dynamic reference fixes: known in this scope)
        if static is not None:
            return complement(cv, static, ptr)
    known = cv.draft_keywords()
    out: list[Any] = []
    if "$ref" in schema:
        out.extend(_complement_ref(cv, schema, ptr))
        if cv.draft_ignores_ref_siblings():
            return out
    for kw, value in schema.items():
        if kw == "$ref" or kw not in CONSTRAINTS or kw not in known:
            continue
        out.extend(_violations(cv, kw, value, schema, f"{ptr}/{escape_pointer(kw)}"))
    return out


def _complement_ref(cv: Converter, schema: dict[str, Any], ptr: str) -> list[Any]:
    pointer = ptr + "/$ref"
    target, target_ptr = cv.resolve_ref(schema["$ref"], pointer, schema)
    return _complement_target(cv, "$ref", target, target_ptr, followed_scope(cv, schema, pointer, schema["$ref"]), ptr)


def _complement_target(cv: Converter, keyword: str, target: Any, target_ptr: str, scope: tuple[str, ...], ptr: str) -> list[Any]:
    """The complement of reference ``keyword``'s ``target`` (at ``target_ptr``), followed
    into dynamic scope ``scope``: where that scope differs from the converter's and the target
    may reach a dynamic reference, it is worked out in ``scope`` and each violation converts in
    it (:meth:`Converter.in_scope`), so those references resolve as they do for the target.
    One negated :data:`MAX_REF_NEGATIONS` times on one path (a recursive reference) raises
    :class:`NotExpressible`."""
    depth = cv.negated_refs.get(target_ptr, 0)
    if depth >= MAX_REF_NEGATIONS:
        raise NotExpressible(keyword, ptr, f"the complement of a recursive {keyword} is not regular")
    cv.negated_refs[target_ptr] = depth + 1
    cv.resolved_refs.append(target_ptr)
    moved = scope != cv.dynamic_scope and cv.reachable_refs(target) is None
    outer = cv.dynamic_scope
    if moved:
        cv.dynamic_scope = scope
    try:
        out = complement(cv, target, target_ptr)
    finally:
        cv.negated_refs[target_ptr] = depth
        cv.dynamic_scope = outer
    return [cv.in_scope(v, scope) if moved and not isinstance(v, bool) else v for v in out]


def _violations(cv: Converter, kw: str, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    """Violation schemas of keyword ``kw`` (value ``v``) of schema ``s``."""
    handler = _HANDLERS.get(kw)
    if handler is None:
        raise NotExpressible(kw, ptr, f"the complement of '{kw}' cannot be expressed as a regular grammar")
    return handler(cv, v, s, ptr)


def _type(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    ts = set(v) if isinstance(v, list) else {v}
    others = [t for t in _SCALAR_TYPES if t not in ts]
    out: list[Any] = []
    if "number" not in ts:
        if "integer" in ts:
            out.append({"type": "number", "not": {"type": "integer"}})
        else:
            others.append("number")
    if others:
        out.append({"type": others})
    return out


def _enum(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    return [{"not": {"enum": v}}]


def _const(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    return [{"not": {"const": v}}]


def _all_of(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    out: list[Any] = []
    for i, sub in enumerate(v):
        out.extend(complement(cv, sub, f"{ptr}/{i}"))
    return out


def _any_of(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    if any(b is True for b in v):
        return []
    return [{"allOf": [{"not": b} for b in v]}]


def _one_of(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    out: list[Any] = [] if any(b is True for b in v) else [{"allOf": [{"not": b} for b in v]}]
    for i in range(len(v)):
        for j in range(i + 1, len(v)):
            out.append({"allOf": [v[i], v[j]]})  # two branches match
    return out


def _not(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    return [] if v is False else [v]


def _if(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    out: list[Any] = []
    if "then" in s:
        out.append({"allOf": [v, {"not": s["then"]}]})
    if "else" in s:
        out.append({"allOf": [{"not": v}, {"not": s["else"]}]})
    return out


def _ignored(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    return []  # read together with another keyword (then/else with if, minContains with contains …)


def _min_length(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    return [{"type": "string", "maxLength": int(v) - 1}] if v > 0 else []


def _max_length(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    return [{"type": "string", "minLength": int(v) + 1}]


def _pattern(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    return [{"type": "string", "not": {"pattern": v}}]


def _format(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    if isinstance(v, str) and (v not in STANDARD_FORMATS or v not in cv.checked_formats()):
        return []  # an annotation: not defined by JSON Schema, or not checked under the root's draft
    if v in EXACT_FORMATS or v in WIDE_FORMAT_REGEXES or v in NO_WIDE_FORMATS:
        return [{"type": "string", "not": {"format": v}}]
    raise NotExpressible("format", ptr, f"the complement of format {v!r} is not supported (no regular superset of it is known)")


def _multiple_of(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    return [{"type": "number", "not": {"multipleOf": v}}]


def _bound(cv: Converter, kw: str, v: Any, s: dict[str, Any]) -> list[Any]:
    """Violations of minimum / maximum (draft-4 boolean exclusives read with them)."""
    if isinstance(v, bool):
        return []  # draft 4's boolean exclusiveMinimum / exclusiveMaximum: read with the bound
    low = kw in ("minimum", "exclusiveMinimum")
    strict = kw.startswith("exclusive") or s.get("exclusiveMinimum" if low else "exclusiveMaximum") is True
    opposite = "maximum" if low else "minimum"
    if strict:
        return [{"type": "number", opposite: v}]
    if cv.draft_number() <= 4:
        return [{"type": "number", opposite: v, "exclusiveMaximum" if low else "exclusiveMinimum": True}]
    return [{"type": "number", "exclusiveMaximum" if low else "exclusiveMinimum": v}]


def _min_items(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    return [{"type": "array", "maxItems": int(v) - 1}] if v > 0 else []


def _max_items(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    return [{"type": "array", "minItems": int(v) + 1}]


def _unique_items(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    """Arrays with a repeated item, when ``s``'s items are a small finite set of values: those
    holding one value (up to JSON equality) at least twice, built as IR
    (:meth:`Converter.prebuilt`; no keyword of the drafts before 2019-09 counts items);
    arrays with an item outside the set are ``items``' violations.  Over an open item language
    it raises :class:`NotExpressible`."""
    if v is not True:
        return []
    values = finite_item_values(cv, s)
    classes = None if values is None else unique_value_classes(values)
    if classes is None:
        raise NotExpressible(
            "uniqueItems", ptr, "the complement of uniqueItems (a repeated item) is not regular over an open item language"
        )
    if len(classes) > MAX_UNIQUE_VALUES:
        raise NotExpressible("uniqueItems", ptr, f"the complement of uniqueItems over more than {MAX_UNIQUE_VALUES} item values (size cap)")
    texts = [[value_literal(cv, x, cv.opt.dumps(x)) for x in cls] for cls in classes]
    everything = [t for cls in texts for t in cls]
    node = alt(*(counted_items(cv, alt(*cls), alt(*[t for t in everything if t not in cls]), 2, None) for cls in texts))
    return [cv.prebuilt(node, "array")]


def _dynamic_ref(keyword: str) -> Callable[[Converter, Any, dict[str, Any], str], list[Any]]:
    """The handler of ``keyword`` (``$dynamicRef`` / ``$recursiveRef``): in the draft that
    defines it, the complement of its target in the converter's dynamic scope
    (:func:`.json_refs.dynamic_target`); elsewhere an annotation, which no value fails."""

    def violations(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
        if cv.dynamic_ref_keyword() != keyword:
            return []
        target, target_ptr, scope = dynamic_target(cv, s, ptr.rsplit("/", 1)[0], cv.dynamic_scope)
        return _complement_target(cv, keyword, target, target_ptr, scope, ptr)

    return violations


def _prefix_violations(cv: Converter, key: str, prefix: list[Any]) -> list[Any]:
    out = []
    for i, sub in enumerate(prefix):
        if sub is not True:
            out.append({"type": "array", "minItems": i + 1, key: [True] * i + [{"not": sub}]})
    return out


def _items(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    if isinstance(v, list):  # the tuple form (before 2020-12)
        return _prefix_violations(cv, "items", v)
    prefix = s.get("prefixItems") if "prefixItems" in cv.draft_keywords() else None
    n = len(prefix) if isinstance(prefix, list) else 0
    return _rest_items(cv, v, n, ptr)


def _rest_items(cv: Converter, v: Any, n: int, ptr: str) -> list[Any]:
    """Violations of the schema ``v`` that items after the first ``n`` must meet."""
    if v is True:
        return []
    if v is False:
        return [{"type": "array", "minItems": n + 1}]
    if not n:
        return [{"type": "array", "contains": {"not": v}}]
    # some item after the first n fails v: a leaf that json_not compiles directly
    prefix_key, rest_key = cv.tuple_keywords()
    return [{"type": "array", "not": {prefix_key: [True] * n, rest_key: v}}]


def _prefix_items(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    return _prefix_violations(cv, "prefixItems", v)


def _additional_items(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    items = s.get("items")
    return _rest_items(cv, v, len(items), ptr) if isinstance(items, list) else []


def _contains(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    counted = cv.draft_number() >= 2019
    lo = int(s.get("minContains", 1)) if counted else 1
    hi = s.get("maxContains") if counted else None
    out: list[Any] = []
    if lo == 1:
        out.append({"type": "array", "items": {"not": v}})
    elif lo > 1:
        out.append({"type": "array", "contains": v, "minContains": 0, "maxContains": lo - 1})
    if hi is not None:
        out.append({"type": "array", "contains": v, "minContains": int(hi) + 1})
    return out


def _properties(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    return [{"type": "object", "required": [name], "properties": {name: {"not": sub}}} for name, sub in v.items() if not _trivial(sub)]


def _required(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    return [{"type": "object", "properties": {name: False}} for name in v] if isinstance(v, list) else []


def _min_properties(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    return [{"type": "object", "maxProperties": int(v) - 1}] if v > 0 else []


def _max_properties(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    return [{"type": "object", "minProperties": int(v) + 1}]


def _dependent_required(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    out: list[Any] = []
    for name, deps in v.items():
        if isinstance(deps, list):
            out.extend({"type": "object", "required": [name], "properties": {d: False}} for d in deps)
        elif deps is not True:
            out.append({"type": "object", "required": [name], "not": deps})
    return out


def _trivial(v: Any) -> bool:
    return v is True or (isinstance(v, dict) and not any(k in CONSTRAINTS for k in v))


def _subschema_free(kw: str) -> Any:
    def handler(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
        if _trivial(v):
            return []
        raise NotExpressible(kw, ptr, f"the complement of '{kw}' is not supported")

    return handler


def _additional_properties(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    if _trivial(v):
        return []
    if v is False and not s.get("patternProperties"):  # a property outside the declared ones
        return [{"type": "object", "not": {"propertyNames": {"enum": sorted(s.get("properties") or {})}}}]
    shape = {
        "properties": {k: True for k in s.get("properties") or {}},
        "patternProperties": {p: True for p in s.get("patternProperties") or {}},
    }
    return [{"type": "object", "not": {**shape, "additionalProperties": v}}]


def _pattern_properties(cv: Converter, v: Any, s: dict[str, Any], ptr: str) -> list[Any]:
    return [{"type": "object", "not": {"patternProperties": {p: sub}}} for p, sub in v.items() if not _trivial(sub)]


_HANDLERS: dict[str, Any] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "allOf": _all_of,
    "anyOf": _any_of,
    "oneOf": _one_of,
    "not": _not,
    "if": _if,
    "then": _ignored,
    "else": _ignored,
    "minContains": _ignored,
    "maxContains": _ignored,
    "minLength": _min_length,
    "maxLength": _max_length,
    "pattern": _pattern,
    "format": _format,
    "multipleOf": _multiple_of,
    "minimum": lambda cv, v, s, ptr: _bound(cv, "minimum", v, s),
    "maximum": lambda cv, v, s, ptr: _bound(cv, "maximum", v, s),
    "exclusiveMinimum": lambda cv, v, s, ptr: _bound(cv, "exclusiveMinimum", v, s),
    "exclusiveMaximum": lambda cv, v, s, ptr: _bound(cv, "exclusiveMaximum", v, s),
    "minItems": _min_items,
    "maxItems": _max_items,
    "uniqueItems": _unique_items,
    "$dynamicRef": _dynamic_ref("$dynamicRef"),
    "$recursiveRef": _dynamic_ref("$recursiveRef"),
    "items": _items,
    "prefixItems": _prefix_items,
    "additionalItems": _additional_items,
    "contains": _contains,
    "properties": _properties,
    "required": _required,
    "minProperties": _min_properties,
    "maxProperties": _max_properties,
    "dependentRequired": _dependent_required,
    "dependentSchemas": _dependent_required,
    "dependencies": _dependent_required,
    "additionalProperties": _additional_properties,
    "patternProperties": _pattern_properties,
    "propertyNames": lambda cv, v, s, ptr: [] if _trivial(v) else [{"type": "object", "not": {"propertyNames": v}}],
    "unevaluatedItems": _subschema_free("unevaluatedItems"),
    "unevaluatedProperties": _subschema_free("unevaluatedProperties"),
}
