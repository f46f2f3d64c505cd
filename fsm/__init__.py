"""Regex IR → token-level FSM: lazy byte automata, vocabulary, masks, forced chains, jump-forward.

Entry points: :func:`compile` (one constraint, no caching) and
:class:`~structgen.fsm.compiler.GrammarCompiler` (caches, limits, async compiles).
"""

from __future__ import annotations

from typing import Any

from .automaton import Budget, ByteDFA, LazyDFA, compile_dfa, compile_lazy
from .compiler import CompilerConfig, CompileStats, Constraint, GrammarCompiler, OutputValidationError
from .errors import GrammarCompileError, GrammarTimeoutError
from .token_fsm import Cursor, JumpForward, TokenFSM, TokenRejectedError
from .vocab import Vocabulary

__all__ = [
    "Budget",
    "ByteDFA",
    "CompileStats",
    "CompilerConfig",
    "Constraint",
    "Cursor",
    "GrammarCompileError",
    "GrammarCompiler",
    "GrammarTimeoutError",
    "JumpForward",
    "LazyDFA",
    "OutputValidationError",
    "TokenFSM",
    "TokenRejectedError",
    "Vocabulary",
    "compile",
    "compile_dfa",
    "compile_lazy",
]


def compile(constraint: Constraint | str, vocab: Vocabulary | Any, *, timeout_s: float = 10.0, max_states: int = 50_000) -> TokenFSM:
    """Compile a :class:`Constraint` (or a regex string, fullmatch semantics) for ``vocab``.

    ``vocab``: a :class:`Vocabulary`, a tokenizer folder, or a ``transformers`` tokenizer.
    Returns a :class:`TokenFSM` whose initial mask row is ready.  Raises ``RegexError`` /
    ``SchemaError`` / ``UnsupportedSchemaError`` for bad constraints, ``GrammarCompileError``
    (state cap, empty language) and ``GrammarTimeoutError`` (``timeout_s``).
    """
    if not isinstance(vocab, Vocabulary):
        vocab = Vocabulary.from_tokenizer(vocab)
    if isinstance(constraint, str):
        constraint = Constraint.regex(constraint)
    compiler = GrammarCompiler(vocab, CompilerConfig(timeout_s=timeout_s, max_states=max_states, cache_size=0))
    return compiler.compile(constraint)
