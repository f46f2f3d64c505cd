"""``not`` of any subschema, ``if`` / ``then`` / ``else``, overlapping ``oneOf``, dependencies,
property counts, ``contains`` counts and ``propertyNames``: compiled exactly (within the
documented layout), checked text by text against ``jsonschema``."""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Any

import pytest
from structgen.fsm import Constraint, Vocabulary
from structgen.fsm import compile as compile_constraint
from structgen.fsm.dfa import Budget
from structgen.fsm.lazy_compile import compile_lazy
from structgen.schemas.errors import SchemaError, UnsupportedSchemaError
from structgen.schemas.ir import And, Minus, new_products
from structgen.schemas.json_schema import Converter, schema_to_ir
from structgen.schemas.schema_options import ConversionReport, SchemaOptions

from structgen.bench.conformance import sample_strings
from structgen.bench.conformance_items import exact_validator
from structgen.bench.schema_fuzz import fuzz


def _dfa(schema: Any) -> Any:
    node, _ = schema_to_ir(schema)
    return compile_lazy(node, Budget())


def _accepts(dfa: Any, text: str) -> bool:
    s = dfa.walk(dfa.initial, text.encode())
    return s > 0 and dfa.is_accepting(s)


def _valid(schema: Any, text: str) -> bool:
    """``jsonschema``'s verdict, with ``multipleOf`` in exact decimal arithmetic (the spec's;
    stock ``jsonschema`` divides floats)."""
    return bool(exact_validator(schema).is_valid(json.loads(text)))


OBJ_AB = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}

CASES: list[tuple[Any, list[str], list[str]]] = [
    # general not: a value fails the negated schema exactly when it fails one of its keywords
    ({**OBJ_AB, "not": {"required": ["a"]}}, ["{}", '{"b": "x"}'], ['{"a": 1}', '{"a": 1, "b": "x"}']),
    ({**OBJ_AB, "not": {"properties": {"a": {"minimum": 3}}}}, ['{"a": 2}', '{"a": -7, "b": ""}'], ['{"a": 3}', "{}", '{"b": "x"}']),
    ({"type": "integer", "not": {"const": 3}}, ["2", "-3", "30"], ["3"]),
    ({"type": "integer", "not": {"enum": [0, 1]}}, ["2", "-1"], ["0", "1", "-0"]),
    ({"type": "number", "not": {"type": "integer"}}, ["2.5", "-0.125"], ["2", "-0"]),
    ({"type": "number", "maximum": 10, "not": {"const": 2.5}}, ["2.25", "7", "-1.5"], ["2.5", "11"]),
    ({"type": "string", "not": {"pattern": "^a"}}, ['"ba"', '""'], ['"a"', '"abc"']),
    ({"type": "string", "not": {"anyOf": [{"maxLength": 1}, {"pattern": "z"}]}}, ['"ab"', '"xyw"'], ['"a"', '"az"', '""']),
    ({"type": "array", "items": {"type": "integer"}, "not": {"items": {"minimum": 0}}}, ["[-1]", "[3, -2]"], ["[]", "[1, 2]"]),
    (
        {
            "not": {"enum": [[1, 2], {"a": 1}]},
            "type": ["array", "object"],
            "items": {"type": "integer"},
            "properties": {"a": {"type": "integer"}},
        },
        ["[1]", "[2, 1]", '{"a": 2}', "{}"],
        ["[1, 2]", '{"a": 1}'],
    ),
    ({**OBJ_AB, "not": {"anyOf": [{"required": ["a"]}, {"required": ["b"]}]}}, ["{}"], ['{"a": 1}', '{"b": "x"}']),
    (
        {"type": "object", "additionalProperties": True, "not": {"additionalProperties": {"type": "integer"}}},
        ['{"k": "x"}', '{"j": 1, "k": null}'],
        ["{}", '{"k": 1}', '{"k": "x", "k": 1}'],
    ),
    # if / then / else
    (
        {
            "type": "object",
            "properties": {"k": {"enum": ["x", "y"]}, "a": {"type": "integer"}},
            "required": ["k"],
            "if": {"properties": {"k": {"const": "x"}}},
            "then": {"required": ["a"]},
            "else": {"properties": {"a": False}},
        },
        ['{"k": "x", "a": 1}', '{"k": "y"}'],
        ['{"k": "x"}', '{"k": "y", "a": 1}'],
    ),
    ({"type": "integer", "if": {"minimum": 10}, "then": {"multipleOf": 10}}, ["20", "7", "-3"], ["11", "15"]),
    # not of items after a prefix: some later item fails them
    (
        {"type": "array", "items": {"enum": [1, "a"]}, "maxItems": 3, "not": {"prefixItems": [{"const": 1}], "items": {"const": "a"}}},
        ["[1, 1]", '["a", "a", 1]', '["a", "a", "a"]'],
        ["[]", "[1]", '[1, "a"]', '[1, "a", "a"]'],
    ),
    # not of a format whose grammar is exact
    ({"type": "string", "not": {"format": "date"}}, ['"2023-02-30"', '"x"', '"2023-2-28"'], ['"2023-02-28"', '"2024-02-29"']),
    ({"type": "string", "maxLength": 8, "not": {"format": "ipv4"}}, ['"1.2.3"', '"01.2.3.4"'], ['"1.2.3.4"', '"10.0.0.1"']),
    # multipleOf by a remainder automaton, and its complement
    ({"type": "integer", "multipleOf": 7, "minimum": 0}, ["0", "14", "7007"], ["15", "-7", "70.5"]),
    ({"type": "number", "multipleOf": 0.3}, ["0.3", "-0.9", "1.2", "30"], ["0.31", "1", "0.1"]),
    ({"type": "integer", "not": {"multipleOf": 3}}, ["1", "-2", "100"], ["0", "3", "-9", "99"]),
    ({"type": "number", "not": {"multipleOf": 1.5}, "maximum": 10}, ["1", "2.25", "-0.5"], ["1.5", "3", "-4.5", "11"]),
    ({"not": {"multipleOf": 7}}, ["1", "6.5"], ["14", '"x"', "null"]),
    # overlapping oneOf: exactly one branch
    ({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}, ["-5", "2.5"], ["5", "0", "-2.5"]),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
        },
        ['{"a": 1}', '{"b": 2}'],
        ["{}", '{"a": 1, "b": 2}'],
    ),
    # dependencies
    (
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "dependentRequired": {"a": ["b"]}},
        ['{"a": 1, "b": 2}', '{"b": 2}', "{}"],
        ['{"a": 1}'],
    ),
    (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "dependencies": {"a": {"properties": {"b": {"minimum": 5}}, "required": ["b"]}},
        },
        ['{"a": 1, "b": 5}', '{"b": 2}'],
        ['{"a": 1}', '{"a": 1, "b": 2}'],
    ),
    # property counts, duplicate keys counted once (a parser keeps the last)
    (
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "minProperties": 1},
        ['{"a": 1}', '{"a": 1, "b": 2}'],
        ["{}"],
    ),
    (
        {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "integer"}, "minProperties": 2},
        ['{"a": 1, "x": 2}'],
        ['{"x": 1}', '{"x": 1, "x": 2}', '{"a": 1}'],
    ),
    ({"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 1}, ['{"x": 1}', "{}"], ['{"x": 1, "y": 2}']),
    # a format JSON Schema does not define is an annotation: it implies no type either
    ({"type": "object", "properties": {"n": {"format": "positiveInteger"}}}, ['{"n": 1}', '{"n": "x"}', '{"n": [true]}'], ["[]", '"n"']),
    # at least one member where nothing is declared: one or more extras, no product
    (
        {"type": "object", "patternProperties": {"^a": {"type": "integer"}}, "additionalProperties": False, "minProperties": 1},
        ['{"ab": 1}', '{"ab": 1, "ac": 2}'],
        ["{}", '{"b": 1}', '{"ab": "x"}'],
    ),
    # at most one member: a union of one-member objects, no product with the layout
    (
        {
            "properties": {"a": {"type": "integer"}, "b": {}},
            "additionalProperties": {"type": "string"},
            "minProperties": 1,
            "maxProperties": 1,
        },
        ['{"a": 1}', '{"b": [1]}', '{"c": "x"}'],
        ["{}", '{"a": 1, "b": 2}', '{"c": 1}', '{"a": "x"}'],
    ),
    ({"properties": {"a": {}, "b": {}}, "required": ["b"], "maxProperties": 1}, ['{"b": 1}'], ['{"a": 1}', "{}", '{"a": 1, "b": 1}']),
    ({"type": "object", "properties": {"a": {}}, "maxProperties": 0}, ["{}"], ['{"a": 1}']),
    # more members asked for than names declared: undeclared ones are generated (JSON Schema's
    # default) instead of the narrowing leaving no object
    (
        {"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 2},
        ['{"a": 1, "x": [true]}', '{"a": 1, "x": {}}'],
        ['{"a": 1}', '{"a": 1, "a": 2}', '{"x": 1, "x": 2}', '{"a": "s", "x": 1}'],
    ),
    # contains with counts
    ({"type": "array", "items": {"type": "integer"}, "contains": {"const": 1}}, ["[1]", "[2, 1, 3]"], ["[]", "[2, 3]"]),
    (
        {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 5}, "minContains": 2, "maxContains": 3},
        ["[5, 6]", "[1, 5, 2, 6, 7]"],
        ["[5]", "[5, 6, 7, 8]"],
    ),
    # uniqueItems over a finite set of item values (JSON-equal texts count as one value)
    (
        {"type": "array", "items": {"enum": ["a", "b", 1, 1.0]}, "uniqueItems": True},
        ['["a", "b"]', "[1]", "[]"],
        ['["a", "a"]', "[1, 1.0]"],
    ),
    ({"type": "array", "items": {"type": "boolean"}, "uniqueItems": True}, ["[true, false]"], ["[true, true]"]),
    # propertyNames of any schema (through $ref, anyOf, not …)
    (
        {
            "$defs": {"k": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 3}},
            "type": "object",
            "propertyNames": {"$ref": "#/$defs/k"},
            "additionalProperties": {"type": "integer"},
        },
        ['{"abc": 1}'],
        ['{"ABC": 1}', '{"abcd": 1}'],
    ),
    (
        {
            "type": "object",
            "propertyNames": {"anyOf": [{"const": "ab"}, {"pattern": "^x"}], "not": {"const": "xy"}},
            "additionalProperties": {"type": "integer"},
        },
        ['{"ab": 1}', '{"xz": 2}'],
        ['{"xy": 2}', '{"abc": 1}'],
    ),
    # propertyNames beyond the string keywords, and its complement
    (
        {"type": "object", "additionalProperties": {"type": "integer"}, "not": {"propertyNames": {"maxLength": 1}}},
        ['{"ab": 1}', '{"a": 1, "bc": 2}'],
        ['{"a": 1}', "{}"],
    ),
    (
        {
            "type": "object",
            "additionalProperties": {"type": "integer"},
            "not": {"propertyNames": {"anyOf": [{"const": "ab"}, {"pattern": "^x"}], "not": {"const": "xy"}}},
        },
        ['{"abc": 1}', '{"ab": 1, "xy": 2}', '{"q": 1}'],
        ['{"ab": 1}', '{"xz": 1}', "{}"],
    ),
]


@pytest.mark.parametrize(("schema", "accepted", "rejected"), CASES)
def test_exact_keywords_accept_and_reject_as_jsonschema(schema: Any, accepted: list[str], rejected: list[str]) -> None:
    """Each text is accepted exactly when ``jsonschema`` says it is valid, and random texts of
    the automaton all validate."""
    _check_exact(schema, accepted, rejected)


def _check_exact(schema: Any, accepted: list[str], rejected: list[str]) -> None:
    """``accepted`` texts valid and accepted, ``rejected`` ones invalid and rejected, and 30
    random texts of the automaton valid."""
    dfa = _dfa(schema)
    for text in accepted:
        assert _valid(schema, text), text
        assert _accepts(dfa, text), text
    for text in rejected:
        assert not _valid(schema, text), text
        assert not _accepts(dfa, text), text
    for text in sample_strings(dfa, 30, random.Random(0), max_len=300):
        assert _valid(schema, text.decode()), text


def test_draft7_ref_siblings_are_ignored_under_not() -> None:
    """Before 2019-09 the keywords beside ``$ref`` are ignored, so ``not`` of such a schema
    negates the reference alone: negating the ignored ``type`` as well would admit "x"."""
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"s": {"type": "string", "maxLength": 3}},
        "type": "string",
        "not": {"$ref": "#/definitions/s", "minLength": 2},
    }
    dfa = _dfa(schema)
    assert not _accepts(dfa, '"x"') and not _valid(schema, '"x"')
    assert _accepts(dfa, '"long"') and _valid(schema, '"long"')


def test_a_bad_multiple_of_under_not_is_named() -> None:
    with pytest.raises(SchemaError, match="multipleOf must be a number above 0") as e:
        schema_to_ir({"not": {"multipleOf": 0}})
    assert e.value.keyword == "multipleOf" and e.value.pointer == "#/not"


def test_unexpressible_complements_are_named_errors() -> None:
    """A complement that is not regular is refused naming the keyword, never dropped."""
    refused = (({"uniqueItems": True}, "uniqueItems"), ({"multipleOf": 123456.789}, "multipleOf"))
    for neg, word in refused:
        with pytest.raises(UnsupportedSchemaError, match=word) as e:
            schema_to_ir({"not": neg})
        assert e.value.keyword == "not"


def test_the_complement_of_unique_items_over_a_finite_item_set() -> None:
    """Over a finite set of item values, arrays that fail ``uniqueItems`` hold one value (up to
    JSON equality) at least twice: exact, where ``not`` or an overlapping ``oneOf`` needs it,
    in every draft."""
    schema = {
        "oneOf": [
            {"type": "array", "maxItems": 2, "items": {"enum": ["a", 0, 0.0]}, "uniqueItems": True},
            {"type": "array", "items": {"const": "a"}},
        ]
    }
    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "not": {"items": {"type": "boolean"}, "uniqueItems": True},
    }
    for sch in (schema, draft7):
        dfa = _dfa(sch)
        for value in ([], ["a"], [0], ["a", "a"], [0, 0.0], ["a", 0], [0, "a", "a"], ["a", "a", "a"], [1], [True, True], [True, False, 1]):
            text = json.dumps(value, separators=(", ", ": "))
            assert _accepts(dfa, text) == _valid(sch, text), (sch, value)


def test_a_member_count_past_distinct_names_is_refused_by_name(gpt2_vocab: Vocabulary) -> None:
    """Members matched by patternProperties / additionalProperties may repeat a name, so they
    count once: an object whose minProperties is past the declared names plus one is left
    without values (a narrowing), a union keeps its other branches, and a schema left empty so is
    refused naming the keyword, never reported as unsatisfiable."""
    counted = {"type": "object", "minProperties": 2, "additionalProperties": False, "patternProperties": {"^[a-z]+$": {"type": "integer"}}}
    with pytest.raises(UnsupportedSchemaError, match="cannot keep distinct") as e:
        compile_constraint(Constraint.json_schema({"properties": {"t": counted}, "required": ["t"]}), gpt2_vocab)
    assert (e.value.keyword, e.value.pointer) == ("minProperties", "#/properties/t")
    fsm = compile_constraint(Constraint.json_schema({"anyOf": [counted, {"type": "string", "maxLength": 3}]}), gpt2_vocab)
    assert fsm.dfa.accepts(b'"ab"') and not fsm.dfa.accepts(b'{"a": 1, "b": 2}')


def test_negating_a_recursive_ref_stays_sound_and_finite() -> None:
    """``oneOf`` whose branches recurse: the negations of a recursive ``$ref`` are cut at the
    unrolling depth (a narrowing), so the compile ends and stays sound."""
    schema = {
        "$defs": {
            "node": {"oneOf": [{"type": "integer"}, {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}, {"minimum": 0}]}
        },
        "$ref": "#/$defs/node",
    }
    dfa = _dfa(schema)
    assert _accepts(dfa, "-1") and not _accepts(dfa, "1")
    for text in sample_strings(dfa, 30, random.Random(1), max_len=300):
        assert _valid(schema, text.decode()), text


def test_random_schemas_with_conditionals_and_negations_match_hypothesis_instances() -> None:
    """The fuzzer's schemas (general ``not``, ``if``, dependencies, counts, ``contains``):
    hypothesis-jsonschema instances of each schema's negation are all rejected; most valid
    instances are accepted (the rest differ only by the layout's narrowings)."""
    results = fuzz(40, seed=7, depth=3, instances=5)
    unsound = [(s, r.unsound[:2]) for s, r in results if r.unsound]
    assert not unsound, unsound[:2]
    assert not [s for s, r in results if r.status == "crash"]
    invalid = sum(r.invalid_instances for _s, r in results)
    valid = sum(r.valid_instances for _s, r in results)
    accepted = sum(r.valid_accepted for _s, r in results)
    assert invalid >= 40 and valid >= 40 and accepted >= 0.6 * valid


def test_exact_formats_match_the_checker() -> None:
    """``EXACT_FORMATS`` accept exactly what ``jsonschema``'s format checker accepts (near
    misses included), which is what makes their complement exact."""
    import jsonschema
    from structgen.schemas.formats import EXACT_FORMATS, format_ir

    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    rng = random.Random(0)
    digits = "0123456789"

    def date() -> str:
        parts = [
            "".join(rng.choice(digits) for _ in range(4)),
            "".join(rng.choice(digits) for _ in range(2)),
            "".join(rng.choice(digits) for _ in range(rng.choice([2, 2, 1, 3]))),
        ]
        return rng.choice(["-", "-", "/"]).join(parts)

    def ipv4() -> str:
        octet = lambda: str(rng.randint(0, 255)) if rng.random() < 0.8 else rng.choice(["256", "0" + str(rng.randint(0, 99)), "999"])  # noqa: E731
        return ".".join(octet() for _ in range(rng.choice([4, 4, 4, 3, 5])))

    def pointer() -> str:
        return "".join(rng.choice(["/", "/", "~0", "~1", "~", "~2", "a", "é", "\n", ""]) for _ in range(rng.randint(0, 5)))

    for name, draw in (("date", date), ("ipv4", ipv4), ("json-pointer", pointer)):
        assert name in EXACT_FORMATS
        node = format_ir(name)
        assert node is not None
        dfa = compile_lazy(node)
        hits = 0
        for _ in range(3000):
            text = draw()
            ok = checker.conforms(text, name)
            hits += ok
            assert dfa.accepts(text.encode()) == ok, (name, text)
        assert 20 < hits < 3000


_FORMAT_SEEDS = {
    "date-time": ["2020-01-01T00:00:00Z", "1999-12-31t23:59:59.123+05:30", "2020-02-30T25:61:00-00:00"],
    "hostname": ["example.com", "a-b.c.d", "xn--bcher-kva.example", "a" * 70 + ".com"],
    "ipv6": ["::1", "1:2:3:4:5:6:7:8", "::ffff:1.2.3.4", "fe80::1%eth0", "1::2::3"],
    "uri": ["http://a.b/c?d#e", "urn:isbn:0451450523", "mailto:a@b.c", "http://[::1]:80/%20x", "ht tp://x"],
    "uri-reference": ["../a/b?c", "#frag", "", "//host/p", "a b"],
    "uuid": ["12345678-1234-1234-1234-123456789abc", "{12345678-1234-1234-1234-123456789abc}", "1234567-81234-1234-1234-123456789abc"],
    "duration": ["P1D", "-P1.5Y", "PT1H2M3S", "P1W", "P1Y2M3DT4H5M6S", "P", "PT"],
    "email": ["a@b", "@", "ab"],
    "idn-email": ["ü@b", "x"],
    "iri": ["http://a/ü?x#y", "urn:ex:a", "ü:x", "a b", "x", "http://[::1]/%41", "http://a/b\n"],
    "iri-reference": ["../ü/b?c", "#frag", "", "http://a/ü", "a b", "%zz", "a\n"],
    "time": ["12:00:00Z", "23:59:60.5+01:00", "1:00:00Z", "12:00:00z\n", "12:00"],
    "uri-template": ["http://a/{x}", "{+path}/here{?q,r}", "", "a}b", "{x", "{a{b}", "{=x}"],
    "relative-json-pointer": ["0", "1/a", "10#", "0/", "1²", "\u0661/x~0", "100", "01", "1a", "#"],
    "idn-hostname": ["example.com", "bücher.de", "a\u3002b", "A.b.", "a_b", "-a", "a..b", "xn--abc"],
}


def _mutations(text: str, rng: random.Random, n: int) -> list[str]:
    pool = "aZz09:-./?#[]%@_~+ \n\t\u0661\u212a\u017f\u0131{}PTDWYMHSunid,"
    out = []
    for _ in range(n):
        s = list(text)
        for _ in range(rng.randint(1, 3)):
            op, at = rng.random(), rng.randint(0, len(s))
            if op < 0.4 and s:
                s[min(at, len(s) - 1)] = rng.choice(pool)
            elif op < 0.7:
                s.insert(at, rng.choice(pool))
            elif s:
                del s[min(at, len(s) - 1)]
        out.append("".join(s).upper() if rng.random() < 0.1 else "".join(s))
    return out


def test_the_extra_digits_are_every_isdigit_character_beyond_backslash_d() -> None:
    """The wide ``relative-json-pointer`` lists str.isdigit's characters that ``\\d`` does not
    hold: the running Python's Unicode database has no others."""
    from structgen.schemas.formats import wide_format_ir

    wide = compile_lazy(wide_format_ir("relative-json-pointer"))
    missing = [hex(c) for c in range(0x110000) if chr(c).isdigit() and not wide.accepts(chr(c).encode())]
    assert missing == []


def test_wide_formats_hold_every_string_the_checker_accepts() -> None:
    """``not: {format: …}`` for a narrowed format generates strings outside a superset of the
    checker's language: that superset must hold every string the checker accepts (near misses
    of seeds and of our own format grammar included), and still leave strings out."""
    import jsonschema
    from structgen.schemas.formats import WIDE_FORMAT_REGEXES, format_ir, wide_format_ir

    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    rng = random.Random(3)
    for name in WIDE_FORMAT_REGEXES:
        wide = compile_lazy(wide_format_ir(name))
        seeds = list(_FORMAT_SEEDS[name])
        narrow = format_ir(name)
        if narrow is not None:
            seeds += [s.decode() for s in sample_strings(compile_lazy(narrow), 20, rng)]
        accepted = outside = 0
        for text in seeds + [m for s in seeds for m in _mutations(s, rng, 60)]:
            if checker.conforms(text, name):
                accepted += 1
                assert wide.accepts(text.encode()), (name, text)
            elif not wide.accepts(text.encode()):
                outside += 1
        assert accepted >= 3 and outside >= 20, (name, accepted, outside)


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "string", "not": {"format": "uri"}}, ["a b", "${x}", "no-scheme"], ["http://a.b", "urn:x"]),
        ({"type": "string", "not": {"format": "uri-template"}}, ["a}b", "{x", "}{"], ["http://a/{x}", "plain", ""]),
        ({"type": "string", "not": {"format": "json-pointer"}}, ["a", "/~2", "/a~"], ["", "/a~0/b"]),
        ({"type": "string", "not": {"format": "time"}}, ["12:00", "x"], ["12:00:00Z", "23:59:59.5+01:00"]),
        ({"type": "string", "not": {"format": "iri"}}, ["x", "a b", "1:x"], ["http://a/b", "urn:x"]),
        ({"type": "string", "not": {"format": "iri-reference"}}, ["a b", "a{b"], ["../a", "", "#x"]),
        ({"type": "string", "not": {"format": "relative-json-pointer"}}, ["", "#", "a/b", "/0"], ["0", "1/a", "2#"]),
        ({"type": "string", "not": {"format": "idn-hostname"}}, ["", "a b", "a_b", "a/b"], ["bücher.de", "a.b"]),
        ({"oneOf": [{"type": "string", "maxLength": 2}, {"type": "string", "format": "idn-hostname"}]}, ["_", "a.bc"], ["ab", "a_bc"]),
        (
            {"oneOf": [{"format": "uuid"}, {"type": "string", "pattern": "^[0-9a-f-]+$"}]},
            ["abc", "12-34"],
            ["12345678-1234-1234-1234-123456789abc"],
        ),
        # draft 4 does not check `date`: every string passes it, so `not` of it fails every string
        ({"$schema": "http://json-schema.org/draft-04/schema#", "not": {"format": "date"}}, [], ["2020-01-01", "x"]),
        ({"$schema": "http://json-schema.org/draft-07/schema#", "not": {"format": "uuid"}}, [], ["x"]),
        # no string is known to fail format regex (its checker's language is not regular): none is generated
        ({"anyOf": [{"type": "integer"}, {"not": {"format": "regex"}}]}, [1], ["x", "(a)", None]),
    ],
)
def test_not_of_a_format_is_sound(schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    dfa = _dfa(schema)
    for value in valid:
        assert _valid(schema, json.dumps(value)) and _accepts(dfa, json.dumps(value)), value
    for value in invalid:
        assert not _valid(schema, json.dumps(value)) and not _accepts(dfa, json.dumps(value)), value
    for text in sample_strings(dfa, 30, random.Random(0)):
        assert _valid(schema, text.decode()), text


_EMAIL = {"type": "string", "format": "email", "maxLength": 255}
_CLOSED = {"type": "object", "additionalProperties": False, "properties": {"email": _EMAIL, "kind": {"enum": ["P", "S"]}}}


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        # a part with additionalProperties merged with one that declares properties: each name
        # takes both parts' words for it (no product of two object automata)
        (
            {
                **_CLOSED,
                "oneOf": [
                    {"properties": {"kind": {"const": "P"}}, "required": ["email"]},
                    {"properties": {"kind": {"const": "S"}}, "required": ["kind"]},
                ],
            },
            # (the discriminator "kind" is generated in both branches: a narrowing)
            ['{"email": "a@b.io", "kind": "P"}', '{"kind": "S"}', '{"email": "a@b.io", "kind": "S"}'],
            ['{"email": "ab", "kind": "P"}', '{"kind": "P"}', '{"email": "a@b.io", "x": 1}', "{}"],
        ),
        (
            {
                "allOf": [
                    {"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
                    {"properties": {"b": {"maxLength": 2}, "a": {"minimum": 3}}},
                ]
            },
            ['{"a": 3, "b": "xy"}', '{"c": "z"}', "{}"],
            ['{"a": 2}', '{"b": "xyz"}', '{"b": 1}', '{"c": 1}'],
        ),
        (
            {"allOf": [{"properties": {"a": {}}, "additionalProperties": False}, {"properties": {"b": {}}, "required": ["b"]}]},
            [],
            ['{"b": 1}', '{"a": 1, "b": 1}', '{"a": 1}'],
        ),
        (
            {
                "allOf": [
                    {"additionalProperties": {"type": "integer"}},
                    {"properties": {"a": {"minimum": 0}}, "additionalProperties": {"maximum": 9}},
                ]
            },
            ['{"a": 12, "b": 9}', "{}"],
            ['{"a": -1}', '{"b": 10}', '{"a": "x"}'],
        ),
    ],
)
def test_additional_properties_merge_across_parts(schema: Any, valid: list[str], invalid: list[str]) -> None:
    from structgen.schemas.json_keywords import merge_into

    assert merge_into(dict(schema["allOf"][0]), schema["allOf"][1]) if "allOf" in schema else True
    test_intersections_and_merged_refs(schema, valid, invalid)


_ALARM_BASE = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "cell": {"type": "string", "pattern": "^[^/]+/[^/]+$"},
        "interval": {"type": "integer", "minimum": 0},
        "message": {"type": "string", "maxLength": 40},
    },
}
_ALARMS = {
    "$schema": "http://json-schema.org/draft-04/schema#",
    "definitions": {
        "base": _ALARM_BASE,
        "expected": {"allOf": [{"$ref": "#/definitions/base"}, {"properties": {"expected": {}}, "required": ["name", "expected"]}]},
        "min": {
            "allOf": [
                {"$ref": "#/definitions/base"},
                {"properties": {"min": {"type": "number"}}, "required": ["name", "min"]},
                {"not": {"required": ["max"]}},
            ]
        },
        "max": {
            "allOf": [
                {"$ref": "#/definitions/base"},
                {"properties": {"max": {"type": "number"}}, "required": ["name", "max"]},
                {"not": {"required": ["min"]}},
            ]
        },
        "range": {
            "allOf": [
                {"$ref": "#/definitions/base"},
                {"properties": {"min": {"type": "number"}, "max": {"type": "number"}}, "required": ["name", "min", "max"]},
            ]
        },
    },
    "oneOf": [{"$ref": f"#/definitions/{k}"} for k in ("expected", "min", "max", "range")],
}


_OUTPUTS = {
    "definitions": {
        "simple": {"type": "string", "pattern": "^[A-Za-z]+$"},
        "macro": {"type": "string", "pattern": "^~[A-Za-z]+$"},
        "output": {"oneOf": [{"$ref": "#/definitions/simple"}, {"$ref": "#/definitions/macro"}]},
    },
    "type": "object",
    "additionalProperties": {
        "oneOf": [
            {"$ref": "#/definitions/output"},
            {
                "type": "object",
                "properties": {"normal": {"$ref": "#/definitions/output"}},
                "additionalProperties": {"$ref": "#/definitions/output"},
            },
        ]
    },
}


def test_a_spread_negation_leaves_the_same_reference_elsewhere_unbounded() -> None:
    """An intersection spread over a negated $ref, whose merged part holds the same $ref
    unnegated: the merged part's reference is converted as any other (it was counted as
    unrolled, and the object branch lost every member)."""
    valid = ['{"L1": {"normal": "B", "L3": "C"}}', '{"L1": "B"}', '{"L1": {"L3": "B"}}', '{"L1": "~C"}']
    test_intersections_and_merged_refs(_OUTPUTS, valid, ['{"L1": {"normal": 1}}', '{"L1": "~"}', '{"L1": {"L3": "B", "x": 2}}'])


def test_a_spread_keeps_alternatives_that_only_objects_contradict() -> None:
    """An alternative requiring a name another forbids validates every value that is not an
    object: where its types allow strings it is kept ("ab" passes only through it)."""
    either = ["string", "object"]
    schema = {
        "type": either,
        "allOf": [
            {"anyOf": [{"type": "string"}, {"type": "object"}]},  # merged: the next two are spread
            {"anyOf": [{"type": either, "required": ["a"]}, {"type": "string", "maxLength": 1}]},
            {"anyOf": [{"type": either, "properties": {"a": False}}, {"type": "string", "minLength": 3}]},
        ],
    }
    test_intersections_and_merged_refs(schema, ['"ab"', '"abcd"', '"a"', '""'], ['{"a": 1}', "{}", "1"])


def test_overlapping_one_of_over_a_shared_base_is_exact_without_object_products() -> None:
    """Overlapping oneOf branches that share an allOf part: the shared part is taken out of the
    oneOf, and each branch's negations of the others are spread into alternatives that merge
    keyword by keyword (no product of object automata); the language is jsonschema's."""
    from structgen.schemas.json_combinators import factor_one_of

    node, _ = schema_to_ir(_ALARMS)
    assert not [n for n in new_products(node, {}) if isinstance(n, And)], "an intersection was left as a product automaton"
    valid = ['{"name": "a", "expected": 1}', '{"name": "a", "min": 1}', '{"name": "a", "min": 1, "max": 2}', '{"name": "a", "max": 2.5}']
    invalid = ['{"name": "a", "expected": 1, "min": 1}', '{"name": "a"}', '{"name": "a", "min": "x"}', '{"name": "", "max": 1}']
    test_intersections_and_merged_refs(_ALARMS, valid, invalid)
    # a oneOf with no part in common is left as it is
    cv = Converter(_ALARMS, SchemaOptions(), ConversionReport())
    assert factor_one_of(cv, {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}, "#") is None


_PROPS = {"a": {"type": "integer"}, "b": {}, "c": {}}
_TREE = {
    "$defs": {
        "n": {
            "type": "object",
            "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"allOf": [{"$ref": "#/$defs/n"}]}}},
            "required": ["v"],
        }
    },
    "$ref": "#/$defs/n",
}


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        # parts of an intersection lay out shared names in one order: an object with keys that
        # one part declares and another takes as extras is in both
        (
            {"properties": _PROPS, "allOf": [{"anyOf": [{"required": ["a"]}]}, {"anyOf": [{"required": ["c"]}]}]},
            ['{"a": 1, "c": 3}', '{"a": 1, "b": 2, "c": 3}'],
            ['{"a": 1}', '{"c": 3}'],
        ),
        (
            {
                "properties": _PROPS,
                "allOf": [
                    {"anyOf": [{"properties": {"a": False}}, {"required": ["a"]}]},
                    {"anyOf": [{"properties": {"c": False}}, {"required": ["c"]}]},
                ],
            },
            ['{"a": 1, "b": 2, "c": 3}', '{"b": 2}', "{}"],
            ['{"a": "x"}'],
        ),
        # a recursive $ref reached through allOf merging is unrolled like any other
        (_TREE, ['{"v": 1}', '{"v": 1, "kids": [{"v": 2, "kids": []}]}'], ['{"kids": []}', '{"v": 1, "kids": [{}]}']),
    ],
)
def test_intersections_and_merged_refs(schema: Any, valid: list[str], invalid: list[str]) -> None:
    dfa = _dfa(schema)
    for text in valid:
        assert _valid(schema, text) and _accepts(dfa, text), text
    for text in invalid:
        assert not _valid(schema, text) and not _accepts(dfa, text), text
    for text in sample_strings(dfa, 30, random.Random(0)):
        assert _valid(schema, text.decode()), text


DISJOINT_ONE_OF: list[tuple[Any, list[str], list[str]]] = [
    # b requires a property the closed branch a never has, and a's required value is an
    # array where b's is null: disjoint without an exact difference of the two object languages
    (
        {
            "type": "object",
            "oneOf": [
                {
                    "properties": {"locks": {"type": "array", "items": {"type": "string"}}, "next": {"type": "string"}},
                    "required": ["locks"],
                    "additionalProperties": False,
                },
                {
                    "properties": {"locks": {"type": "null"}, "error": {"type": "string"}},
                    "required": ["error"],
                    "additionalProperties": False,
                },
            ],
        },
        ['{"locks": ["a"]}', '{"error": "x"}', '{"locks": null, "error": "x"}'],
        ['{"locks": null}', '{"locks": [], "error": "x"}'],
    ),
    (
        {
            "oneOf": [
                {
                    "properties": {"spider": {"type": "string"}, "args": {"type": "array"}},
                    "required": ["spider", "args"],
                    "additionalProperties": False,
                },
                {"properties": {"spider": {"type": "string"}}, "required": ["spider"], "additionalProperties": False},
            ]
        },
        ['{"spider": "a", "args": []}', '{"spider": "a"}'],
        ['{"args": []}', '{"spider": "a", "x": 1}'],
    ),
    # branches tagged by a string property whose pattern is an anchored literal or alternation
    # of literals (tree-sitter's grammar schema): the tags are the branches' only values there
    (
        {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {
                        "type": {"type": "string", "pattern": "^SEQ$"},
                        "members": {"type": "array", "items": {"type": "integer"}},
                    },
                    "required": ["type", "members"],
                },
                {"type": "object", "properties": {"type": {"type": "string", "pattern": "^BLANK$"}}, "required": ["type"]},
                {
                    "type": "object",
                    "properties": {"type": {"type": "string", "pattern": "^(PREC|PREC_LEFT)$"}, "value": {"type": "integer"}},
                    "required": ["type", "value"],
                },
            ]
        },
        ['{"type": "SEQ", "members": [1]}', '{"type": "BLANK"}', '{"type": "PREC_LEFT", "value": 2}', '{"type": "PREC", "value": 0}'],
        ['{"type": "SEQ"}', '{"type": "PRECX", "value": 1}', '{"type": "OTHER"}', '{"members": []}'],
    ),
    # string branches whose patterns are distinct literals
    (
        {"oneOf": [{"type": "string", "pattern": "^(ALIAS|BLANK)$"}, {"type": "string", "pattern": "^SEQ$"}, {"type": "integer"}]},
        ['"ALIAS"', '"BLANK"', '"SEQ"', "3"],
        ['"ALIASX"', '"X"', "3.5", "null"],
    ),
]


def _has_difference(node: Any) -> bool:
    """Whether the IR holds a ``Minus`` (an exact difference of two languages) anywhere."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen or not dataclasses.is_dataclass(n):
            continue
        seen.add(id(n))
        if isinstance(n, Minus):
            return True
        for f in dataclasses.fields(n):
            v = getattr(n, f.name)
            for x in v if isinstance(v, tuple) else (v,):
                stack.extend(x if isinstance(x, tuple) else (x,))
    return False


@pytest.mark.parametrize(("schema", "accepted", "rejected"), DISJOINT_ONE_OF)
def test_one_of_branches_shown_disjoint_by_their_objects(schema: Any, accepted: list[str], rejected: list[str]) -> None:
    """Branches told apart by what one requires and the other forbids (or rejects by type)
    are generated as they are (no difference automaton), and stay exact."""
    node, _ = schema_to_ir(schema)
    assert not _has_difference(node)
    _check_exact(schema, accepted, rejected)


def test_a_pattern_that_is_not_a_literal_is_no_discriminator() -> None:
    """A tag pattern with regex syntax (``^SEQ.*$`` also matches ``SEQUENCE``) or without
    ``type: string`` (a non-string tag passes any pattern) does not count as a finite set of
    tags: the branches then take the exact difference, and stay exact."""
    from structgen.schemas.json_disjoint import discriminator_values

    assert discriminator_values({"type": "string", "pattern": "^(PREC|PREC_LEFT)$"}) == ["PREC", "PREC\n", "PREC_LEFT", "PREC_LEFT\n"]
    for tag in (
        {"type": "string", "pattern": "^SEQ.*$"},
        {"pattern": "^SEQ$"},
        {"type": ["string", "null"], "pattern": "^SEQ$"},
        {"type": "string", "pattern": "^A|B$"},
        {"type": "string", "pattern": "SEQ"},
        {"type": "string", "pattern": "^SEQ$", "$ref": "#/x"},
    ):
        assert discriminator_values(tag) is None, tag
    schema = {
        "oneOf": [
            {"type": "object", "properties": {"t": {"type": "string", "pattern": "^SEQ.*$"}}, "required": ["t"]},
            {"type": "object", "properties": {"t": {"type": "string", "pattern": "^SEQUENCE$"}}, "required": ["t"]},
        ]
    }
    node, _ = schema_to_ir(schema)
    assert _has_difference(node)
    _check_exact(schema, ['{"t": "SEQ"}', '{"t": "SEQX"}'], ['{"t": "SEQUENCE"}', '{"t": "X"}'])
    # `jsonschema`'s `$` also matches before a final newline: a const "SEQ\n" overlaps ^SEQ$
    overlap = {"oneOf": [{"const": "SEQ\n"}, {"type": "string", "pattern": "^SEQ$"}]}
    node, _ = schema_to_ir(overlap)
    assert _has_difference(node)
    _check_exact(overlap, ['"SEQ"'], ['"SEQ\\n"', '"X"'])


@pytest.mark.parametrize(
    "schema",
    [
        # the type beside the oneOf makes every branch generate strings, for which
        # `required` and `additionalProperties` hold vacuously: no value is valid
        {"type": "string", "oneOf": [{"required": ["x"]}, {"additionalProperties": False}]},
        {"type": "string", "oneOf": [{"additionalProperties": False}, {"required": ["x"]}]},
    ],
)
def test_one_of_disjointness_reads_the_keywords_beside_it(schema: Any) -> None:
    """The object tests apply only where every generated value is an object, counting the
    keywords beside the ``oneOf``."""
    dfa = _dfa(schema)
    for text in ('"a"', '""', "{}", '{"x": 1}'):
        assert not _valid(schema, text) and not _accepts(dfa, text), text
    assert not list(sample_strings(dfa, 10, random.Random(0)))


def test_hostnames_of_up_to_five_labels_pass_the_narrowed_formats() -> None:
    """``hostname``, ``email`` and ``uri`` take hosts of up to five labels (``www.bbc.co.uk``),
    each accepted text passing ``jsonschema``'s checker; a sixth label is the documented
    narrowing."""
    import jsonschema
    from structgen.schemas.formats import format_ir

    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    cases = {
        "hostname": ["www.bbc.co.uk", "maps.wien.gv.at", "a1.b-2.c.d.example"],
        "email": ["ana@www.bbc.co.uk", "x.y@a.b.c.d.org"],
        "uri": ["http://maps.wien.gv.at/wmts", "https://s3.eu-west-1.amazonaws.com:443/b?k=v#f"],
    }
    for name, texts in cases.items():
        node = format_ir(name)
        assert node is not None
        dfa = compile_lazy(node)
        for text in texts:
            assert checker.conforms(text, name) and dfa.accepts(text.encode()), (name, text)
    assert not compile_lazy(format_ir("hostname")).accepts(b"a.b.c.d.e.org")  # type: ignore[arg-type]
