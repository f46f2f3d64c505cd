"""Regex IR → token-level FSM: lazy byte automata, vocabulary, masks, forced chains, jump-forward.

Entry points: :func:`compile` (one constraint, no caching) and
:class:`~structgen.fsm.compiler.GrammarCompiler` (caches, limits, async compiles).
"""

from __future__ import annotations

from .compiler import GrammarCompiler, compile
from .compiler_config import CompilerConfig, CompileStats
from .constraint import Constraint, OutputValidationError
from .cursor import Cursor, JumpForward, TokenRejectedError
from .dfa import Budget, ByteDFA
from .errors import CompileWorkerError, GrammarCompileError, GrammarTimeoutError
from .lazy_compile import compile_lazy
from .lazy_dfa import LazyDFA
from .nfa import compile_dfa
from .row_workers import RowWorkers, RowWorkerStats, fill_rows, request_rows, rows_outstanding
from .token_fsm import TokenFSM
from .vocab import Vocabulary

__all__ = [
    "Budget",
    "ByteDFA",
    "CompileStats",
    "CompileWorkerError",
    "CompilerConfig",
    "Constraint",
    "Cursor",
    "GrammarCompileError",
    "GrammarCompiler",
    "GrammarTimeoutError",
    "JumpForward",
    "LazyDFA",
    "OutputValidationError",
    "RowWorkerStats",
    "RowWorkers",
    "TokenFSM",
    "TokenRejectedError",
    "Vocabulary",
    "compile",
    "compile_dfa",
    "compile_lazy",
    "fill_rows",
    "request_rows",
    "rows_outstanding",
]
