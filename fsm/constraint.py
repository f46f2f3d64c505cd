"""``Constraint``: what a request must match (a JSON Schema or a regex), its conversion to the
regex IR, post-validation of an output against it, and the JSON pointer a compile limit names."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from structgen.schemas.ir import Node
from structgen.schemas.json_schema import load_schema, pydantic_schema, schema_to_ir
from structgen.schemas.regex_assertions import regex_to_ir
from structgen.schemas.schema_options import ConversionReport, SchemaOptions

from .errors import GrammarCompileError


class OutputValidationError(ValueError):
    """Generated output that fails post-validation (never returned as a result)."""


@dataclass(frozen=True)
class Constraint:
    """What a request must match: a JSON Schema (canonical JSON text) or a regex.

    Build with :meth:`json_schema`, :meth:`pydantic`, :meth:`regex`.  Hashable; ``key`` is a
    stable sha256 over kind, text and options.
    """

    kind: str
    text: str
    options: SchemaOptions = field(default_factory=SchemaOptions)

    def __post_init__(self) -> None:
        if self.kind not in ("json_schema", "regex"):
            raise ValueError(f"constraint kind must be 'json_schema' or 'regex', not {self.kind!r}")

    @staticmethod
    def json_schema(schema: dict[str, Any] | bool | str, options: SchemaOptions | None = None) -> Constraint:
        """From a schema dict/bool or JSON text. Raises ``SchemaError`` on invalid JSON text."""
        schema = load_schema(schema)
        return Constraint("json_schema", json.dumps(schema, sort_keys=False, ensure_ascii=False), options or SchemaOptions())

    @staticmethod
    def pydantic(model: Any, options: SchemaOptions | None = None) -> Constraint:
        return Constraint.json_schema(pydantic_schema(model), options)

    @staticmethod
    def regex(pattern: str) -> Constraint:
        if not isinstance(pattern, str):
            raise TypeError(f"a regex must be a str, got {type(pattern).__name__}")
        return Constraint("regex", pattern)

    @property
    def key(self) -> str:
        h = hashlib.sha256()
        h.update(self.kind.encode())
        h.update(b"\0")
        h.update(self.text.encode())
        h.update(b"\0")
        h.update(repr(self.options).encode())
        return h.hexdigest()

    def shallower(self) -> Constraint | None:
        """This schema with unconstrained values nested less deeply
        (:meth:`SchemaOptions.shallower`): what a compile whose automaton passed the state cap
        tries next.  None for a regex or options with no fallback."""
        options = self.options.shallower() if self.kind == "json_schema" else None
        return None if options is None else Constraint(self.kind, self.text, options)

    def to_ir(self, check: Callable[[], None] | None = None) -> Node:
        """The regex IR (raises ``ConstraintError`` subclasses on bad input); ``check`` is a
        deadline hook called during long conversions."""
        return self.convert(check)[0]

    def convert(self, check: Callable[[], None] | None = None) -> tuple[Node, ConversionReport | None]:
        """:meth:`to_ir` with the schema conversion's report (None for a regex)."""
        if self.kind == "regex":
            return regex_to_ir(self.text), None
        return schema_to_ir(json.loads(self.text), self.options, check=check)

    def validate(self, text: str) -> Any:
        """Post-validate generated ``text``: the parsed JSON value (schema) or ``text`` (regex).

        Needed with ``SchemaOptions(strict=False)``, where dropped keywords are not enforced by
        the grammar.  Raises :class:`OutputValidationError` (with the reason) on failure.
        """
        if self.kind == "regex":
            import re

            if re.fullmatch(self.text, text) is None:
                raise OutputValidationError(f"output does not match the regex {self.text!r}")
            return text
        import jsonschema

        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise OutputValidationError(f"output is not JSON: {e.msg} at column {e.colno}") from e
        schema = self.schema()
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        error = jsonschema.exceptions.best_match(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            raise OutputValidationError(f"output fails the schema at /{where}: {error.message}")
        return value

    def schema(self) -> Any:
        """The JSON Schema (``json_schema`` kind only)."""
        if self.kind != "json_schema":
            raise ValueError("not a JSON Schema constraint")
        return json.loads(self.text)


def located(err: GrammarCompileError, report: ConversionReport | None) -> GrammarCompileError:
    """``err`` with the JSON pointer of the subschema whose product automaton hit the limit
    added to its message (same class), when the conversion ``report`` knows it; its
    ``product`` cleared either way (the IR does not travel with the error)."""
    ptr = report.origin_of(err.product) if report is not None and err.product is not None else None
    err.product = None
    if ptr is None:
        return err
    what = "the product automaton (allOf / not / oneOf / a pattern or format with length bounds)"
    return type(err)(f"{err}, building {what} of the subschema at {ptr}")
