"""The mixed ``/v1/structured`` workload of the server load test (JSON Schemas, regexes and free
text; half the prompts share a few-shot prefix; every third streamed) and the check of each
answer (``jsonschema`` with formats, ``re.fullmatch``)."""

from __future__ import annotations

import json
import random
import re
from typing import Any, NamedTuple

import jsonschema

SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
        "required": ["name", "age"],
    },
    {
        "type": "object",
        "properties": {
            "order_id": {"type": "integer", "minimum": 1, "maximum": 99999},
            "status": {"enum": ["pending", "shipped", "delivered"]},
            "items": {"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 1, "maxItems": 3},
            "paid": {"type": "boolean"},
        },
        "required": ["order_id", "status", "items", "paid"],
    },
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 10},
            "address": {
                "type": "object",
                "properties": {"street": {"type": "string", "maxLength": 12}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                "required": ["street", "zip"],
            },
            "rating": {"type": "integer", "minimum": 1, "maximum": 5},
        },
        "required": ["city", "address"],
    },
    {
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": 16},
            "date": {"type": "string", "format": "date"},
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 2},
        },
        "required": ["title", "date"],
    },
]
REGEXES = [r"(yes|no)", r"[0-9]{3}-[0-9]{4}", r"[A-Z][a-z]{2,8} [A-Z][a-z]{2,8}", r"(red|green|blue)( and (red|green|blue)){0,2}"]
FEW_SHOT = "You extract structured data. Answer with JSON only.\n" + "".join(
    f"Example {i}: text about item {i} -> a JSON object with its fields.\n" for i in range(12)
)


class Job(NamedTuple):
    kind: str  # "schema" | "regex" | "text"
    body: dict[str, Any]
    check: Any  # schema dict, regex str or None


def build_workload(n: int, seed: int = 0, *, text_max_tokens: int = 24) -> list[Job]:
    """``n`` request bodies for ``/v1/structured``: 50% schemas, 25% regexes, 25% free text;
    half of the prompts share a few-shot prefix; every third is streamed.  Deterministic."""
    rng = random.Random(seed)
    jobs = []
    for i in range(n):
        u = rng.random()
        prompt = (FEW_SHOT if rng.random() < 0.5 else "") + f"Request {i}: describe item {rng.randrange(10**6)}.\n"
        body: dict[str, Any] = {"prompt": prompt, "stream": i % 3 == 0, "seed": i, "temperature": rng.choice([0.0, 0.7])}
        if u < 0.5:
            schema = SCHEMAS[rng.randrange(len(SCHEMAS))]
            jobs.append(Job("schema", {**body, "json_schema": schema, "max_tokens": 200}, schema))
        elif u < 0.75:
            regex = REGEXES[rng.randrange(len(REGEXES))]
            jobs.append(Job("regex", {**body, "regex": regex, "max_tokens": 64}, regex))
        else:
            jobs.append(Job("text", {**body, "max_tokens": text_max_tokens}, None))
    return jobs


def validate_output(job: Job, payload: dict[str, Any]) -> bool | None:
    """Whether a finished answer is valid for ``job``: a regex output matches whole, a schema output
    parses, validates with its formats and equals the server's parsed ``output``; None for free text."""
    if job.kind == "text":
        return None
    if payload.get("finish_reason") != "stop":
        return False
    text = payload.get("text", "")
    if job.kind == "regex":
        return re.fullmatch(job.check, text) is not None
    try:
        value = json.loads(text)
        jsonschema.Draft202012Validator(job.check, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER).validate(value)
    except (ValueError, jsonschema.ValidationError):
        return False
    return value == payload.get("output")
