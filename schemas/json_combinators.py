"""``allOf`` (merged keyword by keyword, else intersected), ``anyOf``, ``oneOf`` (branches that
provably exclude each other as they are; overlapping ones each minus the others), and
``if`` / ``then`` / ``else`` and the dependency keywords as unions."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
from typing import TYPE_CHECKING, Any

from .errors import SchemaError
from .ir import NOTHING, And, Node, alt
from .json_disjoint import disjoint_plan
from .json_keywords import ANNOTATIONS, CONSTRAINTS, TYPES, RecursionLimit, declared_types, json_equal, merge_into
from .json_negation import NotExpressible, complement

if TYPE_CHECKING:
    from .json_schema import Converter


def convert_all_of(cv: Converter, schema: dict[str, Any], ptr: str) -> Node:
    items = schema["allOf"]
    if not isinstance(items, list) or not items:
        raise SchemaError("allOf must be a non-empty array", keyword="allOf", pointer=ptr)
    if cv.tracks_dynamic_scope:  # each part keeps its identity, so a reference in it keeps its base URI
        rest = cv.rewritten(schema, "allOf-rest", lambda: _rest(schema))
        parts = [rest, *items] if any(k in CONSTRAINTS for k in rest) else list(items)
        return _intersect(cv, parts[0], parts[1:], ptr, [])
    # merged once per schema object: the merge builds new schemas, and a schema with one
    # identity hits the conversion memo wherever the same object is reached again (a ``$ref``
    # target under many ``oneOf`` branches would otherwise be merged and converted anew each time)
    merged, residue, inlined = cv.rewritten(schema, "allOf-merged", lambda: _merged(cv, schema, items, ptr))
    return _intersect(cv, merged, residue, ptr, list(inlined))


def _rest(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k != "allOf"}


def _merged(cv: Converter, schema: dict[str, Any], items: list[Any], ptr: str) -> tuple[Any, list[Any], tuple[str, ...]]:
    rest = _rest(schema)
    parts: list[Any] = [rest] if any(k in CONSTRAINTS for k in rest) else []
    parts.extend(items)
    inlined: list[str] = []
    merged, residue = merge_all(cv, parts, ptr + "/allOf", inlined)
    return merged, residue, tuple(inlined)


def _intersect(cv: Converter, merged: Any, residue: list[Any], ptr: str, inlined: list[str]) -> Node:
    if not residue:
        with cv.unrolling(inlined, ptr):  # a $ref merged in place recurses as one converted would
            return cv.convert(merged, ptr)
    # intersected branches each constrain only what they declare: inside them undeclared
    # properties must be allowed, or a property declared by one branch would be rejected
    # by the others (the intersection itself still honours additionalProperties: false)
    # and they lay out the property names they share in one order, or an object whose keys
    # one part puts first and another among its extras would be in neither's language
    saved, saved_order = cv.opt, cv.key_order
    cv.opt = dataclasses.replace(saved, allow_undeclared_properties=True)
    # (an intersection inside one keeps its order: the walk below went through it)
    cv.key_order = saved_order or member_order(cv, [merged, *residue], ptr)
    try:
        spread = None if cv.distributing >= MAX_DISTRIBUTED_DEPTH else _distributed(cv, merged, residue, ptr)
        if spread is not None:
            # (the $refs a complement looked through are not counted as unrolled here, as
            # convert_not counts them: the merged part holds them too, unnegated; a negation
            # inside an alternative is bounded by convert_not, the spreading by its depth)
            cv.distributing += 1
            try:
                with cv.unrolling(inlined, ptr):
                    return cv.convert_rewritten(spread, ptr, "allOf")
            finally:
                cv.distributing -= 1
        with cv.unrolling(inlined, ptr), cv.product_operands() if residue else contextlib.nullcontext():
            nodes = [cv.convert(merged, ptr)]
            nodes += [cv.convert(r, ptr + "/allOf") for r in residue]
    finally:
        cv.opt, cv.key_order = saved, saved_order
    return And(tuple(nodes))


MAX_DISTRIBUTED = 64  # alternatives an intersection may be spread into instead of a product
# intersections spread inside an alternative of another (a part whose complement is itself, such
# as a negated enum, would otherwise be spread again and again)
MAX_DISTRIBUTED_DEPTH = 2


def _distributed(cv: Converter, merged: Any, residue: list[Any], ptr: str) -> Any | None:
    """An intersection whose unmerged parts each hold one ``anyOf``, ``not`` or conditional
    (``if`` / ``then`` / ``else``, dependencies), as the union of its merged part, each part's
    other keywords and one alternative of each part: ``A ∧ (B1 ∨ B2) = (A ∧ B1) ∨ (A ∧ B2)``,
    a ``not`` read as the union of its violations (:func:`.json_negation.complement`), a
    conditional as its two cases.  Each alternative then merges keyword by keyword instead of a
    product automaton being built over the parts.  None when some part is not such a union, a
    complement cannot be stated, a negated ``$ref`` is being unrolled on this path, or more
    than ``MAX_DISTRIBUTED`` alternatives remain."""
    if not isinstance(merged, dict):
        return None
    choices: list[list[Any]] = []
    fixed: list[Any] = []  # what each part holds beside its union, in every alternative
    for part in residue:
        keys = set(part) - ANNOTATIONS if isinstance(part, dict) else set()
        if keys & {"if", "dependentRequired", "dependentSchemas", "dependencies"} and not keys & {"anyOf", "not"}:
            cond = {k: part[k] for k in keys & _CONDITIONAL}
            choices.extend(list(u["anyOf"]) for u in _conditional_parts(cond).get("allOf", []))  # two cases each
            union_keys = _CONDITIONAL
        elif "anyOf" in keys and "not" not in keys and isinstance(part["anyOf"], list) and part["anyOf"]:
            choices.append(list(part["anyOf"]))
            union_keys = frozenset({"anyOf"})
        elif "not" in keys and "anyOf" not in keys:
            cv.resolved_refs = []
            try:
                alts = complement(cv, part["not"], ptr + "/allOf")
            except (NotExpressible, SchemaError):
                return None  # the product reports it as it always has
            if not alts:
                return {"anyOf": [False]}  # the negated part holds for every value: nothing
            if any(cv.ref_depth.get(r, 0) for r in cv.resolved_refs):
                return None  # a recursive $ref negated while unrolled: left to the product
            choices.append(alts)
            union_keys = frozenset({"not"})
        else:
            return None
        own = {k: part[k] for k in keys - union_keys}
        if own:
            fixed.append(own)
    combos: list[tuple[Any, ...]] = []
    for combo in itertools.islice(itertools.product(*choices), MAX_DISTRIBUTED_TRIED):
        if _consistent([merged, *fixed, *combo]):
            combos.append(combo)
            if len(combos) > MAX_DISTRIBUTED:
                return None
    else:
        if math.prod(len(c) for c in choices) > MAX_DISTRIBUTED_TRIED:
            return None
    return {"anyOf": [{"allOf": [merged, *fixed, *combo]} for combo in combos] or [False]}


_CONDITIONAL = frozenset({"if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies"})
MAX_DISTRIBUTED_TRIED = 4096  # alternatives looked at for those that contradict themselves


def _consistent(parts: list[Any]) -> bool:
    """False when ``parts`` (schemas of one value) validate nothing together, by their
    ``type``s alone or, where those allow only objects, a name one requires that another
    forbids (``properties: {name: false}``): such an alternative of :func:`_distributed` is left
    out (``required`` holds for every value that is not an object, so it rules out nothing
    where another type is allowed)."""
    required: set[str] = set()
    forbidden: set[str] = set()
    types = set(TYPES)
    for p in parts:
        if p is False:
            return False
        if not isinstance(p, dict):
            continue
        if "type" in p:
            types &= declared_types(p)
        if isinstance(p.get("required"), list):
            required.update(r for r in p["required"] if isinstance(r, str))
        if isinstance(p.get("properties"), dict):
            forbidden.update(k for k, v in p["properties"].items() if v is False)
    return bool(types) and not (types <= {"object"} and required & forbidden)


MAX_ORDERED_NAMES = 64  # names past these are laid out by each part as before (a narrowing)


def member_order(cv: Converter, parts: list[Any], ptr: str) -> tuple[str, ...]:
    """The property names that ``parts`` (schemas of one instance location) declare or
    require, through ``allOf`` / ``anyOf`` / ``oneOf`` / ``then`` / ``else`` /
    ``dependentSchemas`` and ``$ref`` inside the document: every ``properties`` name in the order met, then
    every ``required`` one; at most ``MAX_ORDERED_NAMES``."""
    declared: dict[str, None] = {}
    required: dict[str, None] = {}
    stack = list(reversed(parts))
    seen: set[int] = set()
    while stack and len(seen) < 256:
        s = stack.pop()
        if not isinstance(s, dict) or id(s) in seen:
            continue
        seen.add(id(s))
        if isinstance(s.get("properties"), dict):
            declared.update(dict.fromkeys(s["properties"]))
        if isinstance(s.get("required"), list):
            required.update(dict.fromkeys(r for r in s["required"] if isinstance(r, str)))
        inner: list[Any] = []
        for key in ("$ref", "$dynamicRef", "$recursiveRef"):  # (a dynamic reference's initial target: a hint for the order)
            if isinstance(s.get(key), str):
                try:
                    inner.append(cv.resolve_ref(s[key], ptr, s)[0])
                except SchemaError:
                    pass
        for key in ("allOf", "anyOf", "oneOf"):
            if isinstance(s.get(key), list):
                inner.extend(s[key])
        inner.extend(s.get(key) for key in ("then", "else"))
        for key in ("dependentSchemas", "dependencies"):
            if isinstance(s.get(key), dict):
                inner.extend(v for v in s[key].values() if isinstance(v, dict))
        stack.extend(reversed(inner))
    return tuple(list(dict.fromkeys([*declared, *required]))[:MAX_ORDERED_NAMES])


def merge_all(
    cv: Converter, parts: list[Any], ptr: str, inlined: list[str] | None = None, merging: frozenset[str] = frozenset()
) -> tuple[Any, list[Any]]:
    """Merge schemas keyword by keyword; what cannot be merged is returned as residue
    (converted separately and intersected, which is always sound).  ``inlined`` collects the
    pointers of the ``$ref`` targets merged in place; ``merging``: those being merged by the
    calls above, whose ``$ref`` stays residue here (an ``allOf`` that reaches itself through
    references is converted, and its recursion bounded, rather than merged without end)."""
    merged: dict[str, Any] = {}
    residue: list[Any] = []
    for part in parts:
        seen: set[str] = set()
        active = merging
        while isinstance(part, dict) and "$ref" in part and part["$ref"] not in seen:
            seen.add(part["$ref"])
            target, target_ptr = cv.resolve_ref(part["$ref"], ptr, part)
            if target_ptr in active:
                break  # the residue check below keeps the reference
            active = active | {target_ptr}
            if inlined is not None:
                inlined.append(target_ptr)
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
        if isinstance(part, dict) and cv.opaque(part):
            residue.append(part)  # converts only as itself (Converter.in_scope / prebuilt): never merged
            continue
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
            sub, sub_res = merge_all(cv, [inner_rest, *part["allOf"]], ptr, inlined, active)
            residue.extend(sub_res)
            if sub is False:
                return False, []
            part = sub
        ok = merge_into(merged, part)
        if not ok:
            residue.append(part)
    return merged, residue


def convert_union(cv: Converter, schema: dict[str, Any], ptr: str) -> Node:
    key = "anyOf" if "anyOf" in schema else "oneOf"
    branches = schema[key]
    if not isinstance(branches, list) or not branches:
        raise SchemaError(f"{key} must be a non-empty array", keyword=key, pointer=ptr)
    rest = {k: v for k, v in schema.items() if k != key}
    if key == "oneOf" and len(branches) > 1:
        plan = disjoint_plan(cv, branches, ptr, rest)
        if plan is None:
            factored = cv.rewritten(schema, "oneOf-factored", lambda: factor_one_of(cv, schema, ptr))
            if factored is not None:
                return cv.convert_rewritten(factored, ptr, "oneOf")
            plan = _exclusive_branches(cv, schema, branches, ptr)
        branches = plan
    has_rest = any(k in CONSTRAINTS for k in rest)
    nodes: list[Node] = []
    last_limit: RecursionLimit | None = None
    for i, b in enumerate(branches):
        bptr = f"{ptr}/{key}/{i}"
        try:
            if has_rest:
                nodes.append(cv.convert({"allOf": [rest, b]}, bptr))
            else:
                nodes.append(cv.convert(b, bptr))
        except RecursionLimit as e:
            last_limit = e
    if not nodes and last_limit is not None:
        raise last_limit
    return alt(*nodes) if nodes else NOTHING


def factor_one_of(cv: Converter, schema: dict[str, Any], ptr: str) -> dict[str, Any] | None:
    """``schema`` with the ``allOf`` parts that every ``oneOf`` branch holds taken out of the
    ``oneOf`` (``oneOf [C ∧ X1, C ∧ X2, …]`` = ``C ∧ oneOf [X1, X2, …]``: where C fails no branch
    holds, where it holds exactly one branch does when exactly one X does), or None when no part
    is common.  A branch's parts: its ``allOf`` items and its other keywords as one more part, a
    bare same-document ``$ref`` followed to its target first.  The negations of the
    overlapping branches then leave out what they share (a product of object automata each
    otherwise)."""
    if cv.tracks_dynamic_scope or any(k in schema for k in ("$id", "id")):
        return None  # a part moved out of its resource would resolve its references elsewhere
    parts: list[list[Any]] = []
    for b in schema["oneOf"]:
        got = _conjuncts(cv, b, ptr)
        if got is None:
            return None
        parts.append(got)
    common = [c for c in parts[0] if all(any(json_equal(c, x) for x in p) for p in parts[1:])]
    if not common:
        return None
    residuals: list[Any] = []
    for p in parts:
        left = [x for x in p if not any(json_equal(x, c) for c in common)]
        residuals.append(True if not left else left[0] if len(left) == 1 else {"allOf": left})
    rest = {k: v for k, v in schema.items() if k != "oneOf"}
    return {**rest, "allOf": [*common, {"oneOf": residuals}, *([{"allOf": rest["allOf"]}] if "allOf" in rest else [])]}


def _conjuncts(cv: Converter, b: Any, ptr: str) -> list[Any] | None:
    """The schemas whose conjunction is branch ``b`` (see :func:`factor_one_of`), or None
    when not read that way (a reference to another document or resource, a ``$ref`` with
    siblings before 2019-09, a non-object)."""
    seen: set[str] = set()
    while isinstance(b, dict) and isinstance(b.get("$ref"), str) and not (set(b) - ANNOTATIONS - {"$ref"}):
        ref = b["$ref"]
        if not ref.startswith("#") or ref in seen:
            return None
        seen.add(ref)
        b, _ = cv.resolve_ref(ref, ptr, b)
        if isinstance(b, dict) and any(k in b for k in ("$id", "id")):
            return None
    if not isinstance(b, dict):
        return None
    if cv.draft_number() < 2019 and "$ref" in b:
        return [b]  # its siblings are ignored there: one part as it stands
    items = b.get("allOf")
    own = {k: v for k, v in b.items() if k != "allOf" and k in CONSTRAINTS}
    if not isinstance(items, list):
        return [own] if own else []
    return ([own] if own else []) + list(items)


def _exclusive_branches(cv: Converter, schema: dict[str, Any], branches: list[Any], ptr: str) -> list[Any]:
    """Overlapping ``oneOf``: branch i becomes ``allOf [b_i, not b_j (j != i)]`` (exact).  The
    negations must be expressible; otherwise the keyword is refused (or, lenient, kept as anyOf)."""
    for j, b in enumerate(branches):
        try:
            complement(cv, b, f"{ptr}/oneOf/{j}")
        except NotExpressible as e:
            cv.unsupported("oneOf", ptr, f"oneOf branches overlap and branch {j} cannot be negated: {e.why}")
            return branches
    return cv.rewritten(
        schema,
        "oneOf",
        lambda: [{"allOf": [b] + [{"not": o} for j, o in enumerate(branches) if j != i]} for i, b in enumerate(branches)],
    )


def convert_conditional(cv: Converter, schema: dict[str, Any], ptr: str) -> Node:
    """``if`` / ``then`` / ``else`` as ``(if ∧ then) ∨ (¬if ∧ else)``, and ``dependentRequired``
    / ``dependentSchemas`` / ``dependencies`` as ``(name absent) ∨ (name present ∧ dependency)``,
    each an ``anyOf`` intersected with the other keywords."""
    keyword = next(k for k in ("if", "dependentRequired", "dependentSchemas", "dependencies") if k in schema)
    return cv.convert_rewritten(cv.rewritten(schema, "conditional", lambda: _conditional_parts(schema)), ptr, keyword)


def _conditional_parts(schema: dict[str, Any]) -> dict[str, Any]:
    keys = ("if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies")
    rest = {k: v for k, v in schema.items() if k not in keys}
    parts: list[Any] = [rest] if any(k in CONSTRAINTS for k in rest) else []
    if "if" in schema and ("then" in schema or "else" in schema):
        cond = schema["if"]
        parts.append({"anyOf": [{"allOf": [cond, schema.get("then", True)]}, {"allOf": [{"not": cond}, schema.get("else", True)]}]})
    for kw in ("dependentRequired", "dependentSchemas", "dependencies"):
        for name, dep in (schema.get(kw) or {}).items():
            present: Any = {"required": [name, *dep]} if isinstance(dep, list) else {"allOf": [{"required": [name]}, dep]}
            parts.append({"anyOf": [{"properties": {name: False}}, present]})
    return {"allOf": parts} if parts else {}
