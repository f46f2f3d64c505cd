"""``$dynamicRef`` (JSON Schema 2020-12): resolved in the dynamic scope the conversion walks, as
``jsonschema`` resolves it; checked against ``jsonschema`` on valid and invalid values and on
random strings of each automaton."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest
from structgen.fsm.lazy_compile import compile_lazy
from structgen.schemas.errors import SchemaError, UnsupportedSchemaError
from structgen.schemas.json_schema import SchemaOptions, schema_to_ir

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
]


def _accepts(dfa: Any, value: Any) -> bool:
    return bool(dfa.accepts(json.dumps(value, separators=(", ", ": ")).encode()))


@pytest.mark.parametrize(("name", "schema", "valid", "invalid"), DYNAMIC_CASES, ids=[c[0] for c in DYNAMIC_CASES])
def test_dynamic_refs_resolve_as_jsonschema_resolves_them(name: str, schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    dfa = compile_lazy(schema_to_ir(schema, WIDE)[0])
    validator = jsonschema.Draft202012Validator(schema)
    for value, ok in [(v, True) for v in valid] + [(v, False) for v in invalid]:
        assert validator.is_valid(value) == ok, value
        assert _accepts(dfa, value) == ok, value
    for text in sample_strings(dfa, 40, random.Random(0)):
        assert validator.is_valid(json.loads(text)), text


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


def test_before_2020_12_a_dynamic_ref_is_still_refused() -> None:
    schema = {"$schema": "https://json-schema.org/draft/2019-09/schema", "items": {"$dynamicRef": "#x"}}
    with pytest.raises(UnsupportedSchemaError) as e:
        schema_to_ir(schema)
    assert e.value.keyword == "$dynamicRef"


def test_the_complement_of_a_dynamic_ref_is_refused_by_name() -> None:
    schema = {"$defs": {"s": {"$dynamicAnchor": "x", "type": "string"}}, "not": {"$dynamicRef": "#x"}}
    with pytest.raises(UnsupportedSchemaError, match="dynamic scope") as e:
        schema_to_ir(schema)
    assert e.value.pointer == "#/not/$dynamicRef"
