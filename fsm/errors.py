"""Errors of the regex-IR → automaton → token-FSM compiler."""

from __future__ import annotations


class GrammarCompileError(RuntimeError):
    """Compilation hit a limit (state cap) or produced an empty language.

    The message names the limit and its value, e.g. ``max_states=50000``.
    """


class GrammarTimeoutError(GrammarCompileError):
    """Compilation ran past its time limit; the message names ``timeout_s``."""
