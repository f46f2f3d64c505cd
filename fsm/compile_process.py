"""What runs on a compile process (:attr:`CompilerConfig.processes`): its start-up
(:func:`worker_init`: the vocabulary's tables, a warm-up compile, the heap frozen), each compile
(:func:`worker_compile`) and what it sends back (:func:`ship_blob`: the NFA fragments built, the
automaton expanded whole where it fits, pickled without the vocabulary)."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import pickle
import time
from typing import TYPE_CHECKING, Any

from structgen.schemas.errors import ConstraintError

from .compiler_config import GC_PAUSE, CompilerConfig
from .constraint import Constraint
from .errors import GrammarCompileError
from .token_fsm import TokenFSM
from .vocab import Vocabulary

if TYPE_CHECKING:
    from .compiler import GrammarCompiler

_WORKER: GrammarCompiler | None = None  # this process's compiler (set by worker_init)
# compiled once by each compile process at start-up: it meets what the first compile of a process
# would otherwise pay for (a `$ref` resolved through jsonschema's validator of the root's draft,
# whose import builds its format checkers' parsers; the Unicode classes of \S \W \D), so no
# request does
WARM_UP = Constraint.json_schema(
    {
        "$defs": {"s": {"type": "string", "format": "email", "pattern": "^\\S\\W\\D$"}},
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/s"}},
    }
)


def process_config(config: CompilerConfig) -> CompilerConfig:
    """What a compile process runs with: one thread, no processes of its own, and no LRU (the
    compiler that owns the process caches what it ships, so a hit never reaches a worker; a
    worker's own copies, each expanded whole, would only grow its memory)."""
    return dataclasses.replace(config, workers=1, processes=0, row_processes=0, cache_size=0)


def worker_init(vocab: Vocabulary, config: CompilerConfig) -> None:
    """A compile process's start-up (the pool's initializer): its compiler on ``vocab`` with
    ``config`` (:func:`process_config`), the vocabulary's tables built and :data:`WARM_UP`
    compiled before any request, then the heap frozen out of the collector's passes."""
    global _WORKER
    from .compiler import GrammarCompiler  # the compiler starts these processes: imported here, not at module level

    vocab.prepare()  # the trie and the walk's tables now, not in the first request's compile
    _WORKER = GrammarCompiler(vocab, config)
    _WORKER.compile(WARM_UP)  # and the one-time imports and tables a compile meets
    gc.collect()
    gc.freeze()  # the vocabulary lives as long as the process: the collector's passes skip it


FRAGMENT_BUDGET_S = 0.05  # NFA fragments a compile process builds before shipping a grammar
# ... up to this many NFA states: past it the pickle (which every copy of the grammar loads, the
# engine's on its serving process) costs more than the fragments the copies would build
FRAGMENT_MAX_NFA_STATES = 16_384
# a compile process then expands the whole automaton within this time and table size, so the
# engine and the row worker expand nothing (a complete table also ships without its NFA)
COMPLETE_BUDGET_S = 0.03
COMPLETE_MAX_ENTRIES = 1 << 20  # transitions (states × byte classes): 4 MB of int32


def worker_compile(constraint: Constraint) -> tuple[bytes | BaseException, float]:
    """Compile in a worker process: (the FSM's state without the vocabulary (the parent has
    it), pickled, so it can be forwarded to a row worker as it is; or the refusal; seconds
    spent)."""
    assert _WORKER is not None
    t0 = time.perf_counter()
    # the fragments and the pickle allocate as much as the compile: the collector stays off
    # through all of it (the grammar is dropped by reference counting once shipped)
    with GC_PAUSE.paused() if _WORKER.config.pause_gc else contextlib.nullcontext():
        try:
            out: bytes | BaseException = ship_blob(_WORKER.compile(constraint))
        except (ConstraintError, GrammarCompileError) as e:
            out = e
    return out, time.perf_counter() - t0


def ship_blob(fsm: TokenFSM) -> bytes:
    """What a compile process sends for a freshly compiled ``fsm``: its NFA fragments built
    (``FRAGMENT_BUDGET_S``, ``FRAGMENT_MAX_NFA_STATES``) and its automaton expanded whole where
    that fits (``COMPLETE_BUDGET_S``, ``COMPLETE_MAX_ENTRIES``), so the engine and its row
    worker expand nothing, its distance bound worked out (:meth:`TokenFSM.distance_bound`), then
    pickled without the vocabulary (the receiver has it).  Mutates
    ``fsm`` (same language, same state ids).  Raises ``GrammarCompileError`` as a compile
    does (a state cap met while building fragments), ``TypeError`` for anything but a
    ``TokenFSM``."""
    if not isinstance(fsm, TokenFSM):
        raise TypeError(f"ship_blob takes a TokenFSM, got {type(fsm).__name__}")
    fsm.build_fragments(time.perf_counter() + FRAGMENT_BUDGET_S, FRAGMENT_MAX_NFA_STATES)
    fsm.complete_dfa(time.perf_counter() + COMPLETE_BUDGET_S, COMPLETE_MAX_ENTRIES)
    fsm.distance_bound()  # worked out here, not on the engine (exact, and cheap, when complete)
    return pickle.dumps(state_without_vocab(fsm), protocol=pickle.HIGHEST_PROTOCOL)


def worker_ping(seconds: float) -> int:
    """A no-op task that holds its worker ``seconds`` and names it (its pid), so that
    :meth:`GrammarCompiler.start_workers` sees every worker of the pool answer."""
    assert _WORKER is not None
    time.sleep(seconds)
    return os.getpid()


def state_without_vocab(fsm: TokenFSM) -> dict[str, Any]:
    """The FSM's pickled state minus the vocabulary (the receiver has it: disk cache, workers)."""
    state = fsm.__getstate__()
    state.pop("vocab")
    return state
