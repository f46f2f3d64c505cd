"""The constraint of an OpenAI-route request, from whichever field a client of OpenAI, vLLM or
SGLang uses for it: ``response_format`` (OpenAI), ``structured_outputs`` and the older
``guided_*`` fields (vLLM), ``regex`` / ``json_schema`` / ``ebnf`` (SGLang).  At most one may be
given; a constraint structgen cannot compile to a token FSM (a context-free grammar, a structural
tag, a custom whitespace pattern) is refused with a 400 naming the field, never ignored."""

from __future__ import annotations

import json
from typing import Any

from structgen.fsm import Constraint
from structgen.schemas import SchemaOptions
from structgen.server.protocol import APIError, ChatCompletionRequest, CompletionRequest

_REGEX_SPECIAL = set("\\^$.|?*+()[]{}/-")
# ``json_object``: any JSON object.  ``additionalProperties`` is spelled out because the compiler
# narrows an object without it to its declared properties (``SchemaOptions``), which would
# leave only ``{}``.
JSON_OBJECT_SCHEMA = {"type": "object", "additionalProperties": True}


def choice_regex(choices: list[str]) -> str:
    """A regex matching exactly one of ``choices`` (each literal, specials escaped)."""
    return "|".join("".join("\\" + c if c in _REGEX_SPECIAL else c for c in choice) for choice in choices)


def request_constraint(body: ChatCompletionRequest | CompletionRequest) -> tuple[Constraint | None, str]:
    """(the constraint the body asks for or None, the field that names it).  Raises
    :class:`APIError` 400 for two constraint fields at once, one that cannot be compiled here,
    or a schema given as a string that is not JSON."""
    found: list[tuple[str, Constraint]] = []
    fmt = getattr(body, "response_format", None)
    if fmt is not None and fmt.type == "json_object":
        found.append(("response_format", Constraint.json_schema(JSON_OBJECT_SCHEMA)))
    elif fmt is not None and fmt.type == "json_schema":
        assert fmt.json_schema is not None
        schema = fmt.json_schema.schema_ if fmt.json_schema.schema_ is not None else JSON_OBJECT_SCHEMA
        found.append(("response_format", Constraint.json_schema(schema, SchemaOptions(strict=fmt.json_schema.strict is not False))))
    so = body.structured_outputs
    if so is not None:
        _refuse("structured_outputs.grammar", so.grammar, "context-free grammars")
        _refuse("structured_outputs.structural_tag", so.structural_tag, "structural tags")
        _refuse("structured_outputs.whitespace_pattern", so.whitespace_pattern, "a custom whitespace pattern (the JSON layout is fixed)")
        fields = (("json", so.json_), ("regex", so.regex), ("choice", so.choice), ("json_object", so.json_object or None))
        given = [k for k, v in fields if v is not None]
        if len(given) != 1:
            message = f"structured_outputs: give exactly one of json, regex, choice, json_object (got {given or 'none'})"
            raise _bad("structured_outputs", message)
        found.append(("structured_outputs", _pick(f"structured_outputs.{given[0]}", so.json_, so.regex, so.choice, bool(so.json_object))))
    _refuse("guided_grammar", body.guided_grammar, "context-free grammars")
    _refuse("guided_whitespace_pattern", body.guided_whitespace_pattern, "a custom whitespace pattern (the JSON layout is fixed)")
    _refuse("ebnf", body.ebnf, "EBNF grammars")
    for name, value in (("guided_json", body.guided_json), ("json_schema", body.json_schema)):
        if value is not None:
            found.append((name, _pick(name, value, None, None, False)))
    for name, value in (("guided_regex", body.guided_regex), ("regex", body.regex)):
        if value is not None:
            found.append((name, Constraint.regex(value)))
    if body.guided_choice is not None:
        found.append(("guided_choice", Constraint.regex(choice_regex(body.guided_choice))))
    if len(found) > 1:
        names = " and ".join(name for name, _ in found)
        raise _bad(found[1][0], f"give at most one constraint field; got {names}")
    if not found:
        return None, "response_format"
    name, constraint = found[0]
    return constraint, name


def _pick(field: str, schema: Any, regex: str | None, choice: list[str] | None, json_object: bool) -> Constraint:
    if regex is not None:
        return Constraint.regex(regex)
    if choice is not None:
        return Constraint.regex(choice_regex(choice))
    if json_object:
        return Constraint.json_schema(JSON_OBJECT_SCHEMA)
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise _bad(field, f"{field}: not valid JSON ({e.msg} at position {e.pos})") from None
        if not isinstance(schema, (dict, bool)):
            raise _bad(field, f"{field}: a JSON Schema is an object or a boolean, got {type(schema).__name__}")
    return Constraint.json_schema(schema)


def _refuse(field: str, value: Any, what: str) -> None:
    if value is not None:
        raise APIError(
            400,
            f"{field}: {what} cannot be compiled to a token FSM here; give a JSON Schema or a regex instead",
            type="invalid_request_error",
            param=field,
            code="unsupported_constraint",
        )


def _bad(field: str, message: str) -> APIError:
    return APIError(400, message, type="invalid_request_error", param=field, code="invalid_value")
