from __future__ import annotations

import json
import random
import re
import warnings
from enum import Enum
from typing import Any, Literal, Optional, Union

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from pydantic import BaseModel, Field
from structgen.fsm.lazy_compile import compile_lazy
from structgen.fsm.lazy_dfa import LazyDFA
from structgen.schemas.errors import SchemaError, UnsupportedSchemaError
from structgen.schemas.json_schema import pydantic_schema, schema_to_ir
from structgen.schemas.schema_options import SchemaOptions

from structgen.bench.conformance import sample_strings
from structgen.bench.conformance_items import KeyOrderer, exact_validator

CANON = SchemaOptions()

# a multipleOf whose remainder automaton would exceed the state cap
HUGE = 123456.789


def compile_schema(schema: Any, options: SchemaOptions = CANON) -> LazyDFA:
    node, report = schema_to_ir(schema, options)
    assert not report.dropped
    return compile_lazy(node)


def accepts(dfa: LazyDFA, value: Any, options: SchemaOptions = CANON) -> bool:
    return dfa.accepts(options.dumps(value).encode())


def assert_sound(schema: Any, dfa: LazyDFA, n: int = 40, seed: int = 0) -> None:
    validator = exact_validator(schema)
    samples = sample_strings(dfa, n, random.Random(seed))
    assert samples, "the sampler found no string"
    for s in samples:
        value = json.loads(s.decode("utf-8"))
        errors = list(validator.iter_errors(value))
        assert not errors, (s, errors[0].message)


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
        "score": {"type": "number", "exclusiveMinimum": 0, "maximum": 10.5},
        "ok": {"type": ["boolean", "null"]},
    },
    "required": ["name", "age"],
}

CASES: list[tuple[str, Any, list[Any], list[Any]]] = [
    (
        "person",
        PERSON,
        [
            {"name": "Jo", "age": 3},
            {"name": 'J"o\n\u0001é', "age": 150, "email": "a.b@ex.com", "tags": ["a", "c"], "score": 10.5, "ok": None},
        ],
        [
            {"name": "", "age": 3},
            {"name": "Jo", "age": 151},
            {"name": "Jo"},
            {"name": "Jo", "age": 1, "score": 0},
            {"name": "Jo", "age": 1, "tags": ["a", "b", "c", "a"]},
            {"name": "Jo", "age": 1, "extra": 1},
        ],
    ),
    ("enum-any", {"enum": [1, "x", None, [1, 2], {"k": True}]}, [1, "x", None, [1, 2], {"k": True}], [2, "y", [2, 1]]),
    ("const", {"const": {"a": [1, "b"]}}, [{"a": [1, "b"]}], [{"a": [1]}]),
    (
        "pattern+length",
        {"type": "string", "pattern": "^[a-z]+[0-9]*$", "minLength": 3, "maxLength": 5},
        ["abc", "ab1", "a1234"],
        ["ab", "abc123", "1ab", "ABC"],
    ),
    ("pattern-unanchored", {"type": "string", "pattern": "x[0-9]"}, ["x1", "aax9bb"], ["x", "aab"]),
    (
        "formats",
        {
            "type": "array",
            "prefixItems": [
                {"format": "date", "type": "string"},
                {"format": "uuid", "type": "string"},
                {"format": "ipv4", "type": "string"},
                {"format": "date-time", "type": "string"},
                {"format": "ipv6", "type": "string"},
                {"format": "hostname", "type": "string"},
            ],
            "items": False,
            "minItems": 6,
        },
        [["2024-02-29", "123e4567-e89b-12d3-a456-426614174000", "10.0.0.1", "2023-01-31T23:59:59Z", "fe80::1", "ex-ample.com"]],
        [
            ["2023-02-29", "123e4567-e89b-12d3-a456-426614174000", "10.0.0.1", "2023-01-31T23:59:59Z", "fe80::1", "example.com"],
            ["2024-02-29", "123e4567-e89b-12d3-a456-426614174000", "256.0.0.1", "2023-01-31T23:59:59Z", "fe80::1", "example.com"],
        ],
    ),
    (
        "uri-template",
        {"type": "string", "format": "uri-template"},
        ["http://example.com/dictionary/{term:1}/{term}", "{+path}/here", "/a/b{?q*}", "{#x,y.z:999}", ""],
        ["{x", "{}", "{x:0}", "{x:1000}", "a}b{"],
    ),
    (
        "regex-format",
        {"type": "string", "format": "regex"},
        ["^[a-z]+$", "(a|b)*c", "\\d{2,3}?", "", "^\\s*(?:it|describe)\\(['\"]([^'\"]+)", "[A-Fa-f0-9]{8}$"],
        ["a**", "(", "a)", "[z-a]", "^*", "a{2,1}", "\\", "[]"],
    ),
    (
        "relative-json-pointer",
        {"type": "string", "format": "relative-json-pointer"},
        ["0", "10/a", "120#", "3/x~0", "7"],
        ["1019", "01", "100/a", "1/x~2"],  # 1019: valid by the spec, refused by jsonschema's checker (narrowed)
    ),
    (
        "integer-bounds",
        {"type": "integer", "exclusiveMinimum": -3, "maximum": 1000, "multipleOf": 5},
        [-0, 5, 1000, 995],
        [-3, 1005, 7, 1.5],
    ),
    ("number-decimal", {"type": "number", "minimum": -1.25, "maximum": 2, "multipleOf": 0.25}, [-1.25, 0, 1.75, 2], [-1.5, 2.25, 0.1]),
    (
        "array-bounds",
        {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3},
        [[1, 2], [1, 2, 3]],
        [[1], [1, 2, 3, 4], [1, "a"]],
    ),
    (
        "tuple",
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": {"type": "boolean"}},
        [[], ["a"], ["a", 1, True, False]],
        [[1], ["a", "b"], ["a", 1, 2]],
    ),
    ("anyOf", {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]}, [1, "ab"], ["abc", True]),
    (
        "oneOf-discriminated",
        {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}},
                    "required": ["kind", "lives"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {"kind": {"const": "dog"}, "good": {"type": "boolean"}},
                    "required": ["kind", "good"],
                    "additionalProperties": False,
                },
            ]
        },
        [{"kind": "cat", "lives": 9}, {"kind": "dog", "good": True}],
        [{"kind": "cat", "good": True}, {"kind": "bird", "lives": 1}],
    ),
    (
        "oneOf-forced-discriminator",
        {
            "oneOf": [
                {"type": "object", "properties": {"id": {"enum": ["a"]}, "x": {"type": "integer"}}},
                {"type": "object", "properties": {"id": {"const": "b"}}},
                {"type": "string"},
            ]
        },
        [{"id": "a"}, {"id": "a", "x": 1}, {"id": "b"}, "s"],
        [{}, {"x": 1}, {"id": "c"}],
    ),
    (
        "allOf-merge",
        {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "string"}, "a": {"minimum": 2}}},
            ]
        },
        [{"a": 2}, {"a": 5, "b": "x"}],
        [{"a": 1}, {"b": "x"}],
    ),
    (
        "ref-recursive",
        {
            "$defs": {
                "node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}}, "required": ["v"]}
            },
            "$ref": "#/$defs/node",
        },
        [{"v": 1}, {"v": 1, "next": {"v": 2, "next": {"v": 3}}}],
        [{"v": 1, "next": {}}],
    ),
    (
        "additionalProperties-schema",
        {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"], "additionalProperties": {"type": "string"}},
        [{"id": 1}, {"id": 1, "x": "y", "z": "w"}],
        [{"id": 1, "x": 1}, {"id": 1, "id2": 3}],
    ),
    (
        "patternProperties",
        {"type": "object", "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False},
        [{}, {"x-a": 1, "x-b": 2}],
        [{"y": 1}, {"x-a": "s"}],
    ),
    ("not-type", {"not": {"type": ["string", "null"]}, "type": ["string", "integer", "null"]}, [1], ["a", None]),
    ("not-enum", {"type": "string", "not": {"enum": ["a", "b"]}, "maxLength": 1}, ["c", ""], ["a", "b"]),
    ("any", {}, [1, "x", None, [1, {"a": [True]}], {"k": {"j": 1.5e3}}], []),
    (
        "nested",
        {
            "type": "object",
            "properties": {
                "o": {
                    "type": "object",
                    "properties": {"p": {"type": "array", "items": {"type": "object", "properties": {"q": {"type": "null"}}}}},
                }
            },
        },
        [{}, {"o": {}}, {"o": {"p": [{}, {"q": None}]}}],
        [{"o": {"p": [{"q": 1}]}}],
    ),
    ("escapes", {"type": "string", "pattern": '^["\\\\/\\n]+$'}, ['"\\/\n', "\n"], ["a"]),
    (
        "word-boundaries-and-look-behinds",
        {"type": "string", "pattern": "^\\bid\\b(?<!x)[^_]*(?<=[0-9])$", "maxLength": 8},
        ["id 1", "id-42", "id x9"],
        ["idx 1", "id", "id 1a", "id_1", "ids 1", "id 1 2345", " id 1"],
    ),
    ("not-a-word-boundary", {"type": "string", "pattern": "a\\B", "maxLength": 3}, ["ab", "xa1"], ["a", "a b", "b"]),
    (
        "draft4-exclusive",
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "type": "number",
            "minimum": 0,
            "exclusiveMinimum": True,
            "maximum": 1,
            "exclusiveMaximum": True,
        },
        [0.5, 0.001],
        [0, 1],
    ),
    (
        "allOf-keeps-additionalProperties-scope",
        {"allOf": [{"properties": {"foo": {}}}], "properties": {"bar": {"type": "integer"}}, "additionalProperties": {"type": "boolean"}},
        [{"bar": 1}],
        [{"foo": 1, "bar": 1}, {"bar": 1, "baz": 2}],
    ),
    ("allOf-keeps-items-scope", {"allOf": [{"prefixItems": [{"minimum": 3}]}], "items": {"minimum": 5}}, [[5, 6]], [[3, 5], [5, 4]]),
    (
        "propertyNames-enum",
        {"type": "object", "propertyNames": {"enum": ["foo", "bar"]}, "additionalProperties": {"type": "integer"}},
        [{}, {"foo": 1, "bar": 2}],
        [{"baz": 1}],
    ),
    ("not-anything", {"anyOf": [{"not": {}}, {"type": "null"}]}, [None], [1, "a"]),
    ("multipleOf-small", {"type": "number", "multipleOf": 0.0001, "maximum": 1}, [0.073, 0.5, 1], [0.00005]),
    (
        "draft7-items-array",
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "items": [{"type": "integer"}], "additionalItems": False},
        [[], [1]],
        [[1, 2], ["a"]],
    ),
]


@pytest.mark.parametrize("name,schema,valid,invalid", CASES, ids=[c[0] for c in CASES])
def test_schema_cases(name: str, schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    dfa = compile_schema(schema)
    validator = exact_validator(schema)
    for v in valid:
        assert validator.is_valid(v), (name, v)
        assert accepts(dfa, v), (name, v)
    for v in invalid:
        assert accepts(dfa, v) is False, (name, v)
    assert_sound(schema, dfa)


def test_regex_format_generates_only_patterns_python_compiles() -> None:
    """Format ``regex`` is a bounded-nesting subset of the syntax: every generated string
    compiles with ``re`` (the checker's test) without a warning, and the subset keeps nesting."""
    dfa = compile_schema({"type": "string", "format": "regex"})
    samples = [json.loads(s.decode("utf-8")) for s in sample_strings(dfa, 400, random.Random(5))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for text in samples:
            re.compile(text)
    assert any("(" in t for t in samples) and any("[" in t for t in samples)
    assert accepts(dfa, "((([a-f0-9]+)|x)*)") and not accepts(dfa, "(((([a-f]))))")  # four levels: past the bound


@pytest.mark.parametrize(
    "ws,text,ok",
    [
        ("compact", '{"a":1,"b":[1,2]}', True),
        ("compact", '{"a": 1}', False),
        ("flexible", '{ "a" :1 ,\n "b": [ 1,2 ] }', True),
        ("flexible", '{"a":   1}', False),
    ],
)
def test_whitespace_policies(ws: str, text: str, ok: bool) -> None:
    opts = SchemaOptions(whitespace=ws, max_ws=2)
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "integer"}}},
        "required": ["a"],
    }
    node, _ = schema_to_ir(schema, opts)
    assert compile_lazy(node).accepts(text.encode()) == ok


@pytest.mark.parametrize(
    "schema,keyword,pointer",
    [
        ({"type": "array", "uniqueItems": True}, "uniqueItems", "#"),
        ({"properties": {"a": {"type": "integer", "if": {"minimum": 0}, "then": {"multipleOf": HUGE}}}}, "multipleOf", "#/properties/a/if"),
        ({"$ref": "https://example.com/s.json"}, "$ref", "#/$ref"),
        ({"oneOf": [{"type": "number"}, {"multipleOf": HUGE}]}, "not", "#/oneOf/0/not/multipleOf"),
        ({"type": "array", "not": {"uniqueItems": True}}, "not", "#/not/uniqueItems"),
        ({"type": "integer", "multipleOf": HUGE}, "multipleOf", "#"),
        (
            {"type": "object", "additionalProperties": {"type": "integer"}, "not": {"additionalProperties": {"multipleOf": HUGE}}},
            "not",
            None,
        ),
        ({"type": "object", "properties": {"a/b": {"type": "string", "pattern": "(?<=xx|z)y"}}}, "pattern", "#/properties/a~1b"),
        ({"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}, "minItems": 1}}, "$ref": "#/$defs/n"}, "$ref", None),
    ],
)
def test_unsupported_keywords_are_named(schema: Any, keyword: str, pointer: str | None) -> None:
    with pytest.raises(UnsupportedSchemaError) as ei:
        schema_to_ir(schema)
    assert ei.value.keyword == keyword
    if pointer is not None:
        assert ei.value.pointer == pointer
    assert keyword in str(ei.value)


@pytest.mark.parametrize(
    "schema,keyword",
    [
        ({"$ref": "#/$defs/missing"}, "$ref"),
        ({"type": "strnig"}, "type"),
        ({"type": "string", "minLength": -1}, "minLength"),
        ('{"type": "string",}', "(json)"),
        ({"enum": "abc"}, "enum"),
        ({"properties": []}, "properties"),
        ({"allOf": []}, "allOf"),
        ({"type": "object", "maxProperties": "x"}, "maxProperties"),
        ({"type": "object", "minProperties": -2}, "minProperties"),
    ],
)
def test_malformed_schemas_are_named(schema: Any, keyword: str) -> None:
    with pytest.raises(SchemaError) as ei:
        schema_to_ir(schema)
    assert ei.value.keyword == keyword


def test_constraint_errors_survive_pickling() -> None:
    """Compile worker processes and caches send refusals across pickle: keyword, pointer and
    regex position must come back intact."""
    import pickle

    from structgen.schemas.errors import RegexError

    for err in (SchemaError("bad", keyword="enum", pointer="/a"), UnsupportedSchemaError("no", keyword="not", pointer="")):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err) and (back.keyword, back.pointer) == (err.keyword, err.pointer)
    rx = pickle.loads(pickle.dumps(RegexError("unterminated group", "ab(c", 2)))
    assert (rx.reason, rx.pattern, rx.position) == ("unterminated group", "ab(c", 2)


def test_non_strict_drops_and_reports() -> None:
    node, report = schema_to_ir({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, SchemaOptions(strict=False))
    assert report.dropped == [("uniqueItems", "#")]
    assert compile_lazy(node).accepts(b"[1, 1]")  # not enforced: the caller must post-validate


class Color(str, Enum):  # noqa: UP042 (the str-mixin style users write)
    red = "red"
    blue = "blue"


class Address(BaseModel):
    street: str
    zip: str = Field(pattern=r"^\d{5}$")


class Person(BaseModel):
    name: str = Field(min_length=1, max_length=20)
    age: int = Field(ge=0, le=130)
    color: Color
    kind: Literal["a", "b"] = "a"
    address: Optional[Address] = None
    tags: list[str] = Field(default_factory=list, max_length=4)
    either: Union[int, str] = 0
    children: list["Person"] = Field(default_factory=list)


def test_pydantic_model_roundtrip() -> None:
    schema = pydantic_schema(Person)
    dfa = compile_schema(schema)
    p = Person(
        name="Ann",
        age=30,
        color=Color.red,
        address=Address(street="Main", zip="12345"),
        tags=["x"],
        either="q",
        children=[Person(name="Kid", age=3, color=Color.blue)],
    )
    text = CANON.dumps(p.model_dump(mode="json"))
    assert dfa.accepts(text.encode())
    assert not dfa.accepts(text.replace("12345", "1234").encode())
    for s in sample_strings(dfa, 25, random.Random(1)):
        Person.model_validate_json(s)  # raises on any invalid sample


def test_pydantic_rejects_non_models() -> None:
    with pytest.raises(TypeError):
        pydantic_schema(dict)


# ---- hypothesis: random small schemas; valid instances accepted, mutated-invalid rejected, samples sound

_leaf = st.one_of(
    st.builds(lambda lo, span: {"type": "integer", "minimum": lo, "maximum": lo + span}, st.integers(-50, 50), st.integers(0, 100)),
    st.builds(lambda lo, span: {"type": "string", "minLength": lo, "maxLength": lo + span}, st.integers(0, 3), st.integers(0, 4)),
    st.builds(lambda vals: {"enum": vals}, st.lists(st.text(alphabet='abé"\\', max_size=3), min_size=1, max_size=3, unique=True)),
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
)


def _object(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), children, min_size=1, max_size=3).flatmap(
        lambda props: st.builds(
            lambda req: {"type": "object", "properties": props, "required": sorted(req), "additionalProperties": False},
            st.sets(st.sampled_from(sorted(props))),
        )
    )


_schemas = st.recursive(
    _leaf,
    lambda children: st.one_of(
        _object(children),
        st.builds(
            lambda it, lo, span: {"type": "array", "items": it, "minItems": lo, "maxItems": lo + span},
            children,
            st.integers(0, 2),
            st.integers(0, 2),
        ),
        st.builds(lambda a, b: {"anyOf": [a, b]}, children, children),
    ),
    max_leaves=5,
)


def _mutate(value: Any, rng: random.Random) -> Any:
    choices = [1.5, "zz", None, True, [0], {"q": 1}, -99999]
    if isinstance(value, dict) and value and rng.random() < 0.6:
        k = rng.choice(sorted(value))
        out = dict(value)
        if rng.random() < 0.5:
            out[k] = _mutate(value[k], rng)
        else:
            del out[k]
        return out
    if isinstance(value, list) and value and rng.random() < 0.6:
        i = rng.randrange(len(value))
        return value[:i] + [_mutate(value[i], rng)] + value[i + 1 :]
    return rng.choice(choices)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_schemas, st.data())
def test_random_schemas(schema: Any, data: st.DataObject) -> None:
    dfa = compile_schema(schema)
    rng = random.Random(0)
    validator = jsonschema.Draft202012Validator(schema)
    orderer = KeyOrderer(schema)
    for _ in range(3):
        value = orderer.order(schema, data.draw(from_schema(schema)))  # our layout: keys in schema order
        assert accepts(dfa, value), (schema, value)
        bad = _mutate(value, rng)
        if not validator.is_valid(bad):
            assert not accepts(dfa, bad), (schema, bad)
            assert not accepts(dfa, orderer.order(schema, bad)), (schema, bad)
    assert_sound(schema, dfa, n=10)


def test_key_orderer_follows_pattern_properties_additional_properties_and_tuples() -> None:
    """The conformance harness lays out an instance's keys as the grammar generates them, also
    inside values reached through ``patternProperties`` (every matching pattern), ``additionalProperties``
    and draft-4 tuple ``items`` / ``additionalItems``, each through a ``$ref``."""
    svc = {"type": "object", "properties": {"build": {"type": "string"}, "depends_on": {"type": "string"}, "ports": {"type": "string"}}}
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "definitions": {"service": svc},
        "type": "object",
        "properties": {
            "services": {"type": "object", "patternProperties": {"^[a-z]+$": {"$ref": "#/definitions/service"}}},
            "extra": {"type": "object", "additionalProperties": {"$ref": "#/definitions/service"}},
            "pair": {"type": "array", "items": [{"$ref": "#/definitions/service"}], "additionalItems": {"$ref": "#/definitions/service"}},
        },
    }
    inst = {"ports": "1", "build": "2", "depends_on": "3"}
    want = {"build": "2", "depends_on": "3", "ports": "1"}
    value = {"pair": [inst, inst], "extra": {"X": inst}, "services": {"web": inst}}
    got = KeyOrderer(schema).order(schema, value)
    assert json.dumps(got) == json.dumps({"services": {"web": want}, "extra": {"X": want}, "pair": [want, want]})
    assert accepts(compile_schema(schema), got) and not accepts(compile_schema(schema), value)


def test_pattern_properties_exclusion_uses_the_wide_reading() -> None:
    # Python's `$` matches before a trailing newline and its `.` matches "\r": a key like "a\n"
    # matches "^.*$" for jsonschema, so it must never be generated as an *additional* property.
    schema = {"type": "object", "patternProperties": {"^.*$": {"type": "integer"}}, "additionalProperties": {"type": "boolean"}}
    dfa = compile_schema(schema)
    assert accepts(dfa, {"a": 1})
    assert not accepts(dfa, {"a\n": True}) and not accepts(dfa, {"a\r": True})
    assert_sound(schema, dfa, n=200)


REF_CASES: list[tuple[Any, list[Any], list[Any]]] = [
    # a '#/…' reference resolves against the nearest enclosing $id, not the root's
    (
        {
            "$id": "http://example.com/root.json",
            "$defs": {
                "b": {"type": "string"},
                "a": {"$id": "http://example.com/a.json", "$defs": {"b": {"type": "integer"}}, "$ref": "#/$defs/b"},
            },
            "$ref": "#/$defs/a",
        },
        [3],
        ["x"],
    ),
    # relative URIs, $anchor and URNs
    ({"$id": "http://example.com/s", "$defs": {"n": {"$id": "num", "type": "number"}}, "$ref": "num"}, [1.5], ["1.5"]),
    ({"$defs": {"x": {"$anchor": "here", "type": "boolean"}}, "properties": {"p": {"$ref": "#here"}}}, [{"p": True}], [{"p": 1}]),
    (
        {
            "$id": "urn:uuid:deadbeef-1234-0000-0000-4321feebdaed",
            "$defs": {"s": {"type": "null"}},
            "$ref": "urn:uuid:deadbeef-1234-0000-0000-4321feebdaed#/$defs/s",
        },
        [None],
        [0],
    ),
    # draft 7: a plain-name fragment in $id
    (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"A": {"$id": "#foo", "type": "integer"}},
            "allOf": [{"$ref": "#foo"}],
        },
        [1],
        ["a"],
    ),
    # draft 7: schema and property-list dependencies side by side, beside a $ref
    (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"n": {"type": "integer"}},
            "properties": {"a": {"$ref": "#/definitions/n"}, "b": {}, "c": {}},
            "dependencies": {"a": {"required": ["b"]}, "c": ["a"]},
        },
        [{"a": 1, "b": 2}, {"b": 2}, {"a": 1, "b": 2, "c": 3}],
        [{"a": 1}, {"c": 3}, {"a": "x", "b": 2}],
    ),
]


@pytest.mark.parametrize(("schema", "valid", "invalid"), REF_CASES)
def test_refs_resolve_as_jsonschema_resolves_them(schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    dfa = compile_lazy(schema_to_ir(schema)[0])
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    for value, ok in [(v, True) for v in valid] + [(v, False) for v in invalid]:
        assert cls(schema).is_valid(value) == ok, value
        assert dfa.accepts(json.dumps(value, separators=(", ", ": ")).encode()) == ok, value


def test_references_into_other_documents_are_refused_by_name() -> None:
    for ref in ("http://example.com/other.json", "other.json#/$defs/x"):
        with pytest.raises(UnsupportedSchemaError, match="another document") as e:
            schema_to_ir({"$id": "http://example.com/root.json", "properties": {"a": {"$ref": ref}}})
        assert e.value.keyword == "$ref" and e.value.pointer == "#/properties/a/$ref"
    with pytest.raises(SchemaError, match="does not resolve"):
        schema_to_ir({"$ref": "#nowhere"})


def test_pointer_refs_of_a_document_without_base_uris_resolve_as_referencing_does() -> None:
    """A ``#/…`` reference in a document that sets no base URI or anchor is read as a JSON
    pointer without crawling the document: the same target as ``referencing`` (the resolver
    ``jsonschema`` uses) finds, escapes and percent-encoding included; a pointer to nowhere is
    still refused by name, and a document holding a ``$id`` goes the general way."""
    import referencing
    import referencing.jsonschema
    from structgen.schemas.json_refs import RefResolver

    root: dict[str, Any] = {"$defs": {"a/b": {"type": "integer"}, "c~d": {"type": "string"}, "e f": {"enum": [1]}}, "prefixItems": [{}]}
    lookup = referencing.Registry().with_resource("", referencing.jsonschema.DRAFT202012.create_resource(root)).resolver()
    refs = RefResolver(root, 2020)
    for ref in ("#", "#/$defs/a~1b", "#/$defs/c~0d", "#/$defs/e%20f", "#/prefixItems/0"):
        target, pointer = refs.resolve(ref, "#/x")
        assert target is lookup.lookup(ref).contents, ref
        assert refs.value_at(pointer) is target, ref
    with pytest.raises(SchemaError, match="does not resolve"):
        refs.resolve("#/$defs/missing", "#/x")
    with_id = {"$defs": {"n": {"$id": "http://example.com/n", "type": "null"}}}
    assert RefResolver(with_id, 2020).resolve("http://example.com/n", "#/x")[0] is with_id["$defs"]["n"]
    assert RefResolver(with_id, 2020).resolve("#/$defs/n", "#/x")[0] is with_id["$defs"]["n"]


UNEVALUATED_CASES: list[tuple[Any, list[Any], list[Any]]] = [
    # evaluated by adjacent keywords, allOf and $ref: a static set
    (
        {"type": "object", "properties": {"a": {"type": "integer"}}, "allOf": [{"properties": {"b": {}}}], "unevaluatedProperties": False},
        [{"a": 1}, {"a": 1, "b": "x"}, {}],
        [{"c": 1}, {"a": 1, "c": 2}],
    ),
    (
        {
            "$defs": {"base": {"properties": {"id": {"type": "integer"}}}},
            "$ref": "#/$defs/base",
            "unevaluatedProperties": {"type": "string"},
        },
        [{"id": 1}, {"id": 1, "x": "s"}],
        [{"id": 1, "x": 2}],
    ),
    ({"type": "array", "prefixItems": [{"type": "integer"}], "unevaluatedItems": False}, [[1], []], [[1, 2]]),
    # a subschema's own scope: cousins and a $ref's target do not see their neighbours' properties
    ({"allOf": [{"properties": {"foo": True}}, {"unevaluatedProperties": False}]}, [{}], [{"foo": 1}]),
    (
        {"$defs": {"A": {"unevaluatedProperties": False}}, "properties": {"p": {"type": "string"}}, "$ref": "#/$defs/A"},
        [{}],
        [{"p": "x"}],
    ),
    # the evaluated set of the branches an instance passes: one case per set of branches
    (
        {
            "type": "object",
            "anyOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {"type": "integer"}}}],
            "unevaluatedProperties": False,
        },
        [{"a": 1}, {"a": 1, "b": 2}, {}],
        [{"c": 1}, {"a": "x"}, {"a": 1, "c": 2}],
    ),
    (
        {
            "type": "object",
            "oneOf": [{"properties": {"a": {"const": 1}}, "required": ["a"]}, {"properties": {"b": {"const": 2}}, "required": ["b"]}],
            "unevaluatedProperties": False,
        },
        [{"a": 1}, {"b": 2}],
        [{"a": 1, "b": 2}, {"a": 1, "x": 0}, {}],
    ),
    (
        {
            "type": "object",
            "if": {"properties": {"k": {"const": "x"}}, "required": ["k"]},
            "then": {"properties": {"v": {"type": "integer"}}},
            "else": {"properties": {"w": {"type": "integer"}}},
            "unevaluatedProperties": False,
        },
        [{"k": "x", "v": 1}, {"w": 1}],
        [{"k": "x", "w": 1}, {"k": "y", "v": 1}],
    ),
    # a schema under a $defs entry's own grouping object (no keyword the rewrite walks), reached by $ref
    (
        {
            "$defs": {
                "group": {
                    "thing": {
                        "type": "object",
                        "allOf": [{"properties": {"a": {}}}],
                        "properties": {"b": {}},
                        "unevaluatedProperties": False,
                    }
                }
            },
            "$ref": "#/$defs/group/thing",
        },
        [{"a": 1}, {"b": 2}, {}],
        [{"c": 1}, {"a": 1, "c": 2}],
    ),
    # a branch inside an allOf part (inline or through $ref) splits the cases as one beside the keyword would
    (
        {
            "$defs": {"two": {"required": ["x"], "properties": {"x": True}}},
            "allOf": [{"properties": {"b": True}}, {"oneOf": [{"$ref": "#/$defs/two"}, {"required": ["y"], "properties": {"y": True}}]}],
            "unevaluatedProperties": False,
        },
        [{"x": 1}, {"y": 1}, {"b": 1, "x": 1}],
        [{"x": 1, "y": 1}, {"x": 1, "z": 1}, {"b": 1}],
    ),
    (
        {
            "type": "array",
            "if": {"contains": {"const": "a"}},
            "then": {"if": {"contains": {"const": "b"}}, "then": {"contains": {"const": "c"}}},
            "unevaluatedItems": False,
        },
        [[], ["a"], ["a", "b", "c"], ["c", "a", "b"]],
        [["b"], ["a", "b"], ["a", "x"], ["c", "a"]],
    ),
    # an item a contains matches is evaluated (2020-12), adjacent or in an allOf part
    (
        {"type": "array", "prefixItems": [{"const": "x"}], "contains": {"const": "a"}, "unevaluatedItems": {"type": "number"}},
        [["x", "a"], ["x", 1, "a", 2], ["x", "a", "a"]],
        [["x", "b"], ["x"], ["x", "a", "b"], ["x", 1]],
    ),
    (
        {"type": "array", "allOf": [{"contains": {"multipleOf": 2}}, {"contains": {"multipleOf": 3}}], "unevaluatedItems": False},
        [[2, 3], [6], [2, 4, 9]],
        [[2, 5], [3], [2, 3, 5]],
    ),
    # anyOf branches that declare no property leave the evaluated set alone: only the two that do split the cases
    (
        {
            "type": "object",
            "properties": {"a": True},
            "anyOf": [
                {"properties": {"x": {"type": "integer"}}, "required": ["x"]},
                {"properties": {"y": True}, "required": ["y"]},
                {"required": ["a"]},
                {"minProperties": 3},
                {"maxProperties": 0},
                {"required": ["z"]},
            ],
            "unevaluatedProperties": False,
        },
        [{"x": 1}, {"y": 1}, {"a": 1}, {}, {"x": 1, "y": 2}, {"a": 1, "x": 2}],
        [{"a": 1, "x": "s"}, {"x": "s"}, {"b": 1}, {"a": 1, "b": 2}],
    ),
]


@pytest.mark.parametrize(("schema", "valid", "invalid"), UNEVALUATED_CASES)
def test_unevaluated_with_a_static_evaluated_set(schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    dfa = compile_lazy(schema_to_ir(schema)[0])
    for value, ok in [(v, True) for v in valid] + [(v, False) for v in invalid]:
        assert jsonschema.Draft202012Validator(schema).is_valid(value) == ok, value
        assert dfa.accepts(json.dumps(value, separators=(", ", ": ")).encode()) == ok, value


D2019 = "https://json-schema.org/draft/2019-09/schema"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "additionalItems": True, "unevaluatedItems": False},  # no keyword in 2020-12
        {"$schema": D2019, "type": "array", "additionalItems": True, "unevaluatedItems": False},  # alone: evaluates nothing
        {"$schema": D2019, "type": "array", "prefixItems": [True], "unevaluatedItems": False},  # no keyword in 2019-09
        {"$schema": D2019, "type": "array", "items": [{"type": "string"}], "unevaluatedItems": {"type": "integer"}},
        {"$schema": D2019, "type": "array", "items": [True], "additionalItems": {"type": "string"}, "unevaluatedItems": False},
        {"$schema": D2019, "type": "array", "items": [True], "contains": {"const": "a"}, "unevaluatedItems": {"type": "integer"}},
        {"$schema": D2019, "type": "array", "contains": {"const": 1}, "unevaluatedItems": False},
        {"$schema": D2019, "type": "array", "prefixItems": [{"type": "string"}], "items": False},  # tuples: items arrays
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "prefixItems": [{"type": "string"}], "maxItems": 2},
        {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}, "additionalItems": False},
    ],
)
def test_which_keywords_evaluate_items_follows_the_draft(schema: Any) -> None:
    """Arrays and ``unevaluatedItems`` read the item keywords of the schema's own draft, as
    ``jsonschema`` does (an ``additionalItems`` or ``prefixItems`` the draft does not define
    constrains and evaluates nothing; in 2019-09 an item a ``contains`` matches is evaluated, as
    in 2020-12)."""
    dfa = compile_lazy(schema_to_ir(schema)[0])
    validator = jsonschema.validators.validator_for(schema)(schema)
    for value in ([], [1], [1, 2], ["a"], ["a", 1], ["a", "b"], [1, "a"], ["a", "a", 3]):
        text = json.dumps(value, separators=(", ", ": ")).encode()
        assert dfa.accepts(text) == validator.is_valid(value), value


def test_an_items_array_is_a_schema_error_in_2020_12() -> None:
    """2020-12's meta-schema takes ``items`` as a schema only (its tuples are ``prefixItems``):
    an array there is named, never read as another draft's tuple."""
    with pytest.raises(SchemaError, match="prefixItems") as e:
        schema_to_ir({"type": "object", "properties": {"t": {"items": [{"type": "string"}]}}})
    assert e.value.keyword == "items" and e.value.pointer == "#/properties/t"
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}], "additionalItems": False}
    dfa = compile_lazy(schema_to_ir(draft7)[0])
    assert dfa.accepts(b'["a"]') and not dfa.accepts(b'["a", "b"]') and not dfa.accepts(b"[1]")


def test_unevaluated_that_depends_on_a_branch_is_refused_by_name() -> None:
    branches = [{"properties": {f"p{i}": {}}} for i in range(9)]  # 2^9 - 1 sets of declaring branches: past the cap
    schema = {"anyOf": branches, "unevaluatedProperties": False}
    with pytest.raises(UnsupportedSchemaError, match="depends on the branch") as e:
        schema_to_ir(schema)
    assert e.value.keyword == "unevaluatedProperties"
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"a": {}}, "unevaluatedProperties": False}
    wide = SchemaOptions(allow_undeclared_properties=True)
    assert compile_lazy(schema_to_ir(draft7, wide)[0]).accepts(b'{"b": 1}')  # not a draft-7 keyword: nothing to enforce


def test_unevaluated_beside_a_wide_any_of_is_exact() -> None:
    """``unevaluatedProperties`` beside an ``anyOf`` of six overlapping branches that declare
    properties (63 sets an instance can pass, none negated) accepts exactly what ``jsonschema``
    does on objects written in the declared order; twelve tagged branches exclude each other,
    so their sets are the twelve single branches."""
    wide = SchemaOptions(allow_undeclared_properties=True, infer_types=False)
    branches = [{"properties": {f"p{i}": {"type": "integer"}, f"q{i % 3}": {"type": "string"}}} for i in range(6)]
    schema = {"type": "object", "anyOf": branches, "unevaluatedProperties": {"type": "boolean"}}
    dfa = compile_lazy(schema_to_ir(schema, wide)[0])
    validator = jsonschema.Draft202012Validator(schema)
    values = [{}, {"p0": 1}, {"p0": True}, {"p0": "x"}, {"p2": 1, "q2": "s"}, {"p2": 1, "q0": True}, {"p5": 1, "q2": 1}]
    values += [{"z": True}, {"z": 1}]
    for value in values:
        assert dfa.accepts(json.dumps(value, separators=(", ", ": ")).encode()) == validator.is_valid(value), value
    tagged = [{"properties": {"kind": {"const": f"k{i}"}, f"p{i}": {"type": "integer"}}, "required": ["kind"]} for i in range(12)]
    schema = {"type": "object", "anyOf": tagged, "unevaluatedProperties": False}
    dfa = compile_lazy(schema_to_ir(schema, wide)[0])
    assert dfa.accepts(b'{"kind": "k7", "p7": 3}') and dfa.accepts(b'{"kind": "k11"}')
    assert not dfa.accepts(b'{"kind": "k7", "p6": 3}') and not dfa.accepts(b'{"kind": "k12"}')


def test_a_ref_target_converts_once_whatever_unrelated_refs_are_being_unrolled() -> None:
    """The conversion memo ignores the unrolling depth of ``$ref`` targets a schema cannot
    reach: a leaf reached through two different references is converted once (one IR object),
    while a recursive target still sees its own depth; ``reachable_refs`` follows ``$ref``s,
    and a reference that does not resolve makes every target count."""
    from structgen.schemas.json_schema import Converter
    from structgen.schemas.schema_options import ConversionReport

    root = {
        "$defs": {
            "a": {"type": "object", "properties": {"x": {"$ref": "#/$defs/leaf"}}},
            "b": {"type": "array", "items": {"$ref": "#/$defs/leaf"}, "maxItems": 2},
            "leaf": {"type": "string", "pattern": "^[a-z]+$"},
            "tree": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}}}},
        },
        "anyOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}, {"$ref": "#/$defs/tree"}],
    }
    cv = Converter(root, SchemaOptions(), ConversionReport())
    cv.convert(root, "#")
    leaf, tree = root["$defs"]["leaf"], root["$defs"]["tree"]
    assert len([k for k in cv.memo if k[0] == id(leaf)]) == 1
    assert len([k for k in cv.memo if k[0] == id(tree)]) > 1  # one per unrolling depth of itself
    assert cv.reachable_refs(root["$defs"]["a"]) == frozenset({"#/$defs/leaf"})
    assert cv.reachable_refs(tree) == frozenset({"#/$defs/tree"})
    assert cv.reachable_refs({"$ref": "#/$defs/nowhere"}) is None
    dfa = compile_lazy(schema_to_ir(root, SchemaOptions())[0])
    assert dfa.accepts(b'{"x": "ab"}') and dfa.accepts(b'["ab", "cd"]') and dfa.accepts(b'{"kids": [{"kids": []}]}')
    assert not dfa.accepts(b'["AB"]') and not dfa.accepts(b'["a", "b", "c"]')


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=12))
def test_a_literal_encodes_as_the_one_string_json_dumps_writes(text: str) -> None:
    from structgen.schemas.charset import CharSet
    from structgen.schemas.ir import Lit, seq
    from structgen.schemas.json_strings import encode_charset, encode_json_string_content

    encoded = encode_json_string_content(Lit(text.encode()))
    written = json.dumps(text, ensure_ascii=False)[1:-1].encode()
    assert compile_lazy(encoded).accepts(written)
    per_char = seq(*[encode_charset(CharSet.of_chars(c)) for c in text])  # each code point on its own
    assert compile_lazy(per_char).accepts(written)
    if written:
        assert not compile_lazy(encoded).accepts(written[:-1])


def test_without_infer_types_a_schema_without_type_allows_every_type() -> None:
    """JSON Schema applies ``minLength`` / ``minimum`` / ``properties`` to their own types only;
    ``infer_types=False`` reads them so, the default narrows to those types."""
    schema = {"minLength": 3, "minimum": 10, "properties": {"a": {"type": "integer"}}}
    exact = compile_lazy(schema_to_ir(schema, SchemaOptions(infer_types=False))[0])
    narrow = compile_lazy(schema_to_ir(schema)[0])
    validator = jsonschema.Draft202012Validator(schema)
    for value in ("abc", "ab", 12, 9, {"a": 1}, {"a": "x"}, [1, "x"], None, True):
        text = json.dumps(value, separators=(", ", ": ")).encode()
        assert exact.accepts(text) == validator.is_valid(value), value
        assert not narrow.accepts(text) or validator.is_valid(value), value  # a narrowing, never wider
    assert not narrow.accepts(b"[1]") and not narrow.accepts(b"null")


@pytest.mark.parametrize("name", ["strict", "allow_undeclared_properties", "infer_types"])
def test_schema_options_flags_must_be_bools(name: str) -> None:
    """A flag given as anything but a bool (``"no"`` is truthy) is a named error, never a
    narrowing silently turned on or off."""
    with pytest.raises(ValueError, match=f"{name} must be a bool"):
        SchemaOptions(**{name: "no"})


def test_an_all_of_that_reaches_itself_through_refs_is_converted_not_merged_forever() -> None:
    """``allOf`` parts are merged through their ``$ref``s; a part that leads back to a target
    being merged stays a reference, whose recursion the converter bounds and names, instead
    of the merge recursing until Python's stack runs out."""
    cyclic = {
        "$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}], "required": ["x"]}, "b": {"allOf": [{"$ref": "#/$defs/a"}], "type": "object"}},
        "$ref": "#/$defs/a",
    }
    with pytest.raises(UnsupportedSchemaError, match="recursive \\$ref") as e:
        schema_to_ir(cyclic)
    assert e.value.pointer == "#/$defs/a"
    chain = {
        "$defs": {
            "a": {"allOf": [{"$ref": "#/$defs/b"}], "required": ["x"]},
            "b": {"type": "object", "properties": {"x": {"type": "integer"}}},
        },
        "allOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}],
    }
    dfa = compile_lazy(schema_to_ir(chain)[0])
    assert dfa.accepts(b'{"x": 1}') and not dfa.accepts(b"{}") and not dfa.accepts(b'{"x": "a"}')


def test_a_pattern_automaton_reads_json_escapes() -> None:
    """A ``pattern`` whose look-arounds sit in a repetition becomes one byte automaton over the
    raw text; inside a JSON string its quotes, backslashes and control characters are read
    through their escapes, as ``jsonschema`` reads the decoded string."""
    schema = {"type": "string", "pattern": '^(?:(?<!\\\\)"|[^"])*$', "maxLength": 6}
    dfa = compile_lazy(schema_to_ir(schema)[0])
    validator = jsonschema.Draft202012Validator(schema)
    for value in ['a"b', 'a\\"b', "\\", "\n\t", 'x"\n"', '\\\\"', "ab\\c", "é\"'", "a" * 7]:
        text = json.dumps(value, ensure_ascii=False).encode()
        assert dfa.accepts(text) == validator.is_valid(value), value
