"""Errors raised while turning a constraint (schema, model, regex) into regex IR.

Every error names what is wrong and where: a schema keyword with its JSON pointer
(RFC 6901), or a regex with the 0-based position of the offending construct.
"""

from __future__ import annotations

from typing import Any


class ConstraintError(ValueError):
    """Base class: the constraint itself is malformed or cannot be enforced."""


class SchemaError(ConstraintError):
    """The JSON Schema is malformed (wrong keyword value type, dangling ``$ref``, ...).

    Attributes: ``keyword`` (str) and ``pointer`` (JSON pointer of the schema object).
    """

    def __init__(self, message: str, *, keyword: str, pointer: str) -> None:
        self.message = message
        self.keyword = keyword
        self.pointer = pointer or "#"
        super().__init__(f"{message} (keyword '{keyword}' at {self.pointer})")

    def __reduce__(self) -> tuple[Any, ...]:  # picklable (compile worker processes, caches)
        return _rebuild_schema_error, (type(self), self.message, self.keyword, self.pointer)


def _rebuild_schema_error(cls: type[SchemaError], message: str, keyword: str, pointer: str) -> SchemaError:
    return cls(message, keyword=keyword, pointer=pointer)


class UnsupportedSchemaError(SchemaError):
    """A keyword (or keyword value) that cannot be enforced exactly by a regular language.

    Raised in ``strict`` mode; with ``strict=False`` the keyword is dropped from generation and
    the output is post-validated instead.
    """


class RegexError(ConstraintError):
    """A regex that is malformed or uses an unsupported construct.

    Attributes: ``pattern`` (str), ``position`` (0-based index into ``pattern``), ``reason``.
    """

    def __init__(self, reason: str, pattern: str, position: int) -> None:
        self.reason = reason
        self.pattern = pattern
        self.position = position
        caret = " " * min(position, 200) + "^"
        shown = pattern if len(pattern) <= 200 else pattern[:200] + "..."
        super().__init__(f"{reason} at position {position}\n  {shown}\n  {caret}")

    def __reduce__(self) -> tuple[Any, ...]:  # picklable (compile worker processes, caches)
        return type(self), (self.reason, self.pattern, self.position)
