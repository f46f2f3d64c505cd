"""The compile service's configuration and counters: :class:`CompilerConfig` (limits, caches,
worker processes), :class:`CompileStats`, and :class:`GcPause` (the cyclic collector kept off
while compiles run)."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple


class GcPause:
    """Reference-counted pause of Python's cyclic garbage collector (``gc.disable``), shared by
    every thread of the process: the collector is off while at least one :meth:`paused` block
    runs, and back on after the last one ends if it was on before the first began.

    Compiles allocate many long-lived containers and no reference cycles of note, so the
    collector's passes during a compile are pure overhead; objects freed by reference counting
    are freed as usual, and cycles made meanwhile wait for the next collection."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._was_enabled = False

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._was_enabled:
                    gc.enable()


GC_PAUSE = GcPause()  # the collector is per process, so is its pause


@dataclass(frozen=True)
class CompilerConfig:
    """Limits and caches of a :class:`GrammarCompiler`.

    ``timeout_s`` (s) and ``max_states`` bound each compile; ``cache_size``: entries in the
    in-memory LRU (successes and failures); ``cache_dir``: on-disk cache folder or None (entries kept per version of
    the compiler's code, :func:`~.compiler.code_digest`);
    ``workers``: threads for :meth:`GrammarCompiler.submit`; ``processes``: when > 0,
    :meth:`GrammarCompiler.submit` compiles on that many worker processes instead (spawned,
    each with its own copy of the vocabulary), so compiles and their eager rows run in parallel
    and off the serving process's interpreter lock; the compiled FSM comes back pickled (its
    mask rows as raw bytes).  ``precompute_states``: after the
    automaton is built, compute the mask rows of up to this many token-reachable states
    eagerly, breadth-first (:meth:`TokenFSM.precompute_rows`), within what is left of
    ``timeout_s``: rows not reached stay lazy, and running out of time or states never fails
    the compile.  0 (default): only the initial state's row, the rest on first visit (the
    lowest time to first mask).  ``precompute_budget_s`` (s, or None): stop that eager
    precompute once this long has passed since the compile began, even with ``timeout_s``
    left, so a grammar of tens of thousands of states (long counted strings, large enums)
    delays its first mask by at most about this much; its remaining rows are computed on first
    visit.  None: bounded by ``timeout_s`` only.  ``row_processes``: with ``processes``, this
    many more worker processes compute the first-visit mask rows of the grammars compiled there
    (:class:`~structgen.fsm.row_workers.RowWorkers`; the engine asks for each request's next row
    once the step's sampled tokens are processed and collects them all at the sample, so they are walked in
    parallel and off the serving process's interpreter lock); 0 (default): on the serving thread.
    ``product_cache_mb`` (MiB): the eager sub-automata of intersections and differences
    kept across compiles (:class:`~structgen.fsm.product_cache.ProductCache`; per process,
    so each compile process has its own); 0 turns it off.  ``pause_gc``: keep Python's cyclic garbage
    collector off while a compile runs (:class:`GcPause`): a compile allocates hundreds of
    thousands of long-lived containers (automaton state sets, closures), and the collector's
    passes over them grow with the process's heap (``benchmarks/compile_cpu.py``: four passes
    over 16 median MaskBench schemas took 2.38–2.56 s with it on, 1.97–2.29 s paused).
    """

    timeout_s: float = 10.0
    max_states: int = 50_000
    cache_size: int = 512
    cache_dir: str | None = None
    workers: int = 1
    processes: int = 0
    row_processes: int = 0
    precompute_states: int = 0
    precompute_budget_s: float | None = None
    pause_gc: bool = True
    product_cache_mb: int = 128

    def __post_init__(self) -> None:
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s}")
        if self.max_states < 2:
            raise ValueError(f"max_states must be >= 2, got {self.max_states}")
        if self.cache_size < 0 or self.workers < 1:
            raise ValueError("cache_size must be >= 0 and workers >= 1")
        if self.processes < 0:
            raise ValueError(f"processes must be >= 0, got {self.processes}")
        if self.row_processes < 0 or (self.row_processes and not self.processes):
            raise ValueError(
                f"row_processes must be >= 0 and needs processes > 0, got {self.row_processes} with processes={self.processes}"
            )
        if self.product_cache_mb < 0:
            raise ValueError(f"product_cache_mb must be >= 0, got {self.product_cache_mb}")
        if self.precompute_states < 0:
            raise ValueError(f"precompute_states must be >= 0, got {self.precompute_states}")
        if not isinstance(self.pause_gc, bool):
            raise ValueError(f"pause_gc must be a bool, got {self.pause_gc!r}")
        if self.precompute_budget_s is not None and not self.precompute_budget_s > 0:
            raise ValueError(f"precompute_budget_s must be > 0 or None, got {self.precompute_budget_s}")


class CompileStats(NamedTuple):
    """Counters of a compiler: hits (memory / disk), misses, failures, total compile seconds."""

    memory_hits: int
    disk_hits: int
    misses: int
    failures: int
    compile_s: float
