"""Constraints → regex IR: JSON Schema / Pydantic converter, regex parser, numeric ranges, formats."""

from __future__ import annotations

from .errors import ConstraintError, RegexError, SchemaError, UnsupportedSchemaError
from .ir import Node
from .json_schema import pydantic_schema, schema_to_ir
from .regex import parse_regex
from .regex_assertions import regex_to_ir
from .schema_options import ConversionReport, SchemaOptions

__all__ = [
    "ConstraintError",
    "ConversionReport",
    "Node",
    "RegexError",
    "SchemaError",
    "SchemaOptions",
    "UnsupportedSchemaError",
    "parse_regex",
    "pydantic_schema",
    "regex_to_ir",
    "schema_to_ir",
]
