"""Regex IR → token-level FSM: lazy byte automata, vocabulary, masks, forced chains, jump-forward.

Entry points: :func:`compile` (one constraint, no caching) and
:class:`~structgen.fsm.compiler.GrammarCompiler` (caches, limits, async compiles).
"""

from __future__ import annotations

from .automaton import Budget, ByteDFA, LazyDFA, compile_dfa, compile_lazy
from .compiler import CompilerConfig, CompileStats, Constraint, GrammarCompiler, OutputValidationError, compile
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
