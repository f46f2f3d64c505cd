"""structgen: constrained-decoding-first structured output engine.

``structgen.generate`` (a validated object from a Pydantic model, JSON Schema or regex and a
prompt), the :class:`Engine` behind it, and the compile layer (``Constraint`` →
``GrammarCompiler`` → ``TokenFSM``).  Importable without a GPU, triton or flashinfer.
"""

from structgen.api import GenerationError, generate
from structgen.engine.engine import Engine, EngineConfig
from structgen.engine.request import GenerateRequest, RequestError, RequestOutput, SamplingParams, StreamChunk, Usage
from structgen.fsm import Constraint, Cursor, GrammarCompiler, JumpForward, TokenFSM, Vocabulary, compile
from structgen.fsm.errors import GrammarCompileError, GrammarTimeoutError
from structgen.schemas import RegexError, SchemaError, SchemaOptions, UnsupportedSchemaError

__version__ = "0.1.0"
__all__ = [
    "Constraint",
    "Cursor",
    "Engine",
    "EngineConfig",
    "GenerateRequest",
    "GenerationError",
    "GrammarCompileError",
    "GrammarCompiler",
    "GrammarTimeoutError",
    "JumpForward",
    "RegexError",
    "RequestError",
    "RequestOutput",
    "SamplingParams",
    "SchemaError",
    "SchemaOptions",
    "StreamChunk",
    "TokenFSM",
    "UnsupportedSchemaError",
    "Usage",
    "Vocabulary",
    "compile",
    "generate",
]
