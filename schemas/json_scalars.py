"""``enum`` / ``const``, ``type`` dispatch, and numbers (exact integer and decimal ranges,
``multipleOf``: by the last digits for divisors of a power of ten, else a remainder automaton)."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from .errors import SchemaError
from .formats import STANDARD_FORMATS
from .ir import NOTHING, And, Node, alt, lit, seq
from .json_containers import convert_array, convert_object
from .json_keywords import CONSTRAINTS, TYPE_KEYWORDS, TYPES, json_type
from .json_strings import convert_string
from .numbers import (
    INTEGER,
    MAX_REMAINDER_STATES,
    NUMBER,
    integer_bounds,
    integer_range,
    multiple_of_automaton,
    multiple_of_decimal,
    multiple_of_integer,
    number_range,
    to_decimal,
)

if TYPE_CHECKING:
    from .json_schema import Converter


def convert_enum(cv: Converter, schema: dict[str, Any], ptr: str) -> Node:
    if "enum" in schema and not isinstance(schema["enum"], list):  # also under a $ref outside the checked keywords
        raise SchemaError("enum must be an array", keyword="enum", pointer=ptr)
    values, used = ([schema["const"]], "const") if "const" in schema else (schema["enum"], "enum")
    rest = {k: v for k, v in schema.items() if k != used}  # a sibling enum (next to const) is checked on each value
    keep = []
    constraining = {k for k in rest if k in CONSTRAINTS}
    for v in values:
        if constraining == {"type"} and isinstance(rest["type"], (str, list)):
            types = set(rest["type"]) if isinstance(rest["type"], list) else {rest["type"]}
            vt = json_type(v)
            ok = vt in types or (vt == "integer" and "number" in types)
        elif constraining:
            try:
                ok = cv.validator(rest).is_valid(v)
            except Exception as e:  # a malformed sibling keyword
                raise SchemaError(f"cannot check enum values against sibling keywords: {e}", keyword="enum", pointer=ptr) from e
        else:
            ok = True
        if ok:
            keep.append(v)
    out: list[Node] = []
    for v in keep:
        try:
            text = cv.opt.dumps(v)
        except ValueError as e:
            raise SchemaError(f"enum/const value is not JSON: {e}", keyword="enum", pointer=ptr) from e
        out.append(value_literal(cv, v, text))
    return alt(*out) if out else NOTHING


def value_literal(cv: Converter, value: Any, text: str) -> Node:
    """A JSON value as its text; in flexible mode containers get flexible whitespace."""
    if cv.opt.whitespace != "flexible" or not isinstance(value, (dict, list)):
        return lit(text)
    if isinstance(value, list):
        if not value:
            return cv.empty_arr
        items = [value_literal(cv, v, cv.opt.dumps(v)) for v in value]
        body: list[Node] = [cv.open_arr]
        for i, it in enumerate(items):
            if i:
                body.append(cv.item_sep)
            body.append(it)
        body.append(cv.close_arr)
        return seq(*body)
    if not value:
        return cv.empty_obj
    body = [cv.open_obj]
    for i, (k, v) in enumerate(value.items()):
        if i:
            body.append(cv.item_sep)
        body.extend([lit(cv.opt.dumps(k)), cv.key_sep, value_literal(cv, v, cv.opt.dumps(v))])
    body.append(cv.close_obj)
    return seq(*body)


def types_of(cv: Converter, schema: dict[str, Any]) -> set[str]:
    """The JSON types ``schema`` allows: its ``type``; without one, the types its keywords
    belong to (``SchemaOptions.infer_types``, the default narrowing; every type when none
    does), or every type (``infer_types=False``, as JSON Schema reads it).  Raises
    ``SchemaError`` for an unknown type name."""
    t = schema.get("type")
    if t is None and not cv.opt.infer_types:
        return set(TYPES)
    if t is None:
        keys = set(schema)
        fmt = schema.get("format")
        if not (isinstance(fmt, str) and fmt in STANDARD_FORMATS):
            keys.discard("format")  # a format JSON Schema does not define is an annotation: it implies no type
        present = {ty for ty, kws in TYPE_KEYWORDS.items() if kws & keys}
        if "number" in present:
            present.add("integer")
        return present or set(TYPES)
    ts = t if isinstance(t, list) else [t]
    for x in ts:
        if x not in TYPES:
            raise SchemaError(f"unknown type {x!r}", keyword="type", pointer="")
    return set(ts)


def convert_types(cv: Converter, schema: dict[str, Any], ptr: str) -> Node:
    t = schema.get("type")
    if t is not None:
        ts = t if isinstance(t, list) else [t]
        for x in ts:
            if x not in TYPES:
                raise SchemaError(f"unknown type {x!r}", keyword="type", pointer=ptr)
    types = types_of(cv, schema)
    parts: list[Node] = []
    context, cv.key_order = cv.key_order, ()  # the values inside lay out their own keys
    try:
        for ty in TYPES:
            if ty in types and not (ty == "integer" and "number" in types):
                parts.append(_convert_type(cv, schema, ptr, ty, context))
    finally:
        cv.key_order = context
    return alt(*parts) if parts else NOTHING


def _convert_type(cv: Converter, schema: dict[str, Any], ptr: str, ty: str, context: tuple[str, ...]) -> Node:
    if ty == "null":
        return lit("null")
    if ty == "boolean":
        return alt(lit("true"), lit("false"))
    if ty == "string":
        return convert_string(cv, schema, ptr)
    if ty in ("number", "integer"):
        return convert_number(cv, schema, ptr, integer=(ty == "integer"))
    if ty == "array":
        return convert_array(cv, schema, ptr)
    return convert_object(cv, schema, ptr, context)


def convert_number(cv: Converter, schema: dict[str, Any], ptr: str, *, integer: bool) -> Node:
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
            node = multiple_of(cv, node, mult, ptr, integer=True)
        return node
    if lo is None and hi is None and mult is None:
        return NUMBER
    node = number_range(lo, lo_strict, hi, hi_strict)
    if mult is not None:
        node = multiple_of(cv, node, mult, ptr, integer=False)
    return node


def multiple_of_value(mult: Any, ptr: str) -> Decimal:
    """A ``multipleOf`` value as an exact Decimal; ``SchemaError`` at ``ptr`` unless a number > 0."""
    try:
        m = to_decimal(mult)
    except ValueError as e:
        raise SchemaError(str(e), keyword="multipleOf", pointer=ptr) from e
    if m <= 0:
        raise SchemaError("multipleOf must be > 0", keyword="multipleOf", pointer=ptr)
    return m


def multiple_of(cv: Converter, node: Node, mult: Any, ptr: str, *, integer: bool) -> Node:
    m = multiple_of_value(mult, ptr)
    if m == m.to_integral_value():
        mo = multiple_of_integer(int(m))
    elif integer:
        # an integer is a multiple of p/10^q iff it is a multiple of p / gcd(p, 10^q)
        q = -int(m.normalize().as_tuple().exponent)  # type: ignore[arg-type]
        p = int(m.scaleb(q))
        mo = multiple_of_integer(p // math.gcd(p, 10**q))
    else:
        mo = multiple_of_decimal(m)
    if mo is None:  # divisibility not decided by the last digits: the remainder automaton
        mo = multiple_of_automaton(m)
    if mo is None:
        cv.unsupported("multipleOf", ptr, f"multipleOf {mult}: its remainder automaton would exceed {MAX_REMAINDER_STATES} states")
        return node
    return And((node, mo))
