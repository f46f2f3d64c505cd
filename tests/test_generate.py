"""``structgen.generate`` on a tiny random Llama: valid objects for many schema shapes."""

from __future__ import annotations

import enum
from typing import Annotated, Literal, Optional, Union

import jsonschema
import pytest
from pydantic import BaseModel, Field

import structgen
from structgen.engine import SamplingParams, SchedulerConfig
from structgen.engine.engine import Engine, EngineConfig
from structgen.runtime.memory import MemoryConfig

Short = Field(max_length=6)


class Color(enum.Enum):
    red = "red"
    green = "green"


class Flat(BaseModel):
    name: str = Field(max_length=8)
    age: int = Field(ge=0, le=99)


class WithEnum(BaseModel):
    color: Color
    size: Literal["S", "M", "L"]


class WithOptional(BaseModel):
    title: str = Field(max_length=5)
    note: Optional[str] = Field(default=None, max_length=4)
    count: Optional[int] = Field(default=None, ge=0, le=9)


class Inner(BaseModel):
    x: int = Field(ge=-5, le=5)
    y: bool


class Nested(BaseModel):
    inner: Inner
    label: Literal["a", "b"]


class WithList(BaseModel):
    tags: list[str] = Field(max_length=3)


class ListOfObjects(BaseModel):
    points: list[Inner] = Field(min_length=1, max_length=2)


class WithUnion(BaseModel):
    value: Union[Annotated[int, Field(ge=0, le=99)], Literal["none"]] = Field(union_mode="left_to_right")
    flag: bool


class Node(BaseModel):
    value: int = Field(ge=0, le=3)
    child: Optional[Node] = None


class WithConst(BaseModel):
    kind: Literal["point"]
    ok: bool


class Deep(BaseModel):
    nested: Nested
    inners: list[Inner] = Field(max_length=2)


class Strings(BaseModel):
    code: str = Field(pattern=r"^[A-Z]{2}[0-9]{2}$")
    short: str = Field(min_length=1, max_length=3)


class Ints(BaseModel):
    small: int = Field(ge=1, le=3)
    neg: int = Field(ge=-20, le=-10)
    big: int = Field(ge=1000, le=1010)


class Tuple2(BaseModel):
    pair: tuple[Annotated[int, Field(ge=0, le=9)], bool]


class Bools(BaseModel):
    a: bool
    b: Optional[bool] = None


PYDANTIC = [Flat, WithEnum, WithOptional, Nested, WithList, ListOfObjects, WithUnion, Node, WithConst, Deep, Strings, Ints, Tuple2, Bools]
Tag = {"type": "string", "maxLength": 4}
SCHEMAS = [
    {
        "type": "object",
        "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 50}, "tags": {"type": "array", "items": Tag, "maxItems": 2}},
        "required": ["id", "tags"],
        "additionalProperties": False,
    },
    {
        "$defs": {"pt": {"type": "object", "properties": {"x": {"enum": [1, 2, 3]}}, "required": ["x"], "additionalProperties": False}},
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/pt"}, "b": {"$ref": "#/$defs/pt"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 9}, {"type": "string", "maxLength": 3}]},
    {"type": "array", "items": {"enum": ["x", "y", None, True]}, "minItems": 1, "maxItems": 3},
    {
        "type": "object",
        "properties": {"mode": {"const": "fast"}, "level": {"type": "integer", "minimum": 1, "maximum": 3}},
        "required": ["mode"],
        "additionalProperties": False,
    },
    {"type": "object", "properties": {"opt": {"type": "string", "maxLength": 2}}, "additionalProperties": False},
    {"type": "object", "properties": {"when": {"type": "string", "format": "date"}}, "required": ["when"], "additionalProperties": False},
    {"type": "object", "properties": {"price": {"enum": [0.5, 1.25, 10]}}, "required": ["price"], "additionalProperties": False},
]


@pytest.fixture(scope="module")
def engine(tiny_llama_dir: str) -> Engine:
    eng = Engine(
        tiny_llama_dir,
        EngineConfig(memory=MemoryConfig(max_total_tokens=4096, max_context=512), scheduler=SchedulerConfig(max_running_requests=32)),
    )
    yield eng  # type: ignore[misc]
    eng.close()


@pytest.mark.parametrize("model", PYDANTIC, ids=lambda m: m.__name__)
def test_generate_pydantic(engine: Engine, model: type[BaseModel]) -> None:
    value, out = structgen.generate(model, "Fill in the JSON: ", engine=engine, params=SamplingParams(max_tokens=200), return_output=True)
    assert isinstance(value, model)
    jsonschema.validate(value.model_dump(mode="json"), model.model_json_schema())
    assert out.finish_reason == "stop" and out.usage.forced_tokens > 0


@pytest.mark.parametrize("schema", SCHEMAS, ids=[f"schema{i}" for i in range(len(SCHEMAS))])
def test_generate_json_schema(engine: Engine, schema: dict) -> None:
    value = structgen.generate(schema=schema, prompt="JSON: ", engine=engine, params=SamplingParams(max_tokens=200))
    jsonschema.validate(value, schema, format_checker=jsonschema.FormatChecker())


def test_generate_regex_and_batch(engine: Engine) -> None:
    out = structgen.generate(regex=r"(yes|no), [0-9]{3}", prompt="Answer: ", engine=engine)
    assert isinstance(out, str) and out[:2] in ("ye", "no") and out[-3:].isdigit()
    values = structgen.generate(
        Flat, ["one", "two", "three", [{"role": "user", "content": "hi"}]], engine=engine, params=SamplingParams(temperature=0.8, seed=1)
    )
    assert len(values) == 4 and all(isinstance(v, Flat) for v in values)


def test_generation_error_carries_text(engine: Engine) -> None:
    with pytest.raises(structgen.GenerationError) as info:
        structgen.generate(Flat, "x", engine=engine, params=SamplingParams(max_tokens=3))
    err = info.value
    assert err.finish_reason == "length" and err.text.startswith('{"') and err.errors


def test_a_bad_prompt_does_not_lose_the_batch(engine: Engine) -> None:
    """One prompt too long for the context fails alone: with return_exceptions its error
    stands in its place; by default it is raised with every item's result attached."""
    too_long = "word " * 2000
    got = structgen.generate(Flat, ["one", too_long, "three"], engine=engine, return_exceptions=True)
    assert isinstance(got[0], Flat) and isinstance(got[2], Flat)
    assert isinstance(got[1], structgen.RequestError)
    with pytest.raises(structgen.RequestError) as info:
        structgen.generate(Flat, ["one", too_long], engine=engine)
    results = info.value.results  # type: ignore[attr-defined]
    assert isinstance(results[0], Flat) and results[1] is info.value
    with pytest.raises(structgen.RequestError):
        structgen.generate(Flat, too_long, engine=engine)
