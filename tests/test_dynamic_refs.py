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


def test_what_a_dynamic_ref_evaluates_is_not_read_statically() -> None:
    """``unevaluatedItems`` beside a ``$dynamicRef``: the items its target evaluates are known
    only in a dynamic scope, so the keyword is refused by name (never narrowed silently)."""
    schema = {
        "$id": "https://example.com/derived",
        "$ref": "base",
        "$defs": {
            "more": {"$dynamicAnchor": "addons", "prefixItems": [True, {"type": "string"}]},
            "base": {
                "$id": "base",
                "type": "array",
                "prefixItems": [{"type": "string"}],
                "$dynamicRef": "#addons",
                "unevaluatedItems": False,
                "$defs": {"none": {"$dynamicAnchor": "addons"}},
            },
        },
    }
    with pytest.raises(UnsupportedSchemaError) as e:
        schema_to_ir(schema)
    assert e.value.keyword == "unevaluatedItems"


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


def test_the_complement_of_a_dynamic_ref_is_refused_by_name() -> None:
    schema = {"$defs": {"s": {"$dynamicAnchor": "x", "type": "string"}}, "not": {"$dynamicRef": "#x"}}
    with pytest.raises(UnsupportedSchemaError, match="dynamic scope") as e:
        schema_to_ir(schema)
    assert e.value.pointer == "#/not/$dynamicRef"


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


def test_recursive_ref_errors_and_refusals_name_the_keyword() -> None:
    with pytest.raises(SchemaError, match='must be "#"') as e:
        schema_to_ir({"$schema": D2019, "items": {"$recursiveRef": "#/items"}})
    assert e.value.keyword == "$recursiveRef"
    with pytest.raises(SchemaError, match="boolean") as e:
        schema_to_ir({"$schema": D2019, "$recursiveAnchor": "yes", "items": {"$recursiveRef": "#"}})
    assert e.value.keyword == "$recursiveAnchor"
    with pytest.raises(UnsupportedSchemaError, match="dynamic scope") as e:
        schema_to_ir({"$schema": D2019, "$recursiveAnchor": True, "type": "array", "items": {"not": {"$recursiveRef": "#"}}})
    assert e.value.pointer == "#/items/not/$recursiveRef"
