"""JSON Schema (draft 4 – 2020-12) → regex IR over the JSON text.

Rule 1, soundness: every text the IR accepts parses to a JSON value that validates against
the schema (with ``jsonschema`` and its format checker).  Narrowings (documented, never
widenings):

- one layout: canonical ``{"a": 1, "b": [1, 2]}`` by default, ``compact``, or
  ``flexible`` with at most ``max_ws`` whitespace characters at each insignificant position;
- declared properties in schema order, then any additional properties;
- undeclared properties are generated only where the schema allows them explicitly
  (``additionalProperties`` true or a schema, ``patternProperties``), unless
  ``allow_undeclared_properties=True`` restores JSON Schema's default of allowing them
  (also restored for an object whose ``minProperties`` exceeds the names it declares);
- strings use raw UTF-8 and the short escapes (``json.dumps(ensure_ascii=False)``'s output);
- numbers with bounds or ``multipleOf`` have no exponent; integers never have a fraction;
- a schema without ``type`` takes the types its keywords belong to (``properties`` → objects,
  ``items`` → arrays, ``minLength`` → strings, ``minimum`` → numbers:
  :data:`~.json_keywords.TYPE_KEYWORDS`; a ``format`` JSON Schema does not define implies none),
  any value when it has none of them;
- unconstrained values (``true``, ``{}``) nest at most ``any_value_depth`` levels (6), or
  ``any_value_fallback_depth`` (3) where the automaton at a deeper ``any_value_depth`` passes
  the state cap; in the operands of an eager product (an intersection, property counts, a
  negation's "some item / member fails"), at most ``product_value_depth`` (3), and the items and
  members around a failing or matching one at most ``product_value_depth`` + 2;
- recursive ``$ref`` is unrolled ``max_recursion_depth`` times, then only its non-recursive
  alternatives remain;
- property names matching several ``patternProperties`` are not generated.

Rule 2: a constraint that cannot be enforced exactly raises :class:`UnsupportedSchemaError`
naming the keyword and its JSON pointer.  With ``strict=False`` the keyword is dropped from
generation instead and the caller must post-validate (``structgen`` does).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
from collections.abc import Callable, Iterator
from typing import Any

from .charset import CharSet
from .errors import SchemaError, UnsupportedSchemaError
from .ir import NOTHING, Join, Node, alt, chars, lit, rep, seq
from .json_combinators import convert_all_of, convert_conditional, convert_union
from .json_keywords import CONSTRAINTS, RecursionLimit, check_keyword_types
from .json_not import convert_not
from .json_refs import RefResolver, convert_dynamic_ref, convert_ref, holds_dynamic_ref
from .json_scalars import convert_enum, convert_types
from .json_strings import ANY_STRING_CONTENT, json_string
from .json_unevaluated import MAX_ANY_OF_CASES, rewrite_static_unevaluated, static_unevaluated
from .numbers import (
    NUMBER,
)
from .schema_options import ConversionReport, SchemaOptions

_NO_DEPTHS: frozenset[tuple[str, int]] = frozenset()


class Converter:
    def __init__(self, root: Any, options: SchemaOptions, report: ConversionReport) -> None:
        self.root = root
        self.opt = options
        self.report = report
        self.ref_depth: dict[str, int] = {}
        self.inline_depth: dict[str, int] = {}  # as ref_depth, for targets ``allOf`` merges in place
        self.any_cache: dict[int, Node] = {}
        self.minus_cache: dict[tuple[object, ...], Node] = {}
        self.memo: dict[tuple[object, ...], Node] = {}
        self._reach: dict[int, frozenset[str] | None] = {}  # id(schema) -> reachable_refs
        self._direct: dict[int, frozenset[str] | None] = {}  # id(schema or list) -> its written $ref targets
        self._targets: dict[str, Any] = {}  # $ref target pointer -> its schema
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
        self._refs: RefResolver | None = None
        # with a root holding a $dynamicRef (2020-12) or $recursiveRef (2019-09), set by
        # :meth:`track_dynamic_scope`: the dynamic scope of the subschema being converted, as
        # ``referencing`` (jsonschema's resolver) keeps it: the non-empty base URI current where
        # each reference on the way was followed, outermost first (:func:`.json_refs.followed_scope`)
        self.tracks_dynamic_scope = False
        self.dynamic_scope: tuple[str, ...] = ()
        self.scoped: dict[int, tuple[str, ...]] = {}  # id of a schema made by :meth:`in_scope` → its dynamic scope
        self.built: dict[int, Node] = {}  # id of a schema made by :meth:`prebuilt` → its IR
        self.negated_refs: dict[str, int] = {}  # $ref targets being negated on this path
        self.resolved_refs: list[str] = []  # $ref targets the last complement resolved
        self.distributing = 0  # intersections being converted spread over their unions, nested
        self.rewrites: dict[tuple[int, str], Any] = {}
        # property names, in order, that the objects of this instance location lay out first:
        # set while the parts of an intersection are converted (see ``convert_all_of``)
        self.key_order: tuple[str, ...] = ()

    # ------------------------------------------------------------------ helpers

    def unsupported(self, keyword: str, pointer: str, why: str) -> None:
        """Raise in strict mode; otherwise record that ``keyword`` is not enforced."""
        if self.opt.strict:
            raise UnsupportedSchemaError(why, keyword=keyword, pointer=pointer)
        self.report.dropped.append((keyword, pointer))

    def refs(self) -> RefResolver:
        """The root's reference resolver (built on first use)."""
        if self._refs is None:
            self._refs = RefResolver(self.root, self.draft_number())
        return self._refs

    def dynamic_ref_keyword(self) -> str | None:
        """The dynamic reference keyword the root's draft defines: ``$dynamicRef`` (2020-12),
        ``$recursiveRef`` (2019-09), None before; the other one is an annotation there."""
        draft = self.draft_number()
        return "$dynamicRef" if draft >= 2020 else "$recursiveRef" if draft == 2019 else None

    def track_dynamic_scope(self) -> None:
        """Track the dynamic scope where the root holds its draft's dynamic reference keyword
        (before the root is converted); other schemas pay nothing for it."""
        keyword = self.dynamic_ref_keyword()
        self.tracks_dynamic_scope = keyword is not None and holds_dynamic_ref(self.root, keyword)

    def subschemas(self) -> list[tuple[Any, str]]:
        """Every subschema of the root with its JSON pointer (:meth:`.json_refs.RefResolver.subschemas`)."""
        return self.refs().subschemas()

    def resolve_ref(self, ref: Any, pointer: str, holder: Any = None) -> tuple[Any, str]:
        """The schema ``ref`` names and its pointer (:meth:`.json_refs.RefResolver.resolve`;
        ``holder``: the schema object holding the ``$ref``, whose base URI applies)."""
        return self.refs().resolve(ref, pointer, holder)

    def validator(self, schema: Any) -> Any:
        """A ``jsonschema`` validator of the root's draft for ``schema`` (a subschema of the
        root, or one the converter built from it), format checking on.  Before 2019-09 it also
        reads ``const``, ``contains`` (with ``minContains`` / ``maxContains``) and
        ``propertyNames`` as 2020-12 does: the schemas built for ``not`` use them, and where a
        user's schema of an older draft uses them they only narrow what is generated."""
        import jsonschema

        if self._validator_cls is None:
            cls = jsonschema.validators.validator_for(self.root, default=jsonschema.Draft202012Validator)
            self._validator_cls = cls
            self._root_validator = _with_later_keywords(cls)(self.root, format_checker=cls.FORMAT_CHECKER)
        return self._root_validator.evolve(schema=schema)

    def draft_number(self) -> int:
        """The root's draft as a number (3, 4, 6, 7, 2019, 2020), as ``jsonschema`` picks it
        (2020-12 when ``$schema`` is absent)."""
        if self._validator_cls is None:
            self.validator(True)
        name = self._validator_cls.__name__
        return {"Draft3Validator": 3, "Draft4Validator": 4, "Draft6Validator": 6, "Draft7Validator": 7,
                "Draft201909Validator": 2019}.get(name, 2020)  # fmt: skip

    def checked_formats(self) -> frozenset[str]:
        """The ``format`` values the root draft's ``jsonschema`` format checker checks (the
        others pass every value)."""
        if self._validator_cls is None:
            self.validator(True)
        return frozenset(self._validator_cls.FORMAT_CHECKER.checkers)

    def draft_keywords(self) -> frozenset[str]:
        """The keywords the root's draft evaluates (``then`` / ``else`` / ``minContains`` …
        are read by ``if`` / ``contains``)."""
        if self._validator_cls is None:
            self.validator(True)
        return frozenset(self._validator_cls.VALIDATORS)

    def tuple_keywords(self) -> tuple[str, str]:
        """(the keyword of an array's leading item schemas, the keyword for the items after
        them) in the root's draft: ``prefixItems`` / ``items`` from 2020-12, an ``items`` array
        / ``additionalItems`` before it (the other spelling is no keyword there)."""
        return ("prefixItems", "items") if self.draft_number() >= 2020 else ("items", "additionalItems")

    def draft_ignores_ref_siblings(self) -> bool:
        """Before 2019-09 the keywords next to ``$ref`` are ignored."""
        return self.draft_number() <= 7

    def convert_rewritten(self, rewritten: Any, ptr: str, keyword: str) -> Node:
        """Convert a schema built from the keyword ``keyword`` at ``ptr`` (``not``'s complement,
        ``if``'s cases …).  Its subschemas have no place in the user's schema, so an error
        raised inside it whose pointer does not resolve is re-raised at ``ptr``'s keyword."""
        try:
            return self.convert(rewritten, ptr)
        except SchemaError as e:
            if self._resolves(e.pointer):
                raise
            message = e.message if "(in what '" in e.message else f"{e.message} (in what '{keyword}' requires)"
            raise type(e)(message, keyword=e.keyword, pointer=f"{ptr}/{keyword}") from None

    def _resolves(self, pointer: str) -> bool:
        return self.refs().pointer_exists(pointer)

    def unevaluated_in_place(self, schema: dict[str, Any]) -> Any:
        """``schema``'s ``unevaluated*`` rewritten (:func:`.json_unevaluated.static_unevaluated`)
        when it is an object of the root, in its own scope (read at its own pointer, wherever a
        merge converts it): one the rewrite before conversion did not reach (under a keyword no
        draft defines, such as a ``$defs`` entry's nested objects, reached by ``$ref``), or whose
        evaluated set a dynamic reference makes known only in the dynamic scope (the
        converter's now); None for a schema an intersection built, or whose evaluated set is
        not static."""
        at = self.refs().pointer_of(schema)
        if at is None:
            return None
        if not self.tracks_dynamic_scope:
            return self.rewritten(schema, "unevaluated", lambda: static_unevaluated(self, schema, at))
        scope = self.dynamic_scope  # a dynamic reference's target, so the evaluated set, depends on it
        return self.rewritten(schema, f"unevaluated {scope}", lambda: static_unevaluated(self, schema, at, scope))

    def rewritten(self, schema: dict[str, Any], tag: str, build: Callable[[], Any]) -> Any:
        """``build()``, made once per (schema object, tag): a rewritten schema keeps one
        identity, so the conversion memo holds for it across ``$ref`` visits."""
        key = (id(schema), tag)
        got = self.rewrites.get(key)
        if got is None:
            got = build()
            self.rewrites[key] = got
            self._keep.append(schema)
        return got

    def in_scope(self, schema: Any, scope: tuple[str, ...]) -> dict[str, Any]:
        """A new schema, ``{"allOf": [schema]}``, that converts in dynamic scope ``scope``
        wherever the converter meets it (the complement of a reference target followed into
        another scope, whose own dynamic references resolve there)."""
        wrapper = {"allOf": [schema]}
        self.scoped[id(wrapper)] = scope
        self._keep.append(wrapper)
        return wrapper

    def prebuilt(self, node: Node, json_type: str) -> dict[str, Any]:
        """A new schema, ``{"type": json_type}``, whose IR is ``node`` wherever the converter
        meets it: a violation no keywords spell in the root's draft (arrays in which a value
        repeats); its ``type`` bounds ``node``, for the tests that read keywords."""
        wrapper = {"type": json_type}
        self.built[id(wrapper)] = node
        self._keep.append(wrapper)
        return wrapper

    def opaque(self, schema: Any) -> bool:
        """Whether ``schema`` was made by :meth:`in_scope` or :meth:`prebuilt`: it converts
        only as itself (never merged keyword by keyword into another schema)."""
        return id(schema) in self.scoped or id(schema) in self.built

    # ------------------------------------------------------------------ dispatch

    def convert(self, schema: Any, ptr: str) -> Node:
        """IR of ``schema`` (memoized: the result depends only on the schema object, the
        recursion depths of the ``$ref``s being unrolled or merged, the options, the key
        order and the dynamic scope; a schema made by :meth:`in_scope` converts in its own, one
        made by :meth:`prebuilt` is its IR)."""
        built = self.built.get(id(schema)) if self.built else None
        if built is not None:
            return built
        scope = self.scoped.get(id(schema)) if self.scoped else None
        if scope is not None and scope != self.dynamic_scope:
            outer, self.dynamic_scope = self.dynamic_scope, scope
            try:
                return self.convert(schema, ptr)
            finally:
                self.dynamic_scope = outer
        self.calls += 1
        if self.check is not None and not self.calls & 255:
            self.check()
        if not isinstance(schema, dict):
            return self._note_origins(self._convert(schema, ptr), ptr)
        unrolling = [kv for kv in self.ref_depth.items() if kv[1]]
        merging = [kv for kv in self.inline_depth.items() if kv[1]]
        if unrolling or merging:  # the unrolling of targets this schema cannot reach cannot change its result
            reach = self.reachable_refs(schema)
            depths = frozenset(kv for kv in unrolling if reach is None or kv[0] in reach)
            inlined = frozenset(kv for kv in merging if reach is None or kv[0] in reach)
        else:  # no $ref being unrolled or merged: the common case, no reachability needed
            depths = inlined = _NO_DEPTHS
        key = (id(schema), depths, inlined, self.opt, self.key_order, self.dynamic_scope)
        got = self.memo.get(key)
        if got is None:
            got = self._note_origins(self._convert(schema, ptr), ptr)
            self.memo[key] = got
            self._keep.append(schema)
        return got

    def _note_origins(self, node: Node, ptr: str) -> Node:
        """Record ``node`` as converted at ``ptr``: the origin of the products it holds that no
        inner subschema claimed (inner conversions finish first, so the innermost pointer wins;
        :meth:`ConversionReport.origin_of` reads the records when a product fails)."""
        self.report.converted.append((node, ptr))
        return node

    def reachable_refs(self, schema: Any) -> frozenset[str] | None:
        """The pointers of the ``$ref`` targets ``schema`` can reach, following ``$ref``s
        (memoized per object); None when unknown (a reference that does not resolve, a dynamic
        one): then every target counts."""
        got = self._reach.get(id(schema), False)
        if got is not False:
            return got  # type: ignore[return-value]
        direct = self._direct_refs(schema)
        out: frozenset[str] | None = None
        if direct is not None:
            seen, todo = set(direct), list(direct)
            while todo:
                inner = self._direct_refs(self._targets[todo.pop()])
                if inner is None:
                    break
                for t in inner - seen:
                    seen.add(t)
                    todo.append(t)
            else:
                out = frozenset(seen)
        self._reach[id(schema)] = out
        self._keep.append(schema)
        return out

    def _direct_refs(self, schema: Any) -> frozenset[str] | None:
        """The ``$ref`` targets written inside ``schema`` (not followed; memoized per object),
        None when one does not resolve or a dynamic reference is met."""
        if not isinstance(schema, (dict, list)):
            return frozenset()
        got = self._direct.get(id(schema), False)
        if got is not False:
            return got  # type: ignore[return-value]
        found: set[str] | None = set()
        if isinstance(schema, dict) and ("$dynamicRef" in schema or "$recursiveRef" in schema):
            found = None
        elif isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
            try:
                target, target_ptr = self.resolve_ref(schema["$ref"], "#", schema)
                self._targets[target_ptr] = target
                found = {target_ptr}
            except SchemaError:
                found = None
        for value in schema.values() if isinstance(schema, dict) else schema:
            if found is None:
                break
            inner = self._direct_refs(value)
            found = None if inner is None else found | inner
        out = None if found is None else frozenset(found)
        self._direct[id(schema)] = out
        self._keep.append(schema)
        return out

    def _convert(self, schema: Any, ptr: str) -> Node:
        if schema is True:
            return self.any_value(self.opt.any_value_depth)
        if schema is False:
            return NOTHING
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(schema).__name__}", keyword="(schema)", pointer=ptr)
        if ("enum" in schema or "const" in schema) and str(schema.get("$ref", "#")).startswith("#"):
            # a finite set of values: ``jsonschema`` checks each against every sibling keyword
            # (``not``, ``if``, ``allOf``, local ``$ref`` …), so none of them needs a grammar
            return convert_enum(self, schema, ptr)
        if "$dynamicRef" in schema or "$recursiveRef" in schema:
            own = self.dynamic_ref_keyword()
            foreign = [k for k in ("$dynamicRef", "$recursiveRef") if k in schema and k != own]
            if foreign:  # a reference keyword of another draft: an annotation here, as ``jsonschema`` reads it
                kept = self.rewritten(schema, "foreign-refs", lambda: {k: v for k, v in schema.items() if k not in foreign})
                return self.convert(kept, ptr)
        for key in ("unevaluatedItems", "unevaluatedProperties"):
            if key in schema and schema[key] is not True and self.draft_number() >= 2019:
                static = self.unevaluated_in_place(schema)
                if static is not None:
                    return self.convert(static, ptr)
                why = "which properties (items) it sees depends on the branch an instance passes"
                why += f" (an anyOf making more than {MAX_ANY_OF_CASES} sets of branches to tell apart, or before 2020-12 on contains)"
                self.unsupported(key, ptr, f"'{key}': {why}")
        if not any(k in CONSTRAINTS for k in schema):
            return self.any_value(self.opt.any_value_depth)  # {} (annotations only) is `true`
        if any(k in schema for k in ("if", "dependentRequired", "dependentSchemas", "dependencies")):
            return convert_conditional(self, schema, ptr)
        if "$ref" in schema:
            return convert_ref(self, schema, ptr)
        if "$dynamicRef" in schema or "$recursiveRef" in schema:  # the draft's own (another draft's was dropped above)
            return convert_dynamic_ref(self, schema, ptr)
        if "allOf" in schema:
            return convert_all_of(self, schema, ptr)
        if "anyOf" in schema or "oneOf" in schema:
            return convert_union(self, schema, ptr)
        if "not" in schema:
            return convert_not(self, schema, ptr)
        return convert_types(self, schema, ptr)

    @contextlib.contextmanager
    def unrolling(self, targets: list[str], ptr: str) -> Iterator[None]:
        """Count one more in-place merge of each ``$ref`` target in ``targets`` while the body
        runs (``allOf`` merging); raises :class:`RecursionLimit` past ``max_recursion_depth``.
        Kept apart from ``ref_depth``: a target merged in place is not being negated inside
        itself when a sibling ``not`` looks through it."""
        saved = {t: self.inline_depth.get(t, 0) for t in targets}
        if any(d > self.opt.max_recursion_depth for d in saved.values()):
            raise RecursionLimit(ptr)
        for t in saved:
            self.inline_depth[t] = saved[t] + 1
        try:
            yield
        finally:
            self.inline_depth.update(saved)

    @contextlib.contextmanager
    def product_operands(self) -> Iterator[None]:
        """Convert the positive operands of an eager product (``And``, the kept side of a
        ``Minus``) with unconstrained values nested at most ``product_value_depth`` while the
        body runs: a product's automaton is built whole, and every level of any-value nesting
        multiplies its states.  A subset of each operand, so the product stays a subset of
        the exact one (never used for a subtracted side).  The options key the memo, so these
        conversions are kept apart from the others."""
        saved = self.opt
        if saved.any_value_depth > saved.product_value_depth:
            self.opt = dataclasses.replace(saved, any_value_depth=saved.product_value_depth, any_value_fallback_depth=None)
        try:
            yield
        finally:
            self.opt = saved

    # ------------------------------------------------------------------ scalars

    # ------------------------------------------------------------------ arrays

    # ------------------------------------------------------------------ objects

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
    Raises :class:`SchemaError` for malformed schemas (a keyword value of the wrong kind
    anywhere, :func:`~.json_keywords.check_keyword_types`) and
    :class:`UnsupportedSchemaError` for unenforceable keywords (strict), both naming the keyword
    and its JSON pointer.
    """
    options = options or SchemaOptions()
    schema = load_schema(schema)
    report = ConversionReport()
    conv = Converter(schema, options, report)
    check_keyword_types(schema, conv.draft_number())  # an ill-typed bound is an error, never a bound silently ignored
    try:
        if _has_unevaluated(schema) and conv.draft_number() >= 2019:
            schema = rewrite_static_unevaluated(conv)  # each in its own scope, before any merging
            conv = Converter(schema, options, report)
        conv.check = check
        conv.track_dynamic_scope()
        node = conv.convert(schema, "#")
    except RecursionLimit as e:
        raise UnsupportedSchemaError(
            f"recursive $ref has no non-recursive alternative within max_recursion_depth={options.max_recursion_depth}",
            keyword="$ref",
            pointer=e.pointer,
        ) from None
    except RecursionError:
        raise UnsupportedSchemaError("schema nesting is too deep", keyword="$ref", pointer="#") from None
    return node, report


def _has_unevaluated(schema: Any) -> bool:
    """Whether any object inside ``schema`` has an ``unevaluated*`` key (iterative: schemas
    may nest deeper than Python's recursion limit)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "unevaluatedProperties" in node or "unevaluatedItems" in node:
                return True
            stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, (dict, list)))
    return False


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


@functools.cache
def _with_later_keywords(cls: Any) -> Any:
    """``cls`` (a ``jsonschema`` validator class) reading ``const``, ``contains`` and
    ``propertyNames`` as 2020-12 does (:meth:`Converter.validator`); made once per draft,
    since every class ``jsonschema.validators.extend`` makes is a new reference cycle."""
    import jsonschema

    if cls is jsonschema.Draft202012Validator:
        return cls
    later = jsonschema.Draft202012Validator.VALIDATORS
    return jsonschema.validators.extend(cls, {k: later[k] for k in ("const", "contains", "propertyNames")})
