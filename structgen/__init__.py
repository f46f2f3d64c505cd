"""structgen: constrained-decoding-first structured output engine.

``structgen.generate`` (a validated object from a Pydantic model, JSON Schema or regex and a
prompt), the :class:`Engine` behind it, and the compile layer (``Constraint`` →
``GrammarCompiler`` → ``TokenFSM``).  Importable without a GPU, triton or flashinfer.

The names below are imported on first use (PEP 562): ``import structgen.fsm`` in a compile or
row worker process loads the compile layer alone, not the engine and torch.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from structgen.api import GenerationError, generate
    from structgen.engine.engine import Engine, EngineConfig
    from structgen.engine.request import GenerateRequest, RequestError, RequestOutput, SamplingParams, StreamChunk, Usage
    from structgen.fsm import Constraint, Cursor, GrammarCompiler, JumpForward, TokenFSM, Vocabulary, compile
    from structgen.fsm.errors import GrammarCompileError, GrammarTimeoutError
    from structgen.schemas import RegexError, SchemaError, SchemaOptions, UnsupportedSchemaError

__version__ = "0.1.0"

_EXPORTS = {  # public name → the module that defines it
    **dict.fromkeys(("GenerationError", "generate"), "structgen.api"),
    **dict.fromkeys(("Engine", "EngineConfig"), "structgen.engine.engine"),
    **dict.fromkeys(
        ("GenerateRequest", "RequestError", "RequestOutput", "SamplingParams", "StreamChunk", "Usage"), "structgen.engine.request"
    ),
    **dict.fromkeys(("Constraint", "Cursor", "GrammarCompiler", "JumpForward", "TokenFSM", "Vocabulary", "compile"), "structgen.fsm"),
    **dict.fromkeys(("GrammarCompileError", "GrammarTimeoutError"), "structgen.fsm.errors"),
    **dict.fromkeys(("RegexError", "SchemaError", "SchemaOptions", "UnsupportedSchemaError"), "structgen.schemas"),
}
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


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use.  Raises ``AttributeError`` for
    any other name."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'structgen' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
