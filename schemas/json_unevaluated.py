"""``unevaluatedProperties`` / ``unevaluatedItems``.

Which properties (items) count as evaluated depends on which subschemas of ``anyOf`` /
``oneOf`` / ``if`` the instance passes; such a schema is split into one case per set of
branches an instance can pass (those branches required; for ``oneOf`` and ``if`` the others
negated, while an ``anyOf`` needs no negation: :func:`_any_of_picks`), which fixes the
evaluated set of each case.  When the only in-place applicators that declare properties
(items) are ``allOf`` and ``$ref`` — which always apply, since the instance must pass them —
the evaluated set is fixed by the schema: the declared property names and ``patternProperties`` patterns (the longest
``prefixItems``), or everything once an ``additionalProperties`` / ``items`` /
``unevaluated*`` among them evaluates the rest.  Then ``unevaluatedProperties: U`` is exactly
``additionalProperties: U`` beside those names and patterns (``unevaluatedItems: U`` is
``items: U`` after that prefix), which the converter compiles as usual.  An item a
``contains: C`` matches is evaluated too (2020-12; in 2019-09 as ``jsonschema`` reads it), so there
``unevaluatedItems: U`` is ``items: {anyOf: [C, U]}`` after the prefix.  Which keywords evaluate
items follows the draft (:func:`_evaluated_prefix`).  A branch inside an ``allOf`` part (or its ``$ref`` target) is moved
up beside the keyword and split the same way.  JSON Schema 2020-12 §11 (Core, "Keywords for
Applying Subschemas to Child Instances").
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from .json_disjoint import excludes
from .json_refs import dynamic_target, followed_scope

if TYPE_CHECKING:
    from .json_schema import Converter

_DYNAMIC = ("anyOf", "oneOf", "if", "then", "else", "dependentSchemas", "dependencies", "$dynamicRef", "$recursiveRef")
_IN_PLACE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas")
_PROPERTY_WORDS = ("properties", "patternProperties", "additionalProperties", "unevaluatedProperties")
_ITEM_WORDS = ("prefixItems", "items", "additionalItems", "contains", "unevaluatedItems")


class _Dynamic(Exception):
    """The evaluated set depends on which branch an instance passes."""


def rewrite_static_unevaluated(cv: Converter) -> Any:
    """A copy of ``cv.root`` where every subschema whose ``unevaluatedProperties`` /
    ``unevaluatedItems`` has a static evaluated set carries the equivalent ``allOf`` branch
    instead (:func:`static_unevaluated`), each computed in its own scope before anything merges
    it with its neighbours; JSON pointers into the root keep their meaning.  Subschemas whose
    set is dynamic keep the keyword (the converter refuses them if it meets them)."""
    rewrites = []
    for sub, ptr in cv.subschemas():
        if isinstance(sub, dict) and any(sub.get(k, True) is not True for k in ("unevaluatedProperties", "unevaluatedItems")):
            static = static_unevaluated(cv, sub, ptr)
            if static is not None:
                rewrites.append((sub, static))
    if not rewrites:
        return cv.root
    memo: dict[int, Any] = {}
    root = copy.deepcopy(cv.root, memo)
    for sub, static in rewrites:
        target = memo[id(sub)]
        replacement = copy.deepcopy(static, memo)  # its values are the copies of the root's
        target.clear()
        target.update(replacement)
    return root


def static_unevaluated(cv: Converter, schema: dict[str, Any], ptr: str, scope: tuple[str, ...] | None = None) -> dict[str, Any] | None:
    """``schema`` with its ``unevaluatedProperties`` / ``unevaluatedItems`` rewritten into
    ``additionalProperties`` / ``items`` of an ``allOf`` branch, or None when an evaluated set
    is not static (the caller refuses it).  ``scope``: the dynamic scope ``schema`` is
    evaluated in (the converter's, as it reaches ``schema``), which fixes the target of each
    ``$dynamicRef`` / ``$recursiveRef``; None where it is not known yet (the rewrite before
    conversion), where such a reference makes the set dynamic.  Raises ``SchemaError`` for a
    reference that does not resolve."""
    rest = {k: v for k, v in schema.items() if k not in ("unevaluatedProperties", "unevaluatedItems")}
    extra: list[Any] = []
    try:
        if "unevaluatedProperties" in schema and schema["unevaluatedProperties"] is not True:
            names, patterns, everything = _evaluated(cv, rest, ptr, _PROPERTY_WORDS, set(), scope)
            if not everything:
                branch: dict[str, Any] = {"additionalProperties": schema["unevaluatedProperties"]}
                if names:
                    branch["properties"] = {n: True for n in sorted(names)}
                if patterns:
                    branch["patternProperties"] = {p: True for p in patterns}
                extra.append(branch)
        if "unevaluatedItems" in schema and schema["unevaluatedItems"] is not True:
            prefix, contains, everything = _evaluated(cv, rest, ptr, _ITEM_WORDS, set(), scope)
            if not everything:  # an item a contains matches is evaluated: it meets that or the keyword
                after = {"anyOf": [*contains, schema["unevaluatedItems"]]} if contains else schema["unevaluatedItems"]
                prefix_key, rest_key = cv.tuple_keywords()
                extra.append({prefix_key: [True] * len(prefix), rest_key: after})
    except _Dynamic:
        return _by_cases(cv, schema, ptr, scope)
    if not extra:
        return rest
    return {**rest, "allOf": [*rest.get("allOf", []), *extra]} if isinstance(rest.get("allOf", []), list) else None


MAX_ANY_OF_CASES = 256  # sets of anyOf branches that declare what unevaluated* reads, each a case of its own


def _by_cases(cv: Converter, schema: dict[str, Any], ptr: str, scope: tuple[str, ...] | None) -> dict[str, Any] | None:
    """``schema`` as the union of one case per set of its ``anyOf`` / ``oneOf`` / ``if``
    branches an instance passes, each case's evaluated set then static; None when a case is
    still dynamic or an ``anyOf`` needs more than :data:`MAX_ANY_OF_CASES` cases
    (:func:`_any_of_picks`).  A ``oneOf`` case requires its branch and negates the others, an
    ``if`` case its condition or the condition's negation.  The schema's other keywords stay (its
    ``$defs`` keep their pointers); the split keyword's cases imply it."""
    key = next((k for k in ("anyOf", "oneOf", "if") if k in schema), None)
    if key is None:
        hoisted = _hoisted(cv, schema, ptr)
        return None if hoisted is None else _by_cases(cv, hoisted, ptr, scope)
    rest = {k: v for k, v in schema.items() if k != key and not (key == "if" and k in ("then", "else"))}
    base = rest.get("allOf", [])
    if not isinstance(base, list):
        return None
    picks: list[list[Any]] | None = None
    branches = schema[key]
    if key == "if":
        picks = [[schema["if"], schema.get("then", True)], [{"not": schema["if"]}, schema.get("else", True)]]
    elif not isinstance(branches, list) or not branches:
        return None
    elif key == "oneOf":
        picks = [[b if i == j else {"not": b} for i, b in enumerate(branches)] for j in range(len(branches))]
    else:
        beside = {k: v for k, v in rest.items() if k not in ("unevaluatedProperties", "unevaluatedItems")}
        picks = _any_of_picks(cv, schema, branches, ptr, beside)
    if picks is None:
        return None
    cases = []
    for pick in picks:
        case = static_unevaluated(cv, {**rest, "allOf": [*base, *pick]}, ptr, scope)
        if case is None:
            return None
        cases.append(case)
    outer = {k: v for k, v in schema.items() if k not in ("unevaluatedProperties", "unevaluatedItems", "then", "else", "if")}
    return {**outer, "anyOf": cases}


def _any_of_picks(cv: Converter, schema: dict[str, Any], branches: list[Any], ptr: str, rest: dict[str, Any]) -> list[list[Any]] | None:
    """The cases of ``anyOf: branches`` beside ``schema``'s ``unevaluated*``: one per non-empty
    set D of the branches that declare what it reads, requiring the branches of D and
    evaluating what they declare, and, where some branch declares none of it, one requiring one
    of those others and evaluating what neither declares; None past :data:`MAX_ANY_OF_CASES`.

    No case negates a branch.  Whether a property (item) must meet ``unevaluated*`` only
    weakens as more branches pass and evaluate it, so an instance is valid exactly when some
    set D of branches it passes makes it valid with D's evaluated set: the set of every
    declaring branch it passes is one, and any D it passes evaluates no more than that set.
    Sets holding two branches that provably exclude each other (:func:`excludes`, e.g. two
    tags of a discriminated union) are left out: no instance passes both.  Branches that
    declare nothing never change the evaluated set, so they are never split.  JSON Schema
    2020-12 §11.2-§11.3 (annotations collected from the passing subschemas)."""
    words = [w for key, w in (("unevaluatedProperties", _PROPERTY_WORDS), ("unevaluatedItems", _ITEM_WORDS)) if key in schema]
    declaring = [b for b in branches if any(_mentions(cv, b, ptr, w, set()) for w in words)]
    others = [b for b in branches if not any(b is d for d in declaring)]
    compatible = [
        {j for j, c in enumerate(declaring) if j != i and not excludes(cv, b, c, ptr, rest) and not excludes(cv, c, b, ptr, rest)}
        for i, b in enumerate(declaring)
    ]
    sets: list[list[int]] = []

    def grow(chosen: list[int], allowed: set[int]) -> bool:
        for j in sorted(allowed):
            sets.append([*chosen, j])
            if len(sets) > MAX_ANY_OF_CASES or not grow([*chosen, j], {k for k in allowed & compatible[j] if k > j}):
                return False
        return True

    if not grow([], set(range(len(declaring)))) or len(sets) + bool(others) > MAX_ANY_OF_CASES:
        return None
    picks = [[declaring[j] for j in chosen] for chosen in sets]
    if others:
        picks.append([{"anyOf": others}])
    return picks


def _hoisted(cv: Converter, schema: dict[str, Any], ptr: str) -> dict[str, Any] | None:
    """``schema`` with the ``anyOf`` / ``oneOf`` / ``if`` of one of its ``allOf`` parts (inline,
    or a ``$ref`` whose target has the base URI ``schema`` has, so its text means the same here)
    moved up to it, the part keeping the rest: the same instances and the same evaluated sets,
    as an ``allOf`` part always applies; None when no part has one (or the part has its own
    ``unevaluated*``, whose scope it is)."""
    parts = schema.get("allOf")
    if not isinstance(parts, list):
        return None
    refs = cv.refs()
    for i, part in enumerate(parts):
        target = part
        if isinstance(part, dict) and set(part) == {"$ref"}:
            got, at = cv.resolve_ref(part["$ref"], ptr + f"/allOf/{i}/$ref", part)
            if refs.base_for(got, at) == refs.base_for(schema, ptr):
                target = got
        if not isinstance(target, dict) or cv.opaque(target) or any(k in target for k in ("unevaluatedProperties", "unevaluatedItems")):
            continue
        key = next((k for k in ("anyOf", "oneOf", "if") if k in target), None)
        if key is None:
            continue
        moved = (key, "then", "else") if key == "if" else (key,)
        rest = {k: v for k, v in target.items() if k not in moved}
        return {**{k: v for k, v in schema.items() if k != "allOf"}, **{k: target[k] for k in moved if k in target},
                "allOf": [*parts[:i], rest, *parts[i + 1 :]]}  # fmt: skip
    return None


def _evaluated(
    cv: Converter, s: Any, ptr: str, words: tuple[str, ...], seen: set[int], scope: tuple[str, ...] | None
) -> tuple[set[Any], list[Any], bool]:
    """(property names, or item positions; property patterns, or the ``contains`` schemas
    whose matching items count as evaluated (2020-12); whether everything is evaluated) by
    ``s`` and the ``allOf`` / ``$ref`` / dynamic-reference subschemas it always applies (in
    dynamic scope ``scope``).  Raises :class:`_Dynamic` when a conditional applicator declares
    any of ``words``, and for the draft's dynamic reference where ``scope`` is None."""
    if not isinstance(s, dict) or id(s) in seen:
        return set(), [], False
    seen = seen | {id(s)}
    own = cv.dynamic_ref_keyword()
    for key in _DYNAMIC:  # (another draft's dynamic reference is an annotation)
        if key not in s:
            continue
        if (key == own and scope is None) or (not key.startswith("$") and _mentions(cv, s[key], ptr, words, set())):
            raise _Dynamic(key)
    names: set[Any] = set()
    patterns: list[Any] = []
    if words is _PROPERTY_WORDS:
        if "additionalProperties" in s or "unevaluatedProperties" in s:
            return set(), [], True
        names |= set(s.get("properties") or {})
        patterns += list(s.get("patternProperties") or {})
    else:
        if "contains" in s:
            patterns.append(s["contains"])  # it evaluates the items that match it (in 2019-09 too, as jsonschema reads it)
        prefix = _evaluated_prefix(cv, s)
        if prefix is None:
            return set(), [], True
        names |= set(range(prefix))
    subs = [(sub, scope) for sub in s.get("allOf") or []] if isinstance(s.get("allOf"), list) else []
    if "$ref" in s:
        target = cv.resolve_ref(s["$ref"], ptr + "/$ref", s)[0]
        subs.append((target, None if scope is None else followed_scope(cv, s, ptr + "/$ref", s["$ref"], scope)))
    if own in s and scope is not None:
        dynamic, _at, inner = dynamic_target(cv, s, ptr, scope)
        subs.append((dynamic, inner))
    for sub, sub_scope in subs:
        n, p, everything = _evaluated(cv, sub, ptr, words, seen, sub_scope)
        if everything:
            return set(), [], True
        names |= n
        patterns += [x for x in p if not any(x is y or x == y for y in patterns)]
    return names, patterns, False


def _evaluated_prefix(cv: Converter, s: dict[str, Any]) -> int | None:
    """How many leading items ``s``'s own item keywords evaluate, None for all of them, as
    ``jsonschema`` reads each draft: in 2020-12 ``items`` (any form) evaluates every item and
    ``prefixItems`` its prefix (``additionalItems`` is no keyword there); in 2019-09 ``items``
    as a list evaluates its prefix, or every item beside ``additionalItems``, and as a schema
    every item (``prefixItems`` is no keyword there, ``additionalItems`` alone evaluates
    nothing); a nested ``unevaluatedItems`` evaluates every item it leaves (``s`` passes)."""
    if "unevaluatedItems" in s:
        return None
    prefix_key, rest_key = cv.tuple_keywords()
    prefix = s.get(prefix_key)
    if isinstance(prefix, list):
        return None if rest_key in s else len(prefix)
    return None if "items" in s else 0  # items as one schema (or, in 2020-12, beside no prefix) evaluates all


def _mentions(cv: Converter, value: Any, ptr: str, words: tuple[str, ...], seen: set[int]) -> bool:
    """Whether ``value`` or a schema it applies in place (``allOf`` / ``anyOf`` / ``oneOf`` /
    ``not`` / ``if`` / ``then`` / ``else`` / ``dependentSchemas`` / local ``$ref``, at the same
    instance location) uses one of ``words``."""
    if isinstance(value, list):
        return any(_mentions(cv, v, ptr, words, seen) for v in value)
    if not isinstance(value, dict) or id(value) in seen:
        return False
    seen.add(id(value))
    if any(w in value for w in words) or "$dynamicRef" in value or "$recursiveRef" in value:
        return True  # (a dynamic reference's target is known in the case's scope)
    if "$ref" in value and isinstance(value["$ref"], str):
        if _mentions(cv, cv.resolve_ref(value["$ref"], ptr + "/$ref", value)[0], ptr, words, seen):
            return True
    for key in _IN_PLACE:
        sub = value.get(key)
        if key == "dependentSchemas" and isinstance(sub, dict):
            sub = list(sub.values())
        if sub is not None and _mentions(cv, sub, ptr, words, seen):
            return True
    return False
