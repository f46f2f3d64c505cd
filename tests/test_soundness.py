"""Soundness on schemas nobody wrote by hand: every text a compiled schema accepts validates.

The fast slice of the schema fuzzer (``structgen.bench.schema_fuzz``; the long run is
``python benchmarks/schema_fuzz.py``), and the families it and hidden schemas found unsound or
crashing, each pinned by a test.
"""

from __future__ import annotations

import json
import random

import jsonschema
import pytest
from structgen.fsm.dfa import Budget
from structgen.fsm.lazy_compile import compile_lazy
from structgen.schemas.json_schema import schema_to_ir

from structgen import Constraint, GrammarCompiler, Vocabulary
from structgen.bench.conformance import sample_strings
from structgen.bench.schema_fuzz import check_schema, fuzz, mutate_schema, random_schema


def _language(schema: object, n: int = 40) -> set[str]:
    """Up to ``n`` distinct texts the schema's automaton accepts (random walks)."""
    node, _ = schema_to_ir(schema)
    dfa = compile_lazy(node, Budget())
    if dfa.is_empty():
        return set()
    return {t.decode() for t in sample_strings(dfa, n, random.Random(0), max_len=200)}


def _accepts(schema: object, text: str) -> bool:
    node, _ = schema_to_ir(schema)
    dfa = compile_lazy(node, Budget())
    s = dfa.walk(dfa.initial, text.encode())
    return s > 0 and dfa.is_accepting(s)


@pytest.mark.parametrize(
    ("schema", "language"),
    [
        ({"allOf": [{"enum": [{"a": 1}]}, {"not": {"type": "null"}}]}, {'{"a": 1}'}),
        ({"allOf": [{"enum": ["x"]}, {"not": {"type": "number"}}]}, {'"x"'}),
        ({"allOf": [{"const": "x"}, {"not": {"type": "number"}}]}, {'"x"'}),
        ({"enum": ["x", 3, None], "not": {"type": "number"}}, {'"x"', "null"}),
        ({"enum": ["x", "y"], "not": {"const": "y"}}, {'"x"'}),
        ({"allOf": [{"enum": ["", 1]}, {"const": [None]}]}, set()),  # const next to an enum that lacks it
        ({"allOf": [{"enum": ["", 1]}, {"const": 1}]}, {"1"}),
        ({"type": "array", "minItems": 2, "maxItems": 1}, set()),
        # a finite enum makes every sibling exact, irregular keywords included
        ({"enum": [1, 2, "a", {"x": 1}], "if": {"type": "integer"}, "then": {"minimum": 2}}, {"2", '"a"', '{"x": 1}'}),
        ({"enum": [[1, 1], [1, 2]], "uniqueItems": True}, {"[1, 2]"}),
        ({"const": {"a": 1, "b": 2}, "maxProperties": 1}, set()),
        ({"$defs": {"s": {"type": "string"}}, "enum": ["a", 1], "$ref": "#/$defs/s"}, {'"a"'}),
    ],
)
def test_enum_const_not_and_bounds_families_are_exact(schema: object, language: set[str]) -> None:
    """``enum`` / ``const`` next to ``not`` or another ``enum`` (directly or merged from
    ``allOf``) once accepted values outside the enum; ``minItems`` above ``maxItems`` accepted
    arrays.  Now each is exactly its finite language, and an enum's siblings that no grammar
    could enforce (``if``, ``uniqueItems``, ``maxProperties``) are checked value by value."""
    assert _language(schema) == language
    for text in language:
        jsonschema.validate(json.loads(text), schema)


@pytest.mark.parametrize(
    ("schema", "ok", "bad"),
    [
        ({"type": "number", "minimum": 1e308}, "1" + "0" * 308 + ".5", "9" * 307),
        ({"type": "number", "maximum": -1e308}, "-2" + "0" * 308, "-" + "9" * 307),
        ({"type": "integer", "minimum": 10**400, "maximum": 10**400 + 7}, str(10**400 + 3), str(10**400 + 8)),
    ],
)
def test_huge_numeric_bounds_compile_exactly(gpt2_vocab: Vocabulary, schema: object, ok: str, bad: str) -> None:
    """Bounds of hundreds of digits once raised RecursionError (a 500 in the server); their
    digit-range grammar is now flat."""
    assert _accepts(schema, ok) and not _accepts(schema, bad)
    jsonschema.validate(json.loads(ok), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(bad), schema)
    fsm = GrammarCompiler(gpt2_vocab).compile(Constraint.json_schema(schema))
    assert fsm.mask_row(fsm.initial).any()


def test_random_schemas_are_sound_and_never_crash() -> None:
    """200 random schemas from the combinators and keywords we accept: every automaton sample
    and every accepted near-miss mutation validates, and nothing but the named errors escapes."""
    results = fuzz(200, seed=0)
    crashes = [(s, r.detail) for s, r in results if r.status == "crash"]
    unsound = [(s, r.unsound[:2]) for s, r in results if r.unsound]
    assert not crashes, crashes[:3]
    assert not unsound, unsound[:3]
    ok = [r for _s, r in results if r.status == "ok"]
    assert len(ok) >= 120 and sum(r.samples for r in ok) >= 600 and sum(r.mutants_accepted for r in ok) >= 100


def test_hostile_schema_mutations_raise_only_named_errors() -> None:
    """Extreme and ill-typed keyword values, nesting 1,000 deep, giant enums, broken or looping
    references and bad patterns: a result or a named error, never another exception."""
    rng = random.Random(7)
    statuses = []
    for i in range(60):
        schema = mutate_schema(random_schema(random.Random(i), 2), rng)
        r = check_schema(schema, i, samples=2, mutants=2)
        assert r.status != "crash", (str(schema)[:300], r.detail)
        # an ill-typed keyword is an error; only draft 4's boolean exclusive bounds pass under a 2020-12 meta-schema
        assert r.status != "accepted-invalid" or "exclusiveM" in r.detail, (str(schema)[:300], r.detail)
        assert not r.unsound, (str(schema)[:300], r.unsound[:2])
        statuses.append(r.status)
    assert {"ok", "refused"} <= set(statuses)


@pytest.mark.parametrize(
    ("schema", "keyword", "pointer"),
    [
        ({"type": "number", "minimum": None}, "minimum", "#"),
        ({"type": "string", "maxLength": "3"}, "maxLength", "#"),
        ({"type": "string", "minItems": {}}, "minItems", "#"),  # ignored by a string, still not a schema
        ({"properties": {"a/b": {"type": "array", "maxItems": -1}}}, "maxItems", "#/properties/a~1b"),
        ({"anyOf": [{"type": "integer"}, {"items": 5}]}, "items", "#/anyOf/1"),
        ({"allOf": []}, "allOf", "#"),
        ({"multipleOf": 0}, "multipleOf", "#"),
        ({"$defs": {"d": {"required": "a"}}, "$ref": "#/$defs/d"}, "required", "#/$defs/d"),
    ],
)
def test_ill_typed_keywords_are_named_errors(schema: object, keyword: str, pointer: str) -> None:
    """A keyword value of the wrong kind, anywhere in the schema, is a SchemaError naming the
    keyword and its pointer, never a bound silently ignored."""
    from structgen.schemas.errors import SchemaError

    with pytest.raises(SchemaError) as info:
        schema_to_ir(schema)
    assert info.value.keyword == keyword and info.value.pointer == pointer, str(info.value)


def test_keyword_checks_follow_any_nesting_depth() -> None:
    from structgen.schemas.errors import SchemaError

    deep: object = {"type": "integer", "minimum": "0"}
    for _ in range(5000):
        deep = {"items": deep}
    with pytest.raises(SchemaError, match="minimum must be a number"):
        schema_to_ir(deep)


def test_fuzz_checker_catches_an_unsound_grammar(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker itself: a converter that ignored ``maxItems`` would be reported."""
    from structgen.bench import schema_fuzz

    real = schema_fuzz.schema_to_ir
    monkeypatch.setattr(schema_fuzz, "schema_to_ir", lambda s, o: real({k: v for k, v in s.items() if k != "maxItems"}, o))
    r = check_schema({"type": "array", "items": {"type": "null"}, "maxItems": 1}, seed=3, samples=30)
    assert r.status == "ok" and r.unsound and all("too long" in u for u in r.unsound)


def test_random_schema_is_reproducible() -> None:
    assert random_schema(random.Random(5)) == random_schema(random.Random(5))


def test_instance_checks_leave_the_schema_unchanged() -> None:
    """hypothesis-jsonschema resolves ``$ref``s in place; the checker hands it a copy, so the
    validator of the other checks keeps the schema it was built from (a schema whose ``else``
    ``$ref`` was rewritten under it was once reported unsound)."""
    pytest.importorskip("hypothesis_jsonschema")
    schema = {
        "type": ["boolean", "number"],
        "if": {"type": "string"},
        "then": {"$ref": "#/$defs/a"},
        "else": {"$ref": "#/$defs/b"},
        "$defs": {"a": {"enum": [True, 1]}, "b": {"if": {"type": "null"}, "then": {"type": "object"}}},
    }
    before = json.dumps(schema)
    r = check_schema(schema, seed=1, instances=5)
    assert json.dumps(schema) == before
    assert r.status == "ok" and not r.unsound and r.valid_instances > 0


def test_the_fuzzer_reads_numbers_with_any_exponent() -> None:
    """JSON allows an exponent of any length; one past what ``Decimal`` holds reads as the
    float (the automaton may sample it), others exactly where the float is not."""
    from decimal import Decimal

    from structgen.bench.schema_fuzz import exact_number

    assert exact_number("1e9999999999999999999") == float("inf")
    assert exact_number("-1E+99999999999999999999") == float("-inf")
    assert exact_number("2.5e-99999999999999999999") == 0.0
    assert exact_number("0.5") == 0.5 and isinstance(exact_number("0.5"), float)
    assert exact_number("4676131203123158150682.0") == Decimal("4676131203123158150682")
