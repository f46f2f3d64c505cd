"""Prompt formats a model folder declares.

A model trained on a fixed prompt shape says so in ``structgen_prompt.json``
(``{"prompt_format": NAME}``); :func:`load_prompt_format` reads it and the API and server wrap
a text prompt for a JSON Schema in that shape, as the model expects.  One format is known:
``structgen-extraction-v1`` (the embedded demo model's): a field list derived from the schema,
then the text.  Training data and inference build prompts with the same functions, so they
cannot drift apart.  Folders without the file use prompts as given.
"""

from __future__ import annotations

import json
import os
from typing import Any, NamedTuple

from structgen.fsm import Constraint
from structgen.models.loader import ModelLoadError

PROMPT_FORMAT_FILE = "structgen_prompt.json"
EXTRACTION_V1 = "structgen-extraction-v1"

PROMPT_TEMPLATE = "Extract the fields as JSON.\nFields: {fields}\nText: {text}\nJSON: "


def _resolve(schema: Any, root: dict[str, Any]) -> Any:
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if isinstance(ref, str) and ref.startswith("#/"):
        node: Any = root
        for part in ref[2:].split("/"):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        return node
    return schema


def _describe(schema: Any, root: dict[str, Any], depth: int) -> str:
    s = _resolve(schema, root)
    if not isinstance(s, dict):
        return "value"
    for key in ("anyOf", "oneOf"):
        if key in s and isinstance(s[key], list):
            return " or ".join(_describe(b, root, depth) for b in s[key] if _resolve(b, root) != {"type": "null"}) or "value"
    if "enum" in s:
        return "one of " + "|".join(str(v) for v in s["enum"])
    if "const" in s:
        return f"always {s['const']}"
    t = s.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "value")
    if t == "object" and isinstance(s.get("properties"), dict) and depth < 3:
        return "object {" + describe_fields(s, root, depth + 1) + "}"
    if t == "array":
        return "list of " + _describe(s.get("items", {}), root, depth)
    if t == "string" and s.get("format") in ("date", "date-time", "time", "email"):
        return str(s["format"])
    return str(t or "value")


def describe_fields(schema: dict[str, Any], root: dict[str, Any] | None = None, depth: int = 0) -> str:
    """``name: string; age: integer; email: string, optional; ...`` for an object schema's
    properties (in schema order; local ``$ref``s resolved).  Returns "" when it has none."""
    root = schema if root is None else root
    schema = _resolve(schema, root)
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    required = set(schema.get("required", [])) if isinstance(schema, dict) else set()
    parts = []
    for name, sub in props.items():
        desc = _describe(sub, root, depth)
        parts.append(f"{name}: {desc}" + ("" if name in required else ", optional"))
    return "; ".join(parts)


def format_prompt(schema: dict[str, Any], text: str) -> str:
    """The demo model's prompt for extracting ``schema`` (a JSON Schema object) from ``text``."""
    fields = describe_fields(schema) or _describe(schema, schema, 0)
    return PROMPT_TEMPLATE.format(fields=fields, text=text.strip())


class PromptFormat(NamedTuple):
    """The prompt format of a model folder: ``name`` (``None``: prompts used as given)."""

    name: str | None

    def apply(self, constraint: Constraint | None, prompts: list[Any]) -> list[Any]:
        """``prompts`` in this format: for ``structgen-extraction-v1`` each text prompt is wrapped
        in the extraction prompt when ``constraint`` is a JSON Schema object; chat messages,
        token ids, regexes and free text are left as they are.  Callers run a wrapped prompt
        that exceeds the context as written instead (a long field list must never make a
        request fail that fits as given): the Python API and ``/v1/structured`` do."""
        if self.name != EXTRACTION_V1 or constraint is None or constraint.kind != "json_schema":
            return prompts
        schema = constraint.schema()
        if not isinstance(schema, dict):
            return prompts
        return [format_prompt(schema, p) if isinstance(p, str) else p for p in prompts]


def load_prompt_format(model_path: str | os.PathLike[str]) -> PromptFormat:
    """The format ``model_path`` declares in ``structgen_prompt.json`` (none without the file).
    Raises :class:`~structgen.models.ModelLoadError` (a ``ValueError``) naming the file when it
    is not a JSON object or names an unknown format."""
    path = os.path.join(os.fspath(model_path), PROMPT_FORMAT_FILE)
    if not os.path.isfile(path):
        return PromptFormat(None)
    try:
        with open(path, encoding="utf-8") as f:
            name = json.load(f).get("prompt_format")
    except (ValueError, AttributeError) as exc:
        raise ModelLoadError(f"{path}: expected a JSON object with a 'prompt_format' string ({exc})") from None
    if name != EXTRACTION_V1:
        raise ModelLoadError(f"{path}: unknown prompt_format {name!r}; known: {EXTRACTION_V1!r}")
    return PromptFormat(name)
