"""structgen: constrained-decoding-first structured output engine.

The compile layer is importable without a GPU, triton or flashinfer:

    >>> from structgen import Constraint, Vocabulary, compile
    >>> fsm = compile(Constraint.json_schema({"type": "integer"}), "tests/fixtures/gpt2")  # doctest: +SKIP
"""

from __future__ import annotations

from structgen.fsm import Constraint, Cursor, GrammarCompiler, JumpForward, TokenFSM, Vocabulary, compile
from structgen.fsm.errors import GrammarCompileError, GrammarTimeoutError
from structgen.schemas import RegexError, SchemaError, SchemaOptions, UnsupportedSchemaError

__version__ = "0.1.0"
__all__ = [
    "Constraint",
    "Cursor",
    "GrammarCompileError",
    "GrammarCompiler",
    "GrammarTimeoutError",
    "JumpForward",
    "RegexError",
    "SchemaError",
    "SchemaOptions",
    "TokenFSM",
    "UnsupportedSchemaError",
    "Vocabulary",
    "compile",
]

from structgen.api import GenerationError, generate
from structgen.engine import Engine, EngineConfig
from structgen.request import GenerateRequest, RequestError, RequestOutput, SamplingParams, StreamChunk, Usage

__all__ += [
    "Engine",
    "EngineConfig",
    "GenerateRequest",
    "GenerationError",
    "RequestError",
    "RequestOutput",
    "SamplingParams",
    "StreamChunk",
    "Usage",
    "generate",
]
