"""Whether the branches of a ``oneOf`` provably exclude each other as they are generated (then
the ``oneOf`` is their union, no difference automata needed): disjoint JSON types, disjoint
``const`` / ``enum`` values, required-versus-forbidden properties, and discriminators
(a shared property with different literal values, also a ``pattern`` spelling literals)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .json_keywords import ANNOTATIONS, TYPES, declared_types, json_equal, json_type, values_of
from .json_scalars import types_of

if TYPE_CHECKING:
    from .json_schema import Converter


def disjoint_plan(cv: Converter, branches: list[Any], ptr: str, rest: dict[str, Any] | None = None) -> list[Any] | None:
    """Branches of a ``oneOf`` rewritten so that no value generated from one validates
    another, or None when that cannot be shown.  ``rest``: the keywords beside the ``oneOf``
    (each branch is generated together with them, which can change the JSON types it makes).

    Sound sufficient tests, checked in both directions (what A generates vs what B accepts):
    disjoint JSON types, disjoint const/enum values, a property A requires that B forbids or
    B requires that A (closed) never generates, a property A requires whose value types or
    values B's schema for it rejects, or a shared property whose const/enum values differ (a
    discriminator); a discriminator A does not require is made required in A's generation (a
    narrowing).
    """
    infos = [_plain_ref_target(cv, b, ptr) for b in branches]
    forced: list[set[str]] = [set() for _ in infos]
    for i in range(len(infos)):
        for j in range(len(infos)):
            if i != j and not _excludes(cv, infos[i], infos[j], forced[i], ptr, rest or {}):
                return None
    out = []
    for b, f in zip(branches, forced):
        out.append({"allOf": [b, {"required": sorted(f)}]} if f else b)
    return out


def excludes(cv: Converter, a: Any, b: Any, ptr: str, rest: dict[str, Any]) -> bool:
    """True if no value generated from ``a`` together with ``rest`` validates ``b``, by the
    tests of :func:`disjoint_plan` that narrow nothing (a discriminator ``a`` does not require
    does not count)."""
    force: set[str] = set()
    return _excludes(cv, _plain_ref_target(cv, a, ptr), _plain_ref_target(cv, b, ptr), force, ptr, rest) and not force


def _plain_ref_target(cv: Converter, s: Any, ptr: str) -> Any:
    """``s`` with a bare ``$ref`` (nothing beside it but annotations) followed to its target,
    chains included; anything else as it is."""
    seen: set[str] = set()
    while isinstance(s, dict) and "$ref" in s and not (set(s) - ANNOTATIONS - {"$ref"}) and s["$ref"] not in seen:
        seen.add(s["$ref"])
        s, _ = cv.resolve_ref(s["$ref"], ptr, s)
    return s


def _excludes(cv: Converter, a: Any, b: Any, force: set[str], ptr: str, rest: dict[str, Any]) -> bool:
    """True if no value generated from ``a`` together with ``rest`` (with ``force`` made
    required) validates ``b``.  The object tests read ``a``'s own keywords: a generated value
    validates ``a``, so what ``a`` forbids it lacks; they apply only where every generated
    value is an object (keywords such as ``required`` hold vacuously for other types)."""
    if b is False or a is False:
        return True
    if not isinstance(a, dict) or not isinstance(b, dict):
        return False
    if cv.draft_number() < 2019 and ("$ref" in a or "$ref" in b):
        return False  # a $ref hides its siblings there: neither's other keywords can be read as written
    gen_types = _generated_in_context(cv, a, rest)
    sem_types = declared_types(b)
    if gen_types is not None and not (gen_types & sem_types):
        return True
    va, vb = discriminator_values(a), discriminator_values(b)
    if va is not None and vb is not None and not any(json_equal(x, y) for x in va for y in vb):
        return True
    if gen_types is None or gen_types - {"object"}:
        return False
    req_a = set(a.get("required") or []) | force
    props_a = a.get("properties") or {}
    props_b = b.get("properties") or {}
    closed_a = a.get("additionalProperties") is False and not a.get("patternProperties")
    closed_b = b.get("additionalProperties") is False and not b.get("patternProperties")
    for k in req_a:
        if (closed_b and k not in props_b) or props_b.get(k) is False:
            return True
    for k in b.get("required") or []:  # b requires what a never generates
        if (closed_a and k not in props_a) or props_a.get(k) is False:
            return True
    for k in sorted(req_a & set(props_a) & set(props_b)):
        if _values_exclude(cv, _plain_ref_target(cv, props_a[k], ptr), _plain_ref_target(cv, props_b[k], ptr)):
            return True
    for name in sorted(set(props_a) & set(props_b)):
        xa, xb = discriminator_values(props_a[name]), discriminator_values(props_b[name])
        if xa is not None and xb is not None and not any(json_equal(x, y) for x in xa for y in xb):
            force.add(name)  # generate the discriminator even where a does not require it
            return True
    return False


def _values_exclude(cv: Converter, a: Any, b: Any) -> bool:
    """True if no value valid under ``a`` is valid under ``b``, by their ``type`` and
    ``const`` / ``enum`` keywords alone (what holds whatever else generates the value)."""
    if a is False or b is False:
        return True
    if not isinstance(a, dict) or not isinstance(b, dict):
        return False
    if cv.draft_number() < 2019 and ("$ref" in a or "$ref" in b):
        return False  # a $ref hides its siblings (`type` included) there
    tb = declared_types(b)
    if not (declared_types(a) & tb):
        return True
    va, vb = discriminator_values(a), discriminator_values(b)
    if va is None:
        return False
    if vb is not None:
        return not any(json_equal(x, y) for x in va for y in vb)
    return not any(json_type(v) in tb for v in va)


_LITERAL_PATTERN = re.compile(r"\^(?:([\w\- ]+)|\(((?:[\w\- ]+\|)*[\w\- ]+)\))\$")
"""A fully anchored literal or parenthesized alternation of literals (letters, digits, ``_``,
``-``, space: no regex syntax), e.g. ``^SEQ$`` or ``^(PREC|PREC_LEFT)$``."""


def discriminator_values(s: Any) -> list[Any] | None:
    """A finite list holding every value valid under ``s``, or None when not known: its
    ``const`` / ``enum``, or, for a schema of ``type: string`` alone with no ``$ref`` beside it,
    the strings a pattern of literals matches (``^SEQ$``, ``^(PREC|PREC_LEFT)$``: how many
    schemas tag the branches of a ``oneOf``): each literal, and each with a final newline, which
    Python's ``$`` (``jsonschema``'s ``re.search``) also accepts.  Other keywords only narrow
    the values, so the list is a superset, which is what a disjointness test needs."""
    got = values_of(s)
    if got is not None or not isinstance(s, dict) or "$ref" in s:
        return got
    pattern = s.get("pattern")
    if s.get("type") not in ("string", ["string"]) or not isinstance(pattern, str):
        return None
    m = _LITERAL_PATTERN.fullmatch(pattern)
    if m is None:
        return None
    literals = [m.group(1)] if m.group(1) is not None else m.group(2).split("|")
    return [v for lit in literals for v in (lit, lit + "\n")]


def _generated_in_context(cv: Converter, a: dict[str, Any], rest: dict[str, Any]) -> set[str] | None:
    """JSON types generated for ``a`` together with ``rest`` (the keywords beside the
    ``oneOf``), or None when unknown.  A ``type`` in either bounds them whatever else is there
    (what is generated validates both); without one, the types are inferred from both's
    keywords together (``rest`` may make ``a`` generate strings, for which its object keywords
    hold vacuously)."""
    rest_typed = "type" in rest and not (cv.draft_number() < 2019 and "$ref" in rest)
    if "type" not in a and not rest_typed:
        return _generated_types(cv, {**rest, **a})
    types = declared_types(a) & (declared_types(rest) if rest_typed else set(TYPES))
    if "const" in a or "enum" in a:
        of_values = _generated_types(cv, {k: a[k] for k in ("const", "enum") if k in a})
        if of_values is not None:
            types &= of_values
    return types


def _generated_types(cv: Converter, s: dict[str, Any]) -> set[str] | None:
    """JSON types our grammar generates for ``s`` (None: unknown, e.g. nested applicators)."""
    if "const" in s or "enum" in s:
        vals = values_of(s)
        return (
            None if vals is None else {json_type(v) for v in vals} | ({"number"} if any(json_type(v) == "integer" for v in vals) else set())
        )
    if any(k in s for k in ("anyOf", "oneOf", "allOf", "$ref", "$dynamicRef", "$recursiveRef", "if", "dependentSchemas", "dependencies")):
        return None  # each may bring its own types in (`not` only takes values away)
    types = types_of(cv, s)
    if "integer" in types or "number" in types:
        types = types | {"integer", "number"}
    return types
