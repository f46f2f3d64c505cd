"""Errors of the regex-IR → automaton → token-FSM compiler."""

from __future__ import annotations


class GrammarCompileError(RuntimeError):
    """Compilation hit a limit (state cap) or produced an empty language.

    The message names the limit and its value, e.g. ``max_states=50000``, and, once the compiler
    has located it, the JSON pointer of the subschema whose product automaton hit it.
    ``product``: while the error travels up from an ``And`` / ``Minus`` automaton's build, the
    innermost such IR node (cleared before the error leaves the compiler).
    """

    product: object | None = None


class GrammarTimeoutError(GrammarCompileError):
    """Compilation ran past its time limit; the message names ``timeout_s``."""


class CompileWorkerError(GrammarCompileError):
    """A compile worker process stopped (or the compiler closed) before answering: not the
    constraint's fault, so never cached; the request may be retried."""
