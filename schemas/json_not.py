"""``not``: primitive leaves compiled directly (types, a set of values, a pattern, property names
outside a set, a member failing ``patternProperties`` / ``additionalProperties``), anything else
as the union of its violations (:func:`.json_negation.complement`) intersected with the sibling
keywords."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from .errors import RegexError, SchemaError
from .formats import EXACT_FORMATS, NO_WIDE_FORMATS, STANDARD_FORMATS, format_ir, wide_format_ir
from .ir import NOTHING, And, Minus, Node, alt, chars, lit, rep, seq
from .json_containers import counted_members
from .json_keywords import CONSTRAINTS, RecursionLimit, json_type, values_of
from .json_negation import NotExpressible, complement
from .json_scalars import convert_types, multiple_of_value, types_of
from .json_strings import ANY_CHAR, ANY_STRING_CONTENT, json_string
from .numbers import MAX_REMAINDER_STATES, SHORT_FRACTIONAL, SHORT_NUMBER, multiple_of_automaton
from .regex import parse_regex
from .regex_assertions import resolve_anchors

if TYPE_CHECKING:
    from .json_schema import Converter


def convert_not(cv: Converter, schema: dict[str, Any], ptr: str) -> Node:
    """``not``: a primitive leaf (types, a value set, a pattern, property names) compiled
    directly, anything else as the union of its violations (:func:`.json_negation.complement`)
    intersected with the sibling keywords."""
    neg = schema["not"]
    rest = {k: v for k, v in schema.items() if k != "not"}
    try:
        leaf = not_leaf(cv, schema, neg, rest, ptr)
        if leaf is not None:
            return leaf
        cv.resolved_refs = []
        branches = complement(cv, neg, ptr + "/not")
    except NotExpressible as e:
        cv.unsupported("not", e.pointer, e.why)
        return cv.convert(rest, ptr) if rest else cv.any_value(cv.opt.any_value_depth)
    if not branches:
        return NOTHING
    union = cv.rewritten(schema, "not", lambda: {**rest, "anyOf": branches})
    # the $refs the complement looked through count as unrolled on this path, as in convert_ref
    refs = dict.fromkeys(cv.resolved_refs)
    saved = {r: cv.ref_depth.get(r, 0) for r in refs}
    if any(saved.values()):
        # negating a $ref that is being unrolled on this path (a recursive one): this branch
        # is left out, as recursion past the unrolling depth is (a narrowing)
        raise RecursionLimit(ptr)
    cv.ref_depth.update({r: d + 1 for r, d in saved.items()})
    try:
        return cv.convert_rewritten(union, ptr, "not")
    finally:
        cv.ref_depth.update(saved)


def _with_type(cv: Converter, schema: dict[str, Any], rest: dict[str, Any], types: Any) -> Any:
    """``rest`` restricted to ``types``, one object per (schema, types)."""
    return cv.rewritten(schema, f"type:{types}", lambda: {"allOf": [rest, {"type": types}]} if rest else {"type": types})


def not_leaf(cv: Converter, schema: dict[str, Any], neg: Any, rest: dict[str, Any], ptr: str) -> Node | None:
    """The primitive ``not`` forms, or None for the general construction."""
    if neg is True or (isinstance(neg, dict) and not any(k in CONSTRAINTS for k in neg)):
        return NOTHING  # `not` of "anything" allows nothing
    if neg is False:
        return cv.convert(rest, ptr) if rest else cv.any_value(cv.opt.any_value_depth)
    if not isinstance(neg, dict):
        raise SchemaError("not must be a schema", keyword="not", pointer=ptr)
    keys = set(neg) & CONSTRAINTS
    if keys == {"type"}:
        return _not_types(cv, schema, neg["type"], rest, ptr)
    if keys in ({"enum"}, {"const"}):
        return _not_values(cv, schema, values_of(neg) or [], rest, ptr)
    if keys == {"pattern"}:
        return _not_pattern(cv, schema, neg["pattern"], rest, ptr)
    if keys == {"format"}:
        return _not_format(cv, schema, neg["format"], rest, ptr)
    if keys == {"multipleOf"}:
        return _not_multiple(cv, schema, neg["multipleOf"], rest, ptr)
    if keys == {"propertyNames"}:
        return _some_key_outside(cv, schema, neg["propertyNames"], rest, ptr)
    tail = _items_after_prefix(cv, neg, keys)
    if tail is not None:
        return _some_item_after_failing(cv, schema, tail[0], tail[1], rest, ptr)
    one_pattern = keys == {"patternProperties"} and len(neg["patternProperties"]) == 1
    shaped = "additionalProperties" in keys and keys <= {"additionalProperties", "properties", "patternProperties"}
    if one_pattern or (
        shaped and all(_is_true(x) for x in (*neg.get("properties", {}).values(), *neg.get("patternProperties", {}).values()))
    ):
        return _some_member_failing(cv, schema, neg, rest, ptr)
    return None


def _not_format(cv: Converter, schema: dict[str, Any], name: Any, rest: dict[str, Any], ptr: str) -> Node | None:
    """Strings outside format ``name``: exact for :data:`EXACT_FORMATS`, outside a superset of
    the checker's language for the other checked ones (a narrowing); nothing when the root's
    draft does not check ``name`` (every value passes it) or when no superset short of every
    string is known (:data:`NO_WIDE_FORMATS`, a narrowing); None (the general construction,
    which refuses it) for a checked format without a known superset."""
    if not isinstance(name, str) or name not in STANDARD_FORMATS or name not in cv.checked_formats():
        return NOTHING
    if name in NO_WIDE_FORMATS:  # a narrowing: strings failing it exist, but none is known to
        return NOTHING
    outside = format_ir(name) if name in EXACT_FORMATS else wide_format_ir(name)
    if outside is None:
        return None
    return Minus(cv.convert(_with_type(cv, schema, rest, "string"), ptr), json_string(outside))


def _items_after_prefix(cv: Converter, neg: dict[str, Any], keys: set[str]) -> tuple[int, Any] | None:
    """(n, v) when ``neg`` is only "items after the first n (any values) meet v"."""
    prefix_key, rest_key = cv.tuple_keywords()
    prefix = neg.get(prefix_key)
    if keys != {prefix_key, rest_key} or not isinstance(prefix, list) or not prefix or not all(_is_true(p) for p in prefix):
        return None
    return len(prefix), neg[rest_key]


def _some_item_after_failing(cv: Converter, schema: dict[str, Any], n: int, v: Any, rest: dict[str, Any], ptr: str) -> Node:
    """Arrays of ``rest`` with an item after the first ``n`` that fails ``v``: ``n`` items of
    any value, then a list holding at least one failing item (as ``contains`` counts)."""
    with cv.product_operands():
        arrays = cv.convert(_with_type(cv, schema, rest, "array"), ptr)
        failing = cv.convert(cv.rewritten(schema, "failing-item", lambda: {"not": v}), ptr)
    value = cv.any_value(cv.opt.product_value_depth + 2)
    head = seq(value, *[seq(cv.item_sep, value) for _ in range(n - 1)])
    return And((arrays, seq(cv.open_arr, head, cv.item_sep, counted_members(cv, failing, value, 1, None), cv.close_arr)))


def _is_true(s: Any) -> bool:
    return s is True or (isinstance(s, dict) and not any(k in CONSTRAINTS for k in s))


def _some_member_failing(cv: Converter, schema: dict[str, Any], neg: dict[str, Any], rest: dict[str, Any], ptr: str) -> Node:
    """Objects where a member that ``patternProperties`` (one pattern) or ``additionalProperties``
    governs has a value failing its schema.  The failing member is the last member whose key is
    in that key language, or only failing members follow it: with duplicate keys the last
    occurrence is the value a parser keeps."""
    if "additionalProperties" in neg:
        sub = neg["additionalProperties"]
        excluded = [lit(k) for k in neg.get("properties", {})] + [_wide_pattern(p, ptr) for p in neg.get("patternProperties", {})]
        keys: Node = Minus(ANY_STRING_CONTENT, alt(*excluded)) if excluded else ANY_STRING_CONTENT
    else:
        ((pat, sub),) = neg["patternProperties"].items()
        try:
            keys = resolve_anchors(parse_regex(pat), pat, search=True)
        except RegexError as e:
            raise NotExpressible("patternProperties", ptr, f"pattern {pat!r}: {e.reason}") from e
    with cv.product_operands():
        failing = cv.convert(cv.rewritten(schema, "failing-member", lambda: {"not": sub}), ptr)
        obj = cv.convert(_with_type(cv, schema, rest, "object"), ptr)
    value = cv.any_value(cv.opt.product_value_depth + 2)
    hit = seq(json_string(keys), cv.key_sep, failing)
    after = alt(seq(json_string(Minus(ANY_STRING_CONTENT, keys)), cv.key_sep, value), hit)
    return And((obj, _object_with(cv, hit, after)))


def _not_types(cv: Converter, schema: dict[str, Any], excluded: Any, rest: dict[str, Any], ptr: str) -> Node:
    excluded_set = set(excluded) if isinstance(excluded, list) else {excluded}
    allowed = types_of(cv, rest) - excluded_set
    if "number" in excluded_set:
        allowed.discard("integer")
    fractional = "integer" in excluded_set and "number" in allowed
    if fractional:
        allowed -= {"number", "integer"}
    parts = [convert_types(cv, {**rest, "type": sorted(allowed)}, ptr)] if allowed else []
    if fractional:  # numbers that are not integers
        parts.append(And((convert_types(cv, {**rest, "type": "number"}, ptr), SHORT_FRACTIONAL)))
    return alt(*parts)


def _not_multiple(cv: Converter, schema: dict[str, Any], mult: Any, rest: dict[str, Any], ptr: str) -> Node:
    """Numbers of ``rest`` that are not multiples of ``mult``: in the SHORT_NUMBER layout (a
    narrowing: a double parses each such text to the value it spells, so no text that reads
    as a multiple gets in), minus the remainder automaton's numerals (exact on that layout)."""
    where = ptr + "/not/multipleOf"
    multiples = multiple_of_automaton(multiple_of_value(mult, where))
    if multiples is None:
        raise NotExpressible("multipleOf", where, f"multipleOf {mult}: its remainder automaton would exceed {MAX_REMAINDER_STATES} states")
    numbers = cv.convert(_with_type(cv, schema, rest, "number"), ptr)
    return Minus(And((numbers, SHORT_NUMBER)), multiples)


def _not_values(cv: Converter, schema: dict[str, Any], values: list[Any], rest: dict[str, Any], ptr: str) -> Node:
    """Values other than ``values``: per JSON type, the sibling keywords' language minus the
    values' texts (numbers in the SHORT_NUMBER layout, where one value has one text);
    containers by their structure (an array of the given length with those items, …)."""
    groups: dict[str, list[Any]] = {}
    for v in values:
        t = json_type(v)
        groups.setdefault("number" if t == "integer" else t, []).append(v)
    others = [t for t in ("null", "boolean", "object", "array", "string", "number") if t not in groups]
    parts = [cv.convert(_with_type(cv, schema, rest, others), ptr)] if others else []
    for t, vs in groups.items():
        typed = _with_type(cv, schema, rest, t)
        if t in ("array", "object"):
            negated: dict[str, Any] = {"allOf": [typed] + [{"not": _structure(cv, v)} for v in vs]}
            parts.append(cv.convert(cv.rewritten(schema, f"not-{t}", functools.partial(dict, negated)), ptr))
            continue
        base = cv.convert(typed, ptr)
        if t == "number":
            parts.append(Minus(And((base, SHORT_NUMBER)), alt(*[n for v in vs for n in _number_texts(v)])))
        else:
            parts.append(Minus(base, alt(*[lit(cv.opt.dumps(v)) for v in vs])))
    return alt(*parts)


def _number_texts(v: Any) -> list[Node]:
    """The SHORT_NUMBER texts of the number ``v`` (none when it has no such text)."""
    if float(v).is_integer():
        i = int(v)
        return [lit(str(i))] + ([lit("-0")] if i == 0 else [])
    text = repr(float(v))
    return [lit(text)] if "e" not in text and len(text.lstrip("-").replace(".", "").lstrip("0")) <= 14 else []


def _structure(cv: Converter, v: Any) -> dict[str, Any]:
    """A schema only the container ``v`` validates (by JSON Schema equality)."""
    if isinstance(v, list):
        return {"type": "array", "minItems": len(v), "maxItems": len(v), cv.tuple_keywords()[0]: [{"const": x} for x in v]}
    return {
        "type": "object",
        "required": list(v),
        "properties": {k: {"const": x} for k, x in v.items()},
        "additionalProperties": False,
    }


def _not_pattern(cv: Converter, schema: dict[str, Any], pattern: Any, rest: dict[str, Any], ptr: str) -> Node:
    wide = _wide_pattern(pattern, ptr + "/not")
    return Minus(cv.convert(_with_type(cv, schema, rest, "string"), ptr), json_string(wide))


def _wide_pattern(pattern: Any, ptr: str) -> Node:
    """A superset of the strings ``pattern`` matches (ECMA-262 and Python readings)."""
    if not isinstance(pattern, str):
        raise SchemaError("pattern must be a string", keyword="pattern", pointer=ptr)
    try:
        return resolve_anchors(parse_regex(pattern, wide=True), pattern, search=True, wide=True)
    except RegexError as e:
        raise NotExpressible("pattern", ptr, f"pattern: {e.reason} at position {e.position} of {pattern!r}") from e


_KEY_COMPLEMENT_KEYWORDS = frozenset({"type", "enum", "const", "maxLength", "minLength", "pattern"})


def _some_key_outside(cv: Converter, schema: dict[str, Any], names: Any, rest: dict[str, Any], ptr: str) -> Node:
    """Objects with at least one property name that ``names`` rejects: its strings' complement
    by :func:`key_complement` for the string keywords, else the converter's JSON texts of
    ``{"type": "string", "not": names}`` (any subschema whose complement it builds, in the
    canonical encoding keys are written in)."""
    known = cv.draft_keywords()
    general = isinstance(names, dict) and any(k in CONSTRAINTS and k in known and k not in _KEY_COMPLEMENT_KEYWORDS for k in names)
    if general:
        texts = cv.convert(cv.rewritten(names, "key-complement", lambda: {"type": "string", "not": names}), ptr + "/not/propertyNames")
    else:
        outside = key_complement(cv, names, ptr + "/not/propertyNames")
        texts = NOTHING if outside is NOTHING else json_string(outside)
    if texts is NOTHING:
        return NOTHING
    obj = cv.convert(_with_type(cv, schema, rest, "object"), ptr)
    value = cv.any_value(cv.opt.product_value_depth + 2)
    return And((obj, _object_with(cv, seq(texts, cv.key_sep, value), None)))


def _object_with(cv: Converter, hit: Node, after: Node | None) -> Node:
    """Objects with a ``hit`` member, any members before it and ``after`` members after it
    (None: any members).  Members outside the hit have values of bounded depth (a narrowing)."""
    member = seq(json_string(ANY_STRING_CONTENT), cv.key_sep, cv.any_value(cv.opt.product_value_depth + 2))
    sep = cv.item_sep
    tail = member if after is None else after
    return seq(cv.open_obj, rep(seq(member, sep), 0, None), hit, rep(seq(sep, tail), 0, None), cv.close_obj)


def key_complement(cv: Converter, names: Any, ptr: str) -> Node:
    """Code-point IR of the strings ``names`` rejects (a superset is never returned: exact, or
    :class:`NotExpressible`)."""
    if names is True:
        return NOTHING
    if names is False:
        return ANY_STRING_CONTENT
    if not isinstance(names, dict):
        raise SchemaError("propertyNames must be a schema", keyword="propertyNames", pointer=ptr)
    parts: list[Node] = []
    for kw, v in names.items():
        if kw not in CONSTRAINTS or kw not in cv.draft_keywords():
            continue
        if kw == "type":
            if "string" not in (v if isinstance(v, list) else [v]):
                return ANY_STRING_CONTENT
        elif kw in ("enum", "const"):
            vals = [v] if kw == "const" else v
            lits = [lit(x) for x in vals if isinstance(x, str)]
            parts.append(Minus(ANY_STRING_CONTENT, alt(*lits)) if lits else ANY_STRING_CONTENT)
        elif kw == "maxLength":
            parts.append(rep(chars(ANY_CHAR), int(v) + 1, None))
        elif kw == "minLength" and v > 0:
            parts.append(rep(chars(ANY_CHAR), 0, int(v) - 1))
        elif kw == "pattern":
            parts.append(Minus(ANY_STRING_CONTENT, _wide_pattern(v, ptr)))
        elif kw != "minLength":
            raise NotExpressible("propertyNames", ptr, f"the complement of propertyNames with '{kw}' is not supported")
    return alt(*parts)
