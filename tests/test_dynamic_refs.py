"""``$dynamicRef`` (JSON Schema 2020-12) and ``$recursiveRef`` (2019-09): resolved in the dynamic
scope the conversion walks, as ``jsonschema`` resolves them; checked against ``jsonschema`` on
valid and invalid values and on random strings of each automaton."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest
from structgen.fsm.lazy_compile import compile_lazy
from structgen.schemas.errors import SchemaError, UnsupportedSchemaError
from structgen.schemas.json_schema import schema_to_ir
from structgen.schemas.schema_options import SchemaOptions

from structgen.bench.conformance import sample_strings

WIDE = SchemaOptions(allow_undeclared_properties=True)

# a generic list whose item type an outer schema resource overrides through its $dynamicAnchor
GENERIC_LIST = {
    "$id": "https://example.com/list",
    "type": "array",
    "items": {"$dynamicRef": "#item"},
    "$defs": {"default": {"$dynamicAnchor": "item"}},
}

DYNAMIC_CASES: list[tuple[str, Any, list[Any], list[Any]]] = [
    (
        "the outermost dynamic anchor in scope wins",
        {
            "$id": "https://example.com/strings",
            "$ref": "list",
            "$defs": {"item": {"$dynamicAnchor": "item", "type": "string"}, "list": GENERIC_LIST},
        },
        [["a", "b"], []],
        [[1], ["a", None]],
    ),
    (
        "without an outer anchor the initial target applies",
        {"$id": "https://example.com/root", "$ref": "list", "$defs": {"list": GENERIC_LIST}},
        [[1, "a", None], []],
        [{}],
    ),
    (
        "a fragment naming a plain $anchor behaves as $ref",
        {
            "$id": "https://example.com/plain",
            "$dynamicAnchor": "item",
            "type": "object",
            "properties": {"v": {"$dynamicRef": "inner#item"}},
            "$defs": {"inner": {"$id": "inner", "$anchor": "item", "type": "integer"}},
        },
        [{"v": 3}, {}],
        [{"v": "x"}, {"v": {}}],
    ),
    (
        "each branch of if / then / else brings its own scope",
        {
            "$id": "https://example.com/kinds",
            "type": "object",
            "properties": {"kind": {"enum": ["n", "s"]}},
            "required": ["kind"],
            "if": {"properties": {"kind": {"const": "n"}}},
            "then": {"$ref": "numbers"},
            "else": {"$ref": "strings"},
            "$defs": {
                "generic": {
                    "$id": "generic",
                    "properties": {"v": {"$dynamicRef": "#t"}},
                    "$defs": {"any": {"$dynamicAnchor": "t"}},
                },
                "numbers": {"$id": "numbers", "$defs": {"t": {"$dynamicAnchor": "t", "type": "integer"}}, "$ref": "generic"},
                "strings": {"$id": "strings", "$defs": {"t": {"$dynamicAnchor": "t", "type": "string"}}, "$ref": "generic"},
            },
        },
        [{"kind": "n", "v": 1}, {"kind": "s", "v": "x"}, {"kind": "s"}],
        [{"kind": "n", "v": "x"}, {"kind": "s", "v": 1}],
    ),
    (
        "a recursive tree extended by its root",
        {
            "$id": "https://example.com/tree-of-ints",
            "$dynamicAnchor": "node",
            "$ref": "tree",
            "properties": {"value": {"type": "integer"}},
            "$defs": {
                "tree": {
                    "$id": "tree",
                    "$dynamicAnchor": "node",
                    "type": "object",
                    "properties": {"children": {"type": "array", "items": {"$dynamicRef": "#node"}, "maxItems": 2}},
                }
            },
        },
        [{"value": 1}, {"children": [{"value": 2}, {"children": []}]}],
        [{"value": "x"}, {"children": [{"value": "x"}]}],
    ),
    (
        "an embedded resource entered without a reference adds nothing to the scope",
        {
            "$id": "https://example.com/outer",
            "$dynamicAnchor": "node",
            "type": "object",
            "properties": {
                "outer_only": {"type": "integer"},
                "inner": {
                    "$id": "inner",
                    "$dynamicAnchor": "node",
                    "type": "object",
                    "properties": {"kid": {"$dynamicRef": "#node"}, "inner_only": {"type": "string"}},
                },
            },
        },
        [{"inner": {"kid": {"inner_only": "a"}}}, {"inner": {"kid": {"outer_only": "x"}}}],
        [{"inner": {"kid": {"inner_only": 1}}}, {"outer_only": "x"}],
    ),
]


def _accepts(dfa: Any, value: Any) -> bool:
    return bool(dfa.accepts(json.dumps(value, separators=(", ", ": ")).encode()))


def _check_as_jsonschema(schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    """The automaton accepts exactly the values ``jsonschema`` (the schema's draft) accepts,
    and its random strings validate."""
    dfa = compile_lazy(schema_to_ir(schema, WIDE)[0])
    validator = jsonschema.validators.validator_for(schema)(schema)
    for value, ok in [(v, True) for v in valid] + [(v, False) for v in invalid]:
        assert validator.is_valid(value) == ok, value
        assert _accepts(dfa, value) == ok, value
    for text in sample_strings(dfa, 40, random.Random(0)):
        assert validator.is_valid(json.loads(text)), text


@pytest.mark.parametrize(("name", "schema", "valid", "invalid"), DYNAMIC_CASES, ids=[c[0] for c in DYNAMIC_CASES])
def test_dynamic_refs_resolve_as_jsonschema_resolves_them(name: str, schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    _check_as_jsonschema(schema, valid, invalid)


def test_dynamic_ref_errors_name_the_keyword() -> None:
    with pytest.raises(SchemaError, match="does not resolve") as e:
        schema_to_ir({"properties": {"a": {"$dynamicRef": "#/$defs/missing"}}})
    assert e.value.keyword == "$dynamicRef" and e.value.pointer == "#/properties/a/$dynamicRef"
    with pytest.raises(UnsupportedSchemaError, match="another document") as e:
        schema_to_ir({"$id": "http://example.com/r", "items": {"$dynamicRef": "other.json#x"}})
    assert e.value.keyword == "$dynamicRef"
    for schema, keyword, pointer in (
        ({"items": {"$dynamicRef": 5}}, "$dynamicRef", "#/items"),
        ({"$defs": {"a": {"$dynamicAnchor": ["a"]}}, "items": {"$dynamicRef": "#a"}}, "$dynamicAnchor", "#/$defs/a"),
    ):
        with pytest.raises(SchemaError, match="string") as e:
            schema_to_ir(schema)
        assert e.value.keyword == keyword and e.value.pointer.startswith(pointer), (e.value.keyword, e.value.pointer)


def _extensible(base_id: str, keyword: str, own: dict[str, Any], none_id: str = "none") -> dict[str, Any]:
    """A base resource whose ``unevaluated*`` sits beside a ``$dynamicRef`` that extending
    resources answer through their ``addons`` anchor."""
    return {"$id": base_id, keyword: False, **own, "$dynamicRef": "#addons", "$defs": {none_id: {"$dynamicAnchor": "addons"}}}


UNEVALUATED_DYNAMIC_CASES: list[tuple[str, Any, list[Any], list[Any]]] = [
    (
        "unevaluatedItems sees the items of the dynamic target",
        {
            "$id": "https://example.com/derived",
            "$ref": "base",
            "$defs": {
                "more": {"$dynamicAnchor": "addons", "prefixItems": [True, {"type": "string"}]},
                "base": _extensible("base", "unevaluatedItems", {"type": "array", "prefixItems": [{"type": "string"}]}),
            },
        },
        [["a", "b"], ["a"], []],
        [["a", "b", "c"], ["a", 1]],
    ),
    (
        "unevaluatedProperties sees the properties of the dynamic target",
        {
            "$id": "https://example.com/derived-props",
            "$ref": "base",
            "$defs": {
                "more": {"$dynamicAnchor": "addons", "properties": {"bar": {"type": "string"}}},
                "base": _extensible("base", "unevaluatedProperties", {"type": "object", "properties": {"foo": {"type": "string"}}}),
            },
        },
        [{"bar": "b", "foo": "a"}, {"bar": "b"}, {}],  # (a reference target's properties come first)
        [{"foo": "a", "bar": "b", "baz": "c"}, {"bar": 1}],
    ),
    (
        "the same base in two dynamic scopes evaluates two sets",
        {
            "$id": "https://example.com/two",
            "type": "object",
            "properties": {"x": {"$ref": "x"}, "y": {"$ref": "y"}},
            "$defs": {
                "x": {"$id": "x", "$ref": "base", "$defs": {"a": {"$dynamicAnchor": "addons", "properties": {"a": True}}}},
                "y": {"$id": "y", "$ref": "base", "$defs": {"b": {"$dynamicAnchor": "addons", "properties": {"b": True}}}},
                "base": _extensible("base", "unevaluatedProperties", {"type": "object"}),
            },
        },
        [{"x": {"a": 1}, "y": {"b": 2}}, {"x": {}, "y": {}}],
        [{"x": {"b": 1}}, {"y": {"a": 2}}],
    ),
    (
        "without an extension only the base's own items are evaluated",
        {
            "$id": "https://example.com/plain-base",
            "$ref": "base",
            "$defs": {"base": _extensible("base", "unevaluatedItems", {"prefixItems": [True]})},
        },
        [[1], []],
        [[1, 2]],
    ),
]


@pytest.mark.parametrize(("name", "schema", "valid", "invalid"), UNEVALUATED_DYNAMIC_CASES, ids=[c[0] for c in UNEVALUATED_DYNAMIC_CASES])
def test_unevaluated_beside_a_dynamic_ref_sees_its_target_in_scope(name: str, schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    """``unevaluated*`` beside a ``$dynamicRef``: the evaluated set is read at conversion,
    where the dynamic scope fixes the reference's target, once per scope."""
    _check_as_jsonschema(schema, valid, invalid)


@pytest.mark.parametrize(
    "schema",
    [
        {"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "array", "items": {"$dynamicRef": "#/x", "type": "integer"}},
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "items": {"$recursiveRef": "#", "type": "integer"}},
        {"type": "array", "items": {"$recursiveRef": "#", "type": "integer"}},
    ],
    ids=["$dynamicRef in 2019-09", "$recursiveRef in draft 7", "$recursiveRef in 2020-12"],
)
def test_a_reference_keyword_of_another_draft_is_an_annotation(schema: Any) -> None:
    """``$dynamicRef`` before 2020-12 and ``$recursiveRef`` outside 2019-09 are keywords those
    drafts do not define: ``jsonschema`` ignores them, and so does the grammar (the keywords
    beside them still apply)."""
    _check_as_jsonschema(schema, [[1, 2], []], [["x"], [[]], 1])


def test_under_not_a_reference_keyword_of_another_draft_is_an_annotation_too() -> None:
    schema = {"type": "array", "items": {"not": {"$recursiveRef": "#", "type": "string"}, "maxItems": 1}}  # 2020-12
    _check_as_jsonschema(schema, [[1, [2]], []], [["x"], [[1, 2]]])


NEGATED_DYNAMIC_CASES: list[tuple[str, Any, list[Any], list[Any]]] = [
    (
        "not of a dynamic reference",
        {"$defs": {"s": {"$dynamicAnchor": "x", "type": "string"}}, "not": {"$dynamicRef": "#x"}},
        [1, None, [], {}],
        ["a", ""],
    ),
    (
        "if on a dynamic reference",
        {
            "$id": "https://example.com/cond",
            "$defs": {"s": {"$dynamicAnchor": "x", "type": "string"}},
            "if": {"$dynamicRef": "#x"},
            "then": {"maxLength": 2},
            "else": {"type": "integer"},
        },
        ["ab", 3],
        ["abc", 1.5, None],
    ),
    (
        "not of the item type an outer resource overrides",
        {
            "$id": "https://example.com/not-strings",
            "$ref": "list",
            "$defs": {
                "item": {"$dynamicAnchor": "item", "type": "string"},
                "list": {**GENERIC_LIST, "items": {"not": {"$dynamicRef": "#item"}}},
            },
        },
        [[1, None], []],
        [["a"], [1, "b"]],
    ),
    (
        "not of unevaluatedProperties beside a dynamic reference",
        {
            "$id": "https://example.com/derived-not",
            "$ref": "base",
            "$defs": {
                "more": {"$dynamicAnchor": "addons", "properties": {"bar": {"type": "string"}}},
                "base": {
                    "$id": "base",
                    "type": "object",
                    "not": {"$dynamicRef": "#addons", "unevaluatedProperties": False, "properties": {"foo": True}},
                    "$defs": {"none": {"$dynamicAnchor": "addons"}},
                },
            },
        },
        [{"bar": 1}, {"c": 1}, {"foo": 1, "c": 1}],
        [{}, {"bar": "s"}, {"foo": 1}],
    ),
]


@pytest.mark.parametrize(("name", "schema", "valid", "invalid"), NEGATED_DYNAMIC_CASES, ids=[c[0] for c in NEGATED_DYNAMIC_CASES])
def test_the_complement_of_a_dynamic_ref_is_its_target_s_in_scope(name: str, schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    _check_as_jsonschema(schema, valid, invalid)


def test_a_complement_followed_into_another_scope_resolves_its_references_there() -> None:
    """The complement of a target reached in another dynamic scope is worked out and converted
    in that scope, where its own dynamic references resolve as they do for the target: here
    the outer resource's anchor (integers), not the library's (strings).  A recursive one is
    unrolled as every recursive negation is (a narrowing: never an invalid value)."""
    schema = {
        "$id": "https://example.com/outer",
        "$defs": {
            "item": {"$dynamicAnchor": "item", "type": "integer"},
            "lib": {
                "$id": "lib",
                "$defs": {
                    "item": {"$dynamicAnchor": "item", "type": "string"},
                    "box": {"type": "object", "properties": {"v": {"$dynamicRef": "#item"}}, "required": ["v"]},
                },
            },
        },
        "not": {"$ref": "lib#/$defs/box"},
    }
    _check_as_jsonschema(schema, [{"v": "a"}, 1, {}], [{"v": 1}])
    beside = {**{k: v for k, v in schema.items() if k != "not"}, "allOf": [{"not": schema["not"]}, {"type": "object"}]}
    _check_as_jsonschema(beside, [{"v": "a"}, {}], [{"v": 1}, 1])  # the complement as an allOf part keeps its scope
    recursive = {
        "$id": "https://example.com/r",
        "$defs": {"s": {"$dynamicAnchor": "x", "type": "array", "items": {"$dynamicRef": "#x"}}},
        "not": {"$dynamicRef": "#x"},
    }
    dfa = compile_lazy(schema_to_ir(recursive, WIDE)[0])
    validator = jsonschema.Draft202012Validator(recursive)
    for value in (1, "a", [1], [[1]], [], [[]], [[], [[]]]):
        assert not _accepts(dfa, value) or validator.is_valid(value), value
    assert _accepts(dfa, 1) and not _accepts(dfa, []) and not _accepts(dfa, [[]])


D2019 = "https://json-schema.org/draft/2019-09/schema"
# a tree whose nodes an extending schema resource narrows through $recursiveAnchor (instances
# below list keys as the grammar generates them: a $ref target's properties first)
TREE = {
    "$id": "https://example.com/tree",
    "$recursiveAnchor": True,
    "type": "object",
    "properties": {"children": {"type": "array", "maxItems": 2, "items": {"$recursiveRef": "#"}}},
}

RECURSIVE_CASES: list[tuple[str, Any, list[Any], list[Any]]] = [
    (
        "the extending root with $recursiveAnchor is what the tree's nodes recurse into",
        {
            "$schema": D2019,
            "$id": "https://example.com/int-tree",
            "$recursiveAnchor": True,
            "$ref": "tree",
            "properties": {"value": {"type": "integer"}},
            "$defs": {"tree": TREE},
        },
        [{"children": [{"value": 2}, {"children": []}], "value": 1}, {}],
        [{"children": [{"value": "x"}]}, {"value": 1.5}],
    ),
    (
        "without $recursiveAnchor on the extending root the tree recurses into itself",
        {
            "$schema": D2019,
            "$id": "https://example.com/loose",
            "$ref": "tree",
            "properties": {"value": {"type": "integer"}},
            "$defs": {"tree": TREE},
        },
        [{"children": [{"value": "x"}], "value": 1}],
        [{"value": "x"}, {"children": [1]}],
    ),
    (
        "without $recursiveAnchor on the target it behaves as $ref to its own resource",
        {
            "$schema": D2019,
            "$id": "https://example.com/plain-list",
            "type": "array",
            "maxItems": 2,
            "items": {"anyOf": [{"type": "integer"}, {"$recursiveRef": "#"}]},
        },
        [[1, [2, []]], []],
        [["a"], [1, ["b"]]],
    ),
    (
        "an embedded resource entered without a reference adds nothing to the scope",
        {
            "$schema": D2019,
            "$id": "https://example.com/outer",
            "$recursiveAnchor": True,
            "type": "object",
            "properties": {
                "outer_only": {"type": "integer"},
                "inner": {
                    "$id": "inner",
                    "$recursiveAnchor": True,
                    "type": "object",
                    "properties": {"kid": {"$recursiveRef": "#"}, "inner_only": {"type": "string"}},
                },
            },
        },
        [{"inner": {"kid": {"inner_only": "a"}}}, {"inner": {"kid": {"outer_only": "x"}}}],
        [{"inner": {"kid": {"inner_only": 1}}}, {"outer_only": "x"}],
    ),
]


@pytest.mark.parametrize(("name", "schema", "valid", "invalid"), RECURSIVE_CASES, ids=[c[0] for c in RECURSIVE_CASES])
def test_recursive_refs_resolve_as_jsonschema_resolves_them(name: str, schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    assert schema["$schema"] == D2019  # checked with Draft201909Validator
    _check_as_jsonschema(schema, valid, invalid)


def test_unevaluated_beside_a_recursive_ref_sees_the_extended_tree() -> None:
    """2019-09: ``unevaluatedProperties`` beside ``$recursiveRef`` evaluates what the
    outermost ``$recursiveAnchor`` resource declares (JSON-Schema-Test-Suite's extended tree)."""
    schema = {
        "$schema": D2019,
        "$id": "https://example.com/extended-tree",
        "$recursiveAnchor": True,
        "$ref": "./tree",
        "properties": {"name": {"type": "string"}},
        "$defs": {
            "tree": {
                "$id": "./tree",
                "$recursiveAnchor": True,
                "type": "object",
                "properties": {"node": True, "branches": {"unevaluatedProperties": False, "$recursiveRef": "#"}},
                "required": ["node"],
            }
        },
    }
    valid = [{"node": 1, "branches": {"name": "b", "node": 2}, "name": "a"}, {"node": 1}]  # keys in the grammar's order
    _check_as_jsonschema(schema, valid, [{"node": 1, "branches": {"node": 2, "foo": "b"}}, {"node": 1, "branches": {"name": "b"}}])


def test_recursive_ref_errors_and_refusals_name_the_keyword() -> None:
    with pytest.raises(SchemaError, match='must be "#"') as e:
        schema_to_ir({"$schema": D2019, "items": {"$recursiveRef": "#/items"}})
    assert e.value.keyword == "$recursiveRef"
    with pytest.raises(SchemaError, match="boolean") as e:
        schema_to_ir({"$schema": D2019, "$recursiveAnchor": "yes", "items": {"$recursiveRef": "#"}})
    assert e.value.keyword == "$recursiveAnchor"
    nested = {"$schema": D2019, "$recursiveAnchor": True, "type": "array", "items": {"not": {"$recursiveRef": "#"}}}
    with_base = {**nested, "$id": "https://example.com/nested"}  # the step into the root adds its base URI
    dfa = compile_lazy(schema_to_ir(with_base, WIDE)[0])
    validator = jsonschema.validators.validator_for(with_base)(with_base)
    for value in ([], [1, "a"], [[1]], [[[]]], [[]], 1):
        assert not _accepts(dfa, value) or validator.is_valid(value), value
    assert _accepts(dfa, []) and _accepts(dfa, [1, "a"]) and not _accepts(dfa, [[]])
    # without a base URI the scope stays as it is: arrays whose items are not such arrays
    _check_as_jsonschema(nested, [[], [1, "a"], [[[]]]], [[[]], [[1]], 1, None])
