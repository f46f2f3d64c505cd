"""The extraction prompt of the embedded demo model: a field list derived from a JSON Schema plus
the text.  Training (:mod:`structgen.demo.data`) and inference (``structgen.generate`` with the
default model) build prompts with the same functions, so they cannot drift apart."""

from __future__ import annotations

from typing import Any

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
