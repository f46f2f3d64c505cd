"""Soundness fuzzing of the compile layer on random schemas.

:func:`random_schema` draws a JSON Schema from the combinators and keywords the converter
accepts (``allOf`` / ``anyOf`` / ``oneOf`` / ``not`` of any subschema / ``if`` / ``then`` /
``else`` / ``enum`` / ``const`` / ``type`` / ``$ref``, nested, with string, number, array
(``contains`` with counts) and object (property counts, ``dependentRequired`` /
``dependentSchemas``, ``propertyNames``) keywords).  :func:`check_schema` compiles
it and checks *soundness* two ways: random strings of the automaton must parse and validate
with ``jsonschema`` (exact ``multipleOf``, format checking on), and near-miss mutations of
them that the automaton accepts must validate too.  Refusals (``UnsupportedSchemaError``,
``SchemaError``) and compile limits are counted, never failures; any other exception is one
(the compile layer must raise only its named errors).  A fast slice runs in the tests; ``python
benchmarks/schema_fuzz.py`` runs thousands.
"""

from __future__ import annotations

import json
import random
from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

from structgen.bench.conformance import sample_strings
from structgen.bench.conformance_items import exact_validator
from structgen.fsm.dfa import Budget
from structgen.fsm.errors import GrammarCompileError, GrammarTimeoutError
from structgen.fsm.lazy_compile import compile_lazy
from structgen.fsm.lazy_dfa import LazyDFA
from structgen.schemas.errors import SchemaError, UnsupportedSchemaError
from structgen.schemas.json_schema import schema_to_ir
from structgen.schemas.schema_options import SchemaOptions

SCALARS: tuple[Any, ...] = (None, True, False, 0, 1, -3, 2.5, "", "a", "xy", "null", "1")
TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")


def _value(rng: random.Random, depth: int) -> Any:
    """A small JSON value (for ``enum`` / ``const``)."""
    r = rng.random()
    if depth <= 0 or r < 0.6:
        return rng.choice(SCALARS)
    if r < 0.8:
        return [_value(rng, depth - 1) for _ in range(rng.randint(0, 2))]
    return {rng.choice("abc"): _value(rng, depth - 1) for _ in range(rng.randint(0, 2))}


# patterns: anchors in the middle and inside a repetition, look-aheads (also at the start of an
# optional group, after `^`, inside `((?!x).)*$`), besides plain ones; look-arounds and word
# boundaries inside repetitions and inside one another (the pattern's own automaton)
PATTERNS = ("^a", "b$", "^[a-c]*$", "x|y", "^\\d+$", "(^|b)a", "a($|,)", "^(a(,|$))*$", "^(?!ab)", "^(?!^b|c)[a-c]*", "(?=.{0,2}$)a",
            "^((?!bc).)*$", "^a(?:(?!.*bb)[ab]*)?$", "/^a$/", "^(?:[a-c]+\\b ?)+$", "(?:a(?=b)|[bc])+$", "^(?:(?<=a)b|a|c)*$",
            "(?:\\bab)+", "^(?:(?!ab).(?<!c))*$", "(?<=\\ba)b", "(?:x(?<=\\bx(?!y))|y)+")  # fmt: skip
FORMATS = ("date", "date-time", "email", "hostname", "ipv4", "ipv6", "uri", "uri-reference", "uuid", "duration", "regex")


def _typed(rng: random.Random, depth: int, defs: dict[str, Any]) -> dict[str, Any]:
    """A ``type`` schema with bounds of that type."""
    t = rng.choice(TYPES)
    s: dict[str, Any] = {"type": t if rng.random() < 0.8 else sorted({t, rng.choice(TYPES)})}
    if t == "string":
        if rng.random() < 0.5:
            s["maxLength"] = rng.randint(0, 6)
        if rng.random() < 0.3:
            s["minLength"] = rng.randint(0, 3)
        if rng.random() < 0.3:
            s["pattern"] = rng.choice(PATTERNS)
        if rng.random() < 0.1:
            s["format"] = rng.choice(FORMATS)
    elif t in ("integer", "number"):
        if rng.random() < 0.5:
            s[rng.choice(["minimum", "exclusiveMinimum"])] = rng.choice([-5, 0, 1, 2.5, 10])
        if rng.random() < 0.5:
            s[rng.choice(["maximum", "exclusiveMaximum"])] = rng.choice([-1, 0, 3, 7.5, 100])
        if rng.random() < 0.2:
            s["multipleOf"] = rng.choice([1, 2, 5, 0.5, 0.1, 3, 7, 0.3, 1.5])
    elif t == "array":
        if depth > 0 and rng.random() < 0.7:
            s["items"] = _schema(rng, depth - 1, defs)
        s["maxItems"] = rng.randint(0, 3)
        if rng.random() < 0.3:
            s["minItems"] = rng.randint(0, 2)
        if rng.random() < 0.15:
            s["items"] = {"enum": [rng.choice(SCALARS) for _ in range(rng.randint(1, 4))]}
            s["uniqueItems"] = True
        if depth > 0 and rng.random() < 0.25:
            s["contains"] = _schema(rng, depth - 1, defs)
            if rng.random() < 0.5:
                s[rng.choice(["minContains", "maxContains"])] = rng.randint(0, 2)
    elif t == "object":
        _object_keywords(rng, s, depth, defs)
    return s


def _object_keywords(rng: random.Random, s: dict[str, Any], depth: int, defs: dict[str, Any]) -> None:
    props = {k: _schema(rng, depth - 1, defs) for k in rng.sample("abcd", rng.randint(0, 3))} if depth > 0 else {}
    s["properties"] = props
    if props and rng.random() < 0.5:
        s["required"] = sorted(rng.sample(sorted(props), rng.randint(1, len(props))))
    s["additionalProperties"] = False if rng.random() < 0.7 else rng.choice([True, {"type": "integer"}])
    if depth > 0 and rng.random() < 0.15:
        s["patternProperties"] = {rng.choice(["^x", "^[a-c]$", "y$"]): _schema(rng, depth - 1, defs)}
    if rng.random() < 0.2:
        s[rng.choice(["minProperties", "maxProperties"])] = rng.randint(0, 3)
    if props and rng.random() < 0.2:
        name = rng.choice(sorted(props))
        if rng.random() < 0.5:
            s["dependentRequired"] = {name: sorted(rng.sample(sorted(props), 1))}
        elif depth > 0:
            s["dependentSchemas"] = {name: _schema(rng, depth - 1, defs)}
    if rng.random() < 0.1:
        s["propertyNames"] = rng.choice(
            [
                {"enum": ["a", "b", "x"]},
                {"maxLength": 1},
                {"pattern": "^[a-c]$"},
                {"anyOf": [{"const": "x"}, {"maxLength": 1}]},
                {"not": {"const": "b"}},
            ]
        )


def _one_of_objects(rng: random.Random, depth: int, defs: dict[str, Any]) -> dict[str, Any]:
    """``oneOf`` over object branches that share property names, with values of the same or of
    different types and constants, required keys, closed or open branches, and keywords beside
    the ``oneOf`` (what the disjointness proofs of exact ``oneOf`` read)."""

    def value() -> dict[str, Any]:
        return rng.choice([{"type": rng.choice(TYPES)}, {"const": rng.choice(SCALARS)}, {"enum": [rng.choice(SCALARS)]}, {}])

    def branch() -> dict[str, Any]:
        names = rng.sample("abc", rng.randint(1, 3))
        out: dict[str, Any] = {"type": "object"} if rng.random() < 0.7 else {}
        out["properties"] = {k: value() for k in names}
        if rng.random() < 0.7:
            out["required"] = sorted(rng.sample(names, rng.randint(1, len(names))))
        if rng.random() < 0.5:
            out["additionalProperties"] = False
        if rng.random() < 0.1:
            out["not"] = {"required": [rng.choice("abc")]}
        return out

    s: dict[str, Any] = {"oneOf": [branch() for _ in range(rng.randint(2, 3))]}
    if rng.random() < 0.4:  # keywords beside the oneOf narrow every branch
        s["properties"] = {rng.choice("abc"): value()}
        if rng.random() < 0.5:
            s["required"] = [rng.choice("abc")]
    if depth > 1 and rng.random() < 0.2:
        defs_name = f"d{len(defs)}"
        defs[defs_name] = branch()
        s["oneOf"].append({"$ref": f"#/$defs/{defs_name}"})
    return s


def _unevaluated(rng: random.Random, depth: int, defs: dict[str, Any]) -> dict[str, Any]:
    """``unevaluatedProperties`` / ``unevaluatedItems`` over ``allOf`` / ``anyOf`` / ``oneOf`` /
    ``if`` branches (and a ``$ref``) that declare properties or prefix items, without the
    ``additionalProperties`` / ``items`` that would make it moot."""
    applicator = rng.choice(["allOf", "anyOf", "oneOf", "if"])
    if rng.random() < 0.6:

        def branch() -> dict[str, Any]:
            names = rng.sample("abc", rng.randint(1, 2))
            out: dict[str, Any] = {"properties": {k: _typed(rng, 0, defs) for k in names}}
            if rng.random() < 0.5:
                out["required"] = [names[0]]
            return out

        s: dict[str, Any] = {"type": "object", "unevaluatedProperties": rng.choice([False, {"type": "integer"}, {"maxLength": 1}])}
        if rng.random() < 0.5:
            s["properties"] = {"d": _typed(rng, 0, defs)}
    else:

        def branch() -> dict[str, Any]:  # item keywords of both drafts, each read as the root's draft reads it
            tuple_ = [_typed(rng, 0, defs) for _ in range(rng.randint(1, 2))]
            kind = rng.choice(["prefixItems", "prefixItems", "items-list", "contains", "additionalItems"])
            if kind == "items-list":
                return {"items": tuple_, **({"additionalItems": _typed(rng, 0, defs)} if rng.random() < 0.3 else {})}
            if kind == "contains":
                return {"contains": tuple_[0]}
            if kind == "additionalItems":
                return {"additionalItems": tuple_[0]}
            return {"prefixItems": tuple_}

        s = {"type": "array", "maxItems": 3, "unevaluatedItems": rng.choice([False, {"type": "integer"}])}
    if applicator == "if":
        s["if"] = branch()
        s[rng.choice(["then", "else"])] = branch()
    else:
        s[applicator] = [branch() for _ in range(rng.randint(1, 6 if applicator == "anyOf" else 3))]
    if depth > 1 and rng.random() < 0.3:
        name = f"d{len(defs)}"
        defs[name] = branch()
        s["allOf"] = [*s.get("allOf", []), {"$ref": f"#/$defs/{name}"}]
    return s


def random_schema(rng: random.Random, depth: int = 3) -> Any:
    """A random schema of nesting depth at most ``depth``; the ``$ref``s point into its root
    ``$defs`` and never back to themselves (the validator has no recursion guard)."""
    defs: dict[str, Any] = {}
    schema = _schema(rng, depth, defs)
    if rng.random() < 0.1:  # 2019-09 reads unevaluatedItems beside its own item keywords
        schema = {"$schema": "https://json-schema.org/draft/2019-09/schema", **schema}
    else:  # 2020-12 has no array form of items: its tuples are prefixItems
        _tuples_as_prefix_items(schema)
        _tuples_as_prefix_items(defs)
    return {**schema, "$defs": defs} if defs else schema


def _tuples_as_prefix_items(node: Any) -> None:
    """Rename every ``items`` array in ``node`` (in place) to ``prefixItems``."""
    if isinstance(node, list):
        for v in node:
            _tuples_as_prefix_items(v)
    elif isinstance(node, dict):
        if isinstance(node.get("items"), list):
            node["prefixItems"] = node.pop("items")
        for v in node.values():
            _tuples_as_prefix_items(v)


def _schema(rng: random.Random, depth: int, defs: dict[str, Any]) -> dict[str, Any]:
    r = rng.random()
    if depth <= 0 or r < 0.35:
        return _typed(rng, depth, defs)
    if r < 0.5:
        return {"enum": [_value(rng, 2) for _ in range(rng.randint(1, 4))]} if rng.random() < 0.6 else {"const": _value(rng, 2)}
    if r < 0.62:
        return {"allOf": [_schema(rng, depth - 1, defs) for _ in range(rng.randint(1, 3))]}
    if r < 0.74:
        return {"anyOf": [_schema(rng, depth - 1, defs) for _ in range(rng.randint(1, 3))]}
    if r < 0.8:
        if rng.random() < 0.5:
            return _one_of_objects(rng, depth, defs)
        return {"oneOf": [_schema(rng, depth - 1, defs) for _ in range(rng.randint(1, 3))]}
    if r < 0.84:
        base = _schema(rng, depth - 1, defs)
        neg = rng.choice(
            [{"type": rng.choice(TYPES)}, {"const": rng.choice(SCALARS)}, {"enum": [rng.choice(SCALARS)]}, {"format": rng.choice(FORMATS)}]
        )
        if rng.random() < 0.5:
            neg = _schema(rng, depth - 1, defs)  # any schema: the general complement
        return {"allOf": [base, {"not": neg}]} if rng.random() < 0.5 else {**base, "not": neg}
    if r < 0.9:
        cond = {"if": _schema(rng, depth - 1, defs)}
        for key in rng.sample(["then", "else"], rng.randint(1, 2)):
            cond[key] = _schema(rng, depth - 1, defs)
        return {**_typed(rng, depth - 1, defs), **cond} if rng.random() < 0.5 else cond
    if r < 0.94:
        return _unevaluated(rng, depth, defs)
    target = _schema(rng, depth - 1, defs)  # built first: it cannot refer to itself
    name = f"d{len(defs)}"
    defs[name] = target
    return {"$ref": f"#/$defs/{name}"}


class FuzzResult(NamedTuple):
    """One schema's outcome: ``status`` ("ok", "refused", "limit", "crash", "accepted-invalid": it
    compiled although its meta-schema rejects it), ``samples`` and
    ``mutants_accepted`` checked, and ``unsound``: texts the automaton accepts that do not
    validate (with the reason).  ``valid_instances`` / ``invalid_instances``: instances
    hypothesis-jsonschema drew for the schema and for its negation (checked with ``jsonschema``),
    in the canonical layout; every invalid one must be rejected, ``valid_accepted`` counts the
    valid ones the automaton accepts (below 100% where the layout narrows: property order,
    undeclared properties, number forms)."""

    status: str
    samples: int
    mutants_accepted: int
    unsound: list[str]
    detail: str = ""
    valid_instances: int = 0
    valid_accepted: int = 0
    invalid_instances: int = 0


def exact_number(text: str) -> float | Decimal:
    """A JSON number with a fraction or exponent: a float where the float is that decimal's
    shortest reading, else the exact Decimal (``4676131203123158150682.0`` is a multiple of
    0.3 as JSON Schema reads numbers; its float is not).  An exponent past what ``Decimal``
    holds (JSON allows any number of digits) reads as the float: ±inf or ±0.0."""
    value = float(text)
    try:
        exact = Decimal(text)
    except InvalidOperation:
        return value
    return value if Decimal(repr(value)) == exact else exact


def _invalid(validator: Any, text: bytes) -> str | None:
    """Why ``text`` is not a valid instance, or None when it is."""
    try:
        value = json.loads(text.decode("utf-8"), parse_float=exact_number)
    except (UnicodeDecodeError, ValueError) as e:
        return f"not JSON: {e}"
    errors = list(validator.iter_errors(value))
    return errors[0].message if errors else None


def _mutants(text: bytes, rng: random.Random, n: int) -> list[bytes]:
    alphabet = b'{}[]",:-.0123456789abcentrulsfx '
    out = []
    for _ in range(n):
        t = bytearray(text)
        op = rng.randrange(3)
        i = rng.randrange(len(t) + 1)
        if op == 0 and t:
            del t[min(i, len(t) - 1)]
        elif op == 1:
            t.insert(i, rng.choice(alphabet))
        elif t:
            t[min(i, len(t) - 1)] = rng.choice(alphabet)
        out.append(bytes(t))
    return out


def _compile(schema: Any, options: SchemaOptions) -> LazyDFA:
    """``schema``'s automaton as the compiler builds it: past the state cap, again with
    unconstrained values nested less deeply (:meth:`SchemaOptions.shallower`); a time-out is
    final."""
    node, _report = schema_to_ir(schema, options)
    try:
        return compile_lazy(node, Budget(timeout_s=10.0, max_states=20_000))
    except GrammarTimeoutError:
        raise
    except GrammarCompileError:
        shallow = options.shallower()
        if shallow is None:
            raise
        return _compile(schema, shallow)


def check_schema(schema: Any, seed: int, samples: int = 8, mutants: int = 16, instances: int = 0) -> FuzzResult:
    """Compile ``schema`` (untyped subschemas narrowed to their keywords' types for an odd
    ``seed``, open to every type for an even one) and check its samples and accepted mutants
    with ``jsonschema``, and ``instances`` hypothesis-jsonschema instances of it and of its
    negation."""
    rng = random.Random(seed)
    try:
        dfa = _compile(schema, SchemaOptions(infer_types=bool(seed % 2)))  # odd seeds: the default narrowing; even: every type
    except (UnsupportedSchemaError, SchemaError) as e:
        return FuzzResult("refused", 0, 0, [], f"{type(e).__name__}: {e}")
    except GrammarCompileError as e:
        return FuzzResult("limit", 0, 0, [], f"{type(e).__name__}: {e}")
    except Exception as e:  # anything else escaping the compile layer is a bug
        return FuzzResult("crash", 0, 0, [], f"{type(e).__name__}: {e}")
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as e:  # compiled a schema its meta-schema rejects: a keyword was not checked
        return FuzzResult("accepted-invalid", 0, 0, [], f"{e.message} at {'/'.join(map(str, e.absolute_path))}")
    except RecursionError:  # nested deeper than jsonschema itself can follow: nothing to check against
        return FuzzResult("ok", 0, 0, [], "too deep for jsonschema")
    if dfa.is_empty():
        return FuzzResult("ok", 0, 0, [])
    validator = exact_validator(schema)
    try:
        result = _check_texts(dfa, validator, rng, samples, mutants)
        if not instances:
            return result
        valid, accepted, invalid, unsound = _check_instances(dfa, validator, schema, seed, instances)
    except RecursionError:
        return FuzzResult("ok", 0, 0, [], "too deep for jsonschema")
    return result._replace(unsound=result.unsound + unsound, valid_instances=valid, valid_accepted=accepted, invalid_instances=invalid)


def _draw(schema: Any, seed: int, n: int) -> list[Any]:
    """Up to ``n`` instances hypothesis-jsonschema generates for ``schema`` (none when it cannot).
    It gets a copy: it resolves ``$ref``s in place, which would change the schema that the
    validator of the other checks holds."""
    import copy
    import warnings

    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis_jsonschema import from_schema

    out: list[Any] = []

    @hseed(seed)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(from_schema(copy.deepcopy(schema)))
    def collect(value: Any) -> None:
        out.append(value)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            collect()
    except Exception:  # unsatisfiable, unsupported by hypothesis-jsonschema, …: nothing drawn
        pass
    return out


def _check_instances(dfa: Any, validator: Any, schema: Any, seed: int, n: int) -> tuple[int, int, int, list[str]]:
    """(valid drawn, valid accepted, invalid drawn, invalid ones accepted: unsound)."""
    layout = SchemaOptions()
    valid = accepted = invalid = 0
    unsound: list[str] = []
    defs = schema.get("$defs") if isinstance(schema, dict) else None
    negation: dict[str, Any] = {"not": schema, **({"$defs": defs} if defs else {})}
    for want_valid, target in ((True, schema), (False, negation)):
        for value in _draw(target, seed, n):
            text = layout.dumps(value).encode()
            if validator.is_valid(value) != want_valid:
                continue  # hypothesis-jsonschema drew a wrong instance: not ours to judge
            s = dfa.walk(dfa.initial, text)
            ok = s > 0 and dfa.is_accepting(s)
            if want_valid:
                valid += 1
                accepted += ok
            else:
                invalid += 1
                if ok:
                    unsound.append(f"invalid instance {text[:120]!r} accepted")
    return valid, accepted, invalid, unsound


def _check_texts(dfa: Any, validator: Any, rng: random.Random, samples: int, mutants: int) -> FuzzResult:
    unsound: list[str] = []
    texts = sample_strings(dfa, samples, rng, max_len=400)
    accepted = 0
    for text in texts:
        why = _invalid(validator, text)
        if why is not None:
            unsound.append(f"sample {text[:120]!r}: {why}")
        for m in _mutants(text, rng, mutants // max(1, len(texts))):
            s = dfa.walk(dfa.initial, m)
            if s > 0 and dfa.is_accepting(s):
                accepted += 1
                why = _invalid(validator, m)
                if why is not None:
                    unsound.append(f"mutant {m[:120]!r}: {why}")
    return FuzzResult("ok", len(texts), accepted, unsound)


EXTREMES: tuple[Any, ...] = (1e308, -1e308, 5e-324, 10**400, -(10**400), 0.1, 1e-7, 2**63, "3", None, True, [], {}, -1)
KEYWORDS = ("type", "minimum", "maximum", "exclusiveMinimum", "multipleOf", "minLength", "maxLength", "pattern", "format",
            "minItems", "maxItems", "items", "properties", "required", "enum", "const", "not", "$ref", "additionalProperties")  # fmt: skip


def mutate_schema(schema: Any, rng: random.Random) -> Any:
    """``schema`` with one hostile change: an extreme or ill-typed keyword value, deep nesting,
    a giant enum, or a broken reference.  The compile layer must answer with a result or one
    of its named errors."""
    op = rng.randrange(5)
    if op == 0:  # an extreme or ill-typed value for a keyword
        return {**(schema if isinstance(schema, dict) else {}), rng.choice(KEYWORDS): rng.choice(EXTREMES)}
    if op == 1:  # deep nesting
        wrap = rng.choice(["allOf", "items", "properties", "anyOf", "not"])
        for _ in range(rng.choice([50, 200, 1000])):
            if wrap == "items":
                schema = {"type": "array", "items": schema, "maxItems": 1}
            elif wrap == "properties":
                schema = {"type": "object", "properties": {"a": schema}, "required": ["a"], "additionalProperties": False}
            elif wrap == "not":
                schema = {"not": schema}
            else:
                schema = {wrap: [schema]}
        return schema
    if op == 2:  # a giant enum
        return {"enum": [rng.choice([i, str(i), [i], {"k": i}]) for i in range(rng.choice([1000, 20000]))]}
    if op == 3:  # references that go nowhere or loop
        return rng.choice([{"$ref": "#/$defs/missing"}, {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}},
                           {"$ref": "http://example.com/s.json"}, {"$ref": 3}])  # fmt: skip
    return {"type": "string", "pattern": rng.choice(["(", "a{2,1}", "(?<=a)b", "\\", "[z-a]", "a" * 5000, "(a|b)*" * 200])}


def fuzz(n: int, seed: int = 0, depth: int = 3, instances: int = 0) -> list[tuple[Any, FuzzResult]]:
    """``n`` random schemas (seeds ``seed`` … ``seed + n - 1``) and their results."""
    out = []
    for i in range(seed, seed + n):
        schema = random_schema(random.Random(i), depth)
        out.append((schema, check_schema(schema, i, instances=instances)))
    return out
