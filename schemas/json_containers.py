"""Arrays (``items`` / ``prefixItems``, item counts) and objects (declared properties in schema
order, then ``patternProperties`` / ``additionalProperties``; property names as a language)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .errors import RegexError, SchemaError
from .ir import NOTHING, And, Join, Lit, Members, Minus, Node, alt, lit, rep, seq
from .json_keywords import CONSTRAINTS, RecursionLimit, escape_pointer
from .json_strings import ANY_STRING_CONTENT, json_string, string_content
from .regex import parse_regex
from .regex_assertions import resolve_anchors

if TYPE_CHECKING:
    from .json_schema import Converter


STRING_NAME_KEYWORDS = frozenset({"type", "enum", "const", "minLength", "maxLength", "pattern", "format"})


def key_texts(cv: Converter, names: Any, ptr: str) -> Node | None:
    """For a ``propertyNames`` schema beyond the string keywords (``$ref``, ``anyOf``, ``not`` …):
    the JSON texts of the strings it generates (the converter's language of ``names`` ∧ string,
    in the same canonical encoding as keys), to intersect with the key language; None otherwise."""
    if not isinstance(names, dict) or not any(k in CONSTRAINTS and k not in STRING_NAME_KEYWORDS for k in names):
        return None
    return cv.convert(cv.rewritten(names, "key-texts", lambda: {"allOf": [names, {"type": "string"}]}), ptr)


def key_language(cv: Converter, names: Any, ptr: str) -> Node | None:
    """Code-point IR of the property names ``propertyNames`` allows with the string keywords
    (None: any name, or a schema :func:`key_texts` reads)."""
    if names is None or names is True:
        return None
    if names is False:
        return NOTHING
    if not isinstance(names, dict):
        raise SchemaError("propertyNames must be a schema", keyword="propertyNames", pointer=ptr)
    if any(k in CONSTRAINTS and k not in STRING_NAME_KEYWORDS for k in names):
        return None  # read by key_texts instead (any schema, through the converter)
    t = names.get("type")
    if t is not None and "string" not in (t if isinstance(t, list) else [t]):
        return NOTHING
    content = string_content(cv, names, ptr)
    if "enum" in names or "const" in names:
        values = [names["const"]] if "const" in names else names["enum"]
        if not isinstance(values, list):
            raise SchemaError("enum must be an array", keyword="enum", pointer=ptr)
        lits = alt(*[lit(v) for v in values if isinstance(v, str)])
        content = And((content, lits)) if content is not ANY_STRING_CONTENT else lits
    return content


MAX_UNIQUE_VALUES = 10  # uniqueItems over at most this many distinct item values (2^n states)


def convert_array(cv: Converter, schema: dict[str, Any], ptr: str) -> Node:
    unique: list[list[Node]] | None = None
    if schema.get("uniqueItems") is True and schema.get("maxItems", 2) > 1:
        unique = _unique_value_classes(cv, schema)
        if unique is None:
            cv.unsupported("uniqueItems", ptr, "uniqueItems is enforced only over a finite set of item values (enum, const, boolean, null)")
    prefix: list[Any] = []
    rest: Any = True
    prefix_key, rest_key = cv.tuple_keywords()  # the draft's own (the other spelling constrains nothing)
    if isinstance(schema.get(prefix_key), list):
        prefix = schema[prefix_key]
        rest = schema.get(rest_key, True)
    elif "items" in schema:
        rest = schema["items"]
    lo = schema.get("minItems", 0)
    hi = schema.get("maxItems")
    for kw, v in (("minItems", lo), ("maxItems", hi)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v)):
            raise SchemaError(f"{kw} must be a non-negative integer", keyword=kw, pointer=ptr)
    lo = int(lo)
    hi = None if hi is None else int(hi)
    if hi is not None and lo > hi:
        return NOTHING  # minItems above maxItems: no array validates
    prefix_nodes: list[Node] = []
    limit: RecursionLimit | None = None
    for i, s in enumerate(prefix):
        try:
            prefix_nodes.append(cv.convert(s, f"{ptr}/{prefix_key}/{i}"))
        except RecursionLimit as e:
            limit = e
            break
    k = len(prefix_nodes)
    try:
        rest_node = cv.convert(rest, f"{ptr}/items") if rest is not False and limit is None else NOTHING
    except RecursionLimit as e:
        rest_node, limit = NOTHING, e
    alts: list[Node] = []
    if lo == 0:
        alts.append(cv.empty_arr)
    sep = cv.item_sep
    for c in range(max(lo, 1), (k if hi is None else min(hi, k)) + 1):
        body: list[Node] = []
        for i in range(c):
            if i:
                body.append(sep)
            body.append(prefix_nodes[i])
        alts.append(seq(cv.open_arr, *body, cv.close_arr))
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
            alts.append(seq(cv.open_arr, *head, tail, cv.close_arr))
        else:
            alts.append(seq(cv.open_arr, Join(rest_node, sep, more_lo, more_hi), cv.close_arr))
    if not alts:
        if limit is not None:
            raise limit
        return NOTHING
    node = alt(*alts)
    counted = contains_language(cv, schema, ptr)
    parts = [node] + ([] if counted is None else [counted])
    if unique:  # each value (texts of JSON-equal values together) at most once
        everything = [t for cls in unique for t in cls]
        for cls in unique:
            others = [t for t in everything if t not in cls]
            parts.append(counted_items(cv, alt(*cls), alt(*others), 0, 1))
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def finite_item_values(cv: Converter, schema: dict[str, Any]) -> list[Any] | None:
    """The values every item of ``schema``'s arrays is one of, when ``items`` (through ``$ref``)
    is a finite set of them (``enum`` / ``const`` / ``type`` boolean or null) and there is no
    prefix; None otherwise."""
    if schema.get("prefixItems") or isinstance(schema.get("items"), list):
        return None
    items = schema.get("items")
    seen: set[str] = set()
    while isinstance(items, dict) and "$ref" in items and str(items["$ref"]) not in seen:
        seen.add(str(items["$ref"]))
        items, _ = cv.resolve_ref(items["$ref"], "#", items)
    if not isinstance(items, dict):
        return None
    if "const" in items or isinstance(items.get("enum"), list):
        return [items["const"]] if "const" in items else list(items["enum"])
    types = items.get("type")
    types = types if isinstance(types, list) else [types]
    if items.keys() & CONSTRAINTS == {"type"} and set(types) <= {"boolean", "null"}:
        return ([True, False] if "boolean" in types else []) + ([None] if "null" in types else [])
    return None


def unique_value_classes(values: list[Any]) -> list[list[Any]]:
    """``values`` grouped by JSON equality (``1`` and ``1.0`` together, ``true`` apart from ``1``)."""
    from .json_keywords import json_equal

    classes: list[list[Any]] = []
    for v in values:
        for cls in classes:
            if json_equal(cls[0], v):
                cls.append(v)
                break
        else:
            classes.append([v])
    return classes


def _unique_value_classes(cv: Converter, schema: dict[str, Any]) -> list[list[Node]] | None:
    """The item texts grouped by JSON equality, when the items are a small finite set of values
    (:func:`finite_item_values`, at most :data:`MAX_UNIQUE_VALUES` classes); None otherwise."""
    from .json_scalars import value_literal

    values = finite_item_values(cv, schema)
    if values is None:
        return None
    classes = unique_value_classes(values)
    if len(classes) > MAX_UNIQUE_VALUES:
        return None
    return [[value_literal(cv, v, cv.opt.dumps(v)) for v in cls] for cls in classes]


def contains_language(cv: Converter, schema: dict[str, Any], ptr: str) -> Node | None:
    """Arrays meeting ``contains`` with ``minContains`` / ``maxContains`` (read from 2019-09 on):
    between lo and hi items from the ``contains`` language and the others from its negation
    (or any value when there is no upper bound).  None when there is nothing to enforce."""
    if "contains" not in schema:
        return None
    counted = cv.draft_number() >= 2019
    lo = int(schema.get("minContains", 1)) if counted else 1
    hi = schema.get("maxContains") if counted else None
    hi = None if hi is None else int(hi)
    if lo == 0 and hi is None:
        return None
    if hi is not None and lo > hi:
        return NOTHING
    match = cv.convert(schema["contains"], f"{ptr}/contains")
    other = (
        cv.any_value(cv.opt.product_value_depth + 2)
        if hi is None
        else cv.convert(cv.rewritten(schema, "not-contains", lambda: {"not": schema["contains"]}), f"{ptr}/contains")
    )
    return counted_items(cv, match, other, lo, hi)


def counted_items(cv: Converter, match: Node, other: Node, lo: int, hi: int | None) -> Node:
    """Arrays of ``match`` / ``other`` items with ``lo``..``hi`` of them ``match``."""
    arrays = [seq(cv.open_arr, counted_members(cv, match, other, lo, hi), cv.close_arr)]
    if lo == 0:
        arrays.append(cv.empty_arr)
    return alt(*arrays)


def convert_object(cv: Converter, schema: dict[str, Any], ptr: str, context: tuple[str, ...] = ()) -> Node:
    """An object: the declared (and required) properties in schema order as members, then the
    ``patternProperties`` and ``additionalProperties`` members as one repeatable extra; the
    property counts are checked against what that layout can enforce.

    ``context``: names laid out first, in this order, each with the value this schema gives it
    (its ``properties`` entry, else its patterns' or ``additionalProperties``): the parts of
    an intersection then agree on where every shared name goes.
    """
    out = _object_layout(cv, schema, ptr, context)
    if isinstance(out, tuple):
        out = _counted_objects(cv, schema, ptr, *out)
        if isinstance(out, (And, Minus)) and cv.opt.any_value_depth > cv.opt.product_value_depth:
            with cv.product_operands():  # the counts made a product: its layout with shallower free values
                layout = _object_layout(cv, schema, ptr, context)
                out = layout if not isinstance(layout, tuple) else _counted_objects(cv, schema, ptr, *layout)
    return out


def _object_layout(
    cv: Converter, schema: dict[str, Any], ptr: str, context: tuple[str, ...]
) -> Node | tuple[Node, list[tuple[Node, bool]], list[Node]]:
    """(the layout, its declared members as (IR, required), its undeclared ones), or the
    object language itself where no layout is needed (no object, or ``{}`` alone)."""
    props, required, additional, names_schema = _object_keywords(cv, schema, ptr)
    patterns, wide_patterns = _compile_patterns(cv, schema, ptr)
    order = list(dict.fromkeys([*context, *props, *required]))  # context, declared, then required but undeclared
    items = _declared_members(cv, order, props, set(required), patterns, additional, names_schema, ptr)
    if items is None:
        return NOTHING
    names_content = key_language(cv, names_schema, f"{ptr}/propertyNames")
    names_texts = key_texts(cv, names_schema, f"{ptr}/propertyNames")
    if names_schema is False:
        return cv.empty_obj if not any(r for _, r in items) else NOTHING
    extras = _extra_members(cv, order, patterns, wide_patterns, additional, names_content, ptr, names_texts)
    extra = alt(*extras) if extras else None
    if not items and extra is None:
        node = cv.empty_obj
    else:
        node = seq(cv.open_obj, Members(tuple(items), cv.item_sep, extra), cv.close_obj)
    return node, items, extras


def _object_keywords(cv: Converter, schema: dict[str, Any], ptr: str) -> tuple[dict[str, Any], list[str], Any, Any]:
    """``properties``, ``required``, ``additionalProperties`` (the default per the options) and
    ``propertyNames``, checked."""
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        raise SchemaError("properties must be an object", keyword="properties", pointer=ptr)
    required = schema.get("required", [])
    if required is None or isinstance(required, bool):
        required = []  # draft-3 style booleans carry no constraint at the object level
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise SchemaError("required must be an array of strings", keyword="required", pointer=ptr)
    additional = schema.get("additionalProperties")
    if additional is None:
        # JSON Schema's default (true) where the options keep it, or where minProperties asks
        # for more members than the declared names (the narrowing would leave no object)
        min_p = schema.get("minProperties")
        wanted = isinstance(min_p, int) and not isinstance(min_p, bool) and min_p > len(set(props) | set(required))
        additional = cv.opt.allow_undeclared_properties or wanted
    return props, required, additional, schema.get("propertyNames")


def _compile_patterns(cv: Converter, schema: dict[str, Any], ptr: str) -> tuple[list[tuple[str, Any, Node]], list[Node]]:
    """Each usable ``patternProperties`` entry as (pattern, subschema, narrow IR), and the wide
    IRs (supersets of what each pattern matches, for exclusions)."""
    pattern_props = schema.get("patternProperties", {})
    if not isinstance(pattern_props, dict):
        raise SchemaError("patternProperties must be an object", keyword="patternProperties", pointer=ptr)
    compiled: list[tuple[str, Any, Node]] = []
    wide: list[Node] = []
    for pat, sub in pattern_props.items():
        try:
            re.compile(pat)
            ir = resolve_anchors(parse_regex(pat), pat, search=True)
            wide_ir = resolve_anchors(parse_regex(pat, wide=True), pat, search=True, wide=True)
        except (re.error, RegexError) as e:
            cv.unsupported("patternProperties", f"{ptr}/patternProperties/{escape_pointer(pat)}", f"pattern {pat!r}: {e}")
            continue
        compiled.append((pat, sub, ir))
        wide.append(wide_ir)
    return compiled, wide


def _declared_members(
    cv: Converter,
    order: list[str],
    props: dict[str, Any],
    req: set[str],
    patterns: list[tuple[str, Any, Node]],
    additional: Any,
    names_schema: Any,
    ptr: str,
) -> list[tuple[Node, bool]] | None:
    """(``"name": value`` IR, required) per named property; an optional one whose value is
    impossible is left out; None when a required one is impossible (no object validates)."""
    items: list[tuple[Node, bool]] = []
    for name in order:
        pptr = f"{ptr}/properties/{escape_pointer(name)}"
        subs: list[Any] = []
        if name in props:
            subs.append(props[name])
        for pat, sub, _ir in patterns:
            if re.search(pat, name):
                subs.append(sub)
        if name not in props and not any(re.search(p, name) for p, _, _ in patterns):
            subs.append(additional)
        if names_schema is not None and not cv.validator(names_schema).is_valid(name):
            subs = [False]
        sub_schema: Any = subs[0] if len(subs) == 1 else {"allOf": subs}
        is_req = name in req
        try:
            value = cv.convert(sub_schema, pptr)
        except RecursionLimit:
            if is_req:
                raise
            continue
        if value is NOTHING:
            if is_req:
                return None
            continue
        key = lit(cv.opt.dumps(name))
        items.append((seq(key, cv.key_sep, value), is_req))
    return items


def _extra_members(
    cv: Converter,
    order: list[str],
    patterns: list[tuple[str, Any, Node]],
    wide_patterns: list[Node],
    additional: Any,
    names_content: Node | None,
    ptr: str,
    names_texts: Node | None = None,
) -> list[Node]:
    """``"key": value`` IRs of undeclared properties: one per pattern (keys matching no other
    pattern and no declared name), then ``additionalProperties`` (keys matching none)."""
    declared = declared_names_raw(order)

    def member(keys: Node, excluded: list[Node], sub: Any, sub_ptr: str) -> Node:
        key_lang = key_exclusion(cv, keys, declared + excluded)
        if names_content is not None:
            key_lang = And((key_lang, names_content))
        try:
            val = cv.convert(sub, sub_ptr)
        except RecursionLimit:
            return NOTHING
        key = json_string(key_lang) if names_texts is None else And((json_string(key_lang), names_texts))
        return NOTHING if val is NOTHING else seq(key, cv.key_sep, val)

    extras = [
        member(ir, [o for j, o in enumerate(wide_patterns) if j != i], sub, f"{ptr}/patternProperties/{escape_pointer(pat)}")
        for i, (pat, sub, ir) in enumerate(patterns)
    ]
    if additional is not False:
        extras.append(member(ANY_STRING_CONTENT, wide_patterns, additional, f"{ptr}/additionalProperties"))
    return [e for e in extras if e is not NOTHING]


def _counted_objects(
    cv: Converter, schema: dict[str, Any], ptr: str, node: Node, items: list[tuple[Node, bool]], extras: list[Node]
) -> Node:
    """The objects of layout ``node`` (``items``: its declared members, ``extras``: its
    undeclared ones) that ``minProperties`` / ``maxProperties`` allow: ``node`` itself where
    the layout already meets them; at most one member as a union of one-member objects, at
    least one as the layout minus ``{}`` (neither a product with a member count); otherwise
    ``node`` intersected with objects of lo..hi members.  Raises ``SchemaError`` for a count
    that is not a non-negative integer."""
    min_p, max_p = schema.get("minProperties"), schema.get("maxProperties")
    for kw, v in (("minProperties", min_p), ("maxProperties", max_p)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v)):
            raise SchemaError(f"{kw} must be a non-negative integer", keyword=kw, pointer=ptr)
    lo = 0 if min_p is None else int(min_p)
    hi = None if max_p is None else int(max_p)
    if extras and lo > len(items) + 1 and (hi is None or lo <= hi):
        # extra members may repeat a name (a parser keeps one), so they count once (below): past
        # the declared names plus one, no object is generated (a narrowing), which is not the
        # schema being unsatisfiable
        why = (
            f"minProperties {lo} needs {lo - len(items)} members matched by patternProperties / additionalProperties, "
            "whose names the grammar cannot keep distinct (a repeated name counts once)"
        )
        cv.report.emptied.append(("minProperties", ptr, why))
        return NOTHING
    n_required = sum(1 for _, r in items if r)
    if lo <= n_required and (hi is None or (hi >= len(items) and not extras)):
        return node
    if hi is not None and lo > hi:
        return NOTHING
    if hi is not None and hi <= 1:
        return _one_member_objects(cv, items, extras, lo, hi)
    if lo == 1 and hi is None:
        # one or more extras where nothing is declared (no product), else the layout minus {}
        # (a product with a 3-state automaton)
        if items:
            return Minus(node, cv.empty_obj)
        return seq(cv.open_obj, Join(alt(*extras), cv.item_sep, 1, None), cv.close_obj) if extras else NOTHING
    member = alt(*[m for m, _ in items], *extras)
    counted = [seq(cv.open_obj, Join(member, cv.item_sep, max(lo, 1), hi), cv.close_obj)]
    if lo == 0:
        counted.append(cv.empty_obj)
    counts = alt(*counted)
    if lo > 1 and extras:
        # extra members may repeat a key, which a parser keeps once: toward minProperties they
        # count as one, the declared members (distinct names) one each
        declared = alt(*[m for m, _ in items])
        extra = alt(*extras)
        body = alt(
            counted_members(cv, declared, extra, lo, None),
            And((counted_members(cv, declared, extra, lo - 1, None), _has(cv, extra, declared))),
        )
        counts = And((counts, seq(cv.open_obj, body, cv.close_obj)))
    return And((node, counts))


def _one_member_objects(cv: Converter, items: list[tuple[Node, bool]], extras: list[Node], lo: int, hi: int) -> Node:
    """Objects of ``lo``..``hi`` members, ``hi`` 0 or 1: the required member alone, else any
    one member, or ``{}`` where ``lo`` and ``required`` allow it; the members' names are
    distinct, so the union is exact."""
    required = [m for m, r in items if r]
    if len(required) > 1 or (hi == 0 and (required or lo)):
        return NOTHING
    if hi == 0:
        return cv.empty_obj
    members = required or [m for m, _ in items] + extras
    objects = [seq(cv.open_obj, m, cv.close_obj) for m in members]
    if not required and lo == 0:
        objects.append(cv.empty_obj)
    return alt(*objects)


def _has(cv: Converter, match: Node, other: Node) -> Node:
    """Member lists with at least one ``match`` member."""
    return counted_members(cv, match, other, 1, None)


def counted_members(cv: Converter, match: Node, other: Node, lo: int, hi: int | None) -> Node:
    """Non-empty lists of ``match`` / ``other`` items joined by the item separator, with
    ``lo``..``hi`` of them ``match``: leading ``other`` items, then blocks of one ``match``
    followed by ``other`` items, then the last item."""
    sep = cv.item_sep
    others = rep(seq(other, sep), 0, None)

    def blocks(a: int, b: int | None) -> Node:
        return rep(seq(match, sep, others), a, b)

    bodies = [seq(others, blocks(lo, hi), other)]
    if hi is None or hi >= 1:
        bodies.append(seq(others, blocks(max(lo - 1, 0), None if hi is None else hi - 1), match))
    return alt(*bodies)


def key_exclusion(cv: Converter, lang: Node, excluded: list[Node]) -> Node:
    """``lang`` minus ``excluded`` (property names), one shared node per distinct key so
    that objects converted repeatedly (``$ref``) share one automaton."""
    key = (id(lang), literal_key(excluded))
    got = cv.minus_cache.get(key)
    if got is None:
        got = minus_strings(lang, excluded)
        cv.minus_cache[key] = got
    return got


def declared_names_raw(names: list[str]) -> list[Node]:
    """Code-point IR literals of property names (decoded form)."""
    return [lit(n) for n in names]


def minus_strings(lang: Node, excluded: list[Node]) -> Node:
    return Minus(lang, alt(*excluded)) if excluded else lang


def literal_key(nodes: list[Node]) -> tuple[object, ...]:
    """A structural key for a list of IR nodes: literals by value, others by identity."""
    return tuple(n.data if isinstance(n, Lit) else id(n) for n in nodes)
