"""``EngineClient``: what the HTTP front end needs from an engine, wherever it runs — in a
thread of the front end's process (:class:`~.engine_thread.EngineThread`, for an
:class:`~structgen.engine.engine.Engine` the caller built) or in a process of its own
(:class:`~.engine_process.EngineProcess`, what ``structgen serve`` runs)."""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import NamedTuple

from structgen.engine.engine import Engine
from structgen.engine.gc_pauses import GCStats
from structgen.engine.request import SamplingParams, StreamChunk
from structgen.fsm import Constraint

log = logging.getLogger("structgen.server")


class EngineDeadError(RuntimeError):
    """The engine stopped (shut down, a step raised, or its process died); no request can be
    served.  The server answers 503."""


class EngineInfo(NamedTuple):
    """What the front end learns once the engine is up: the resolved model folder, the model's
    embedding rows (valid prompt ids), the context one sequence may hold (tokens), the KV
    pool's slots, a one-line description (dtype, device, context, KV pool, CUDA graphs,
    compile workers) and the engine's process id."""

    model_path: str
    vocab_size: int
    context: int
    kv_capacity: int
    description: str
    pid: int


class EngineSnapshot(NamedTuple):
    """Engine occupancy between two steps, each request counted once: waiting for its grammar
    (queued or not), waiting for admission, running (a prompt prefilled while its grammar
    compiles counts as running); KV slots free / held by unpinned radix nodes / total; radix
    tokens pinned by ``lock_ref`` (0 when idle); the grammar compiler's cache hits (memory and
    disk), misses and failures since start; the engine process's collector pauses since start
    (:class:`~structgen.engine.gc_pauses.GCStats`)."""

    grammar: int = 0
    waiting: int = 0
    running: int = 0
    kv_free: int = 0
    kv_evictable: int = 0
    kv_capacity: int = 0
    radix_locked: int = 0
    compile_hits: int = 0
    compile_misses: int = 0
    compile_failures: int = 0
    gc: GCStats = GCStats()


class Stream(NamedTuple):
    """Where one request's chunks go: its handler's event loop and queue."""

    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[StreamChunk]


def hand_over(items: Iterable[tuple[Stream, StreamChunk]]) -> None:
    """Put each chunk on its stream's queue from a thread that is not the streams' event loop:
    one ``call_soon_threadsafe`` per event loop, chunks in order; a loop already closed
    (shutdown) is skipped."""
    by_loop: defaultdict[asyncio.AbstractEventLoop, list[tuple[asyncio.Queue[StreamChunk], StreamChunk]]] = defaultdict(list)
    for stream, chunk in items:
        by_loop[stream.loop].append((stream.queue, chunk))
    for loop, pairs in by_loop.items():
        try:
            loop.call_soon_threadsafe(_put_all, pairs)
        except RuntimeError:  # the event loop is gone
            pass


def _put_all(pairs: list[tuple[asyncio.Queue[StreamChunk], StreamChunk]]) -> None:
    for queue, chunk in pairs:
        queue.put_nowait(chunk)


def engine_info(engine: Engine, pid: int) -> EngineInfo:
    """:class:`EngineInfo` of ``engine`` (read on the thread that owns it)."""
    runner = engine.runner
    comp = engine.config.compiler
    graphs = "on" if runner.graph_runner is not None else "off"
    workers = f"{comp.processes} processes, {comp.row_processes} row processes" if comp.processes else f"{comp.workers} threads"
    description = (
        f"{str(runner.dtype).removeprefix('torch.')} on {runner.device}, context {runner.max_context} tokens, "
        f"KV pool {runner.allocator.capacity} tokens, CUDA graphs {graphs}, compiles on {workers}"
    )
    return EngineInfo(engine.model_path, runner.vocab_size, engine.context, runner.allocator.capacity, description, pid)


def engine_snapshot(engine: Engine) -> EngineSnapshot:
    """:class:`EngineSnapshot` of ``engine`` (read on the thread that owns it, between steps)."""
    sched = engine.scheduler
    radix = engine.cache.radix
    stats = engine.compiler.stats()
    # a request prefilled while its grammar compiles is counted once: running, or waiting for its grammar
    held_running = sched.decode.num_held()
    held_waiting = sum(1 for r in sched.prefill.waiting if r.grammar_pending)
    return EngineSnapshot(
        grammar=len(sched.grammar) - held_running,
        waiting=len(sched.prefill.waiting) - held_waiting,
        running=len(sched.decode),
        kv_free=engine.runner.allocator.available,
        kv_evictable=radix.evictable_size if radix else 0,
        kv_capacity=engine.runner.allocator.capacity,
        radix_locked=radix.protected_size if radix else 0,
        compile_hits=stats.memory_hits + stats.disk_hits,
        compile_misses=stats.misses,
        compile_failures=stats.failures,
        gc=engine.gc_pauses.stats(),
    )


class EngineClient(ABC):
    """The front end's handle on one engine.  ``info`` is set once the engine is up;
    ``on_finish`` (set by the owner) is called with the last chunk of every request, on a
    thread of the client's; ``on_death`` (optional) once, when the engine stops unasked."""

    info: EngineInfo
    on_finish: Callable[[StreamChunk], None] | None = None
    on_death: Callable[[BaseException], None] | None = None

    @abstractmethod
    def start(self) -> None:
        """Begin serving (after any warm-up); idempotent."""

    @property
    @abstractmethod
    def alive(self) -> bool:
        """Whether requests can be submitted (False once shut down or dead)."""

    @property
    @abstractmethod
    def state(self) -> EngineSnapshot:
        """The latest occupancy known here, without waiting (for scrapes; may lag one step)."""

    @abstractmethod
    async def submit(self, ids: list[int], params: SamplingParams, constraint: Constraint | None) -> tuple[int, asyncio.Queue[StreamChunk]]:
        """Queue a tokenized request; returns its id and the queue its chunks arrive on, in
        order, the last with ``finished`` set.  Every accepted request gets a last chunk, even
        if the engine dies (finish reason "error", ``error`` an :class:`EngineDeadError`).
        Errors of the request itself (bad parameter, a schema that does not compile) arrive as
        that last chunk's ``error``.  Raises :class:`EngineDeadError` when not :attr:`alive`."""

    @abstractmethod
    def abort(self, rid: int) -> None:
        """Abort request ``rid`` before the engine's next step; a no-op once it finished or the
        engine stopped.  Its stream still ends with a last chunk (reason "abort")."""

    @abstractmethod
    async def snapshot(self) -> EngineSnapshot:
        """Occupancy read by the engine between two steps, after every earlier call of this
        client took effect.  Raises :class:`EngineDeadError` when the engine stopped."""

    @abstractmethod
    def shutdown(self, timeout_s: float) -> None:
        """Abort what is still in flight (streams end with reason "abort"), stop the engine and
        wait for it (at most ``timeout_s`` seconds, then force it).  Blocking; idempotent."""


def warm_up(engine: Engine) -> None:
    """One short constrained request through ``engine``, so the first client's request does not
    pay the one-time costs (kernel selection, a first compile, first-use allocations).  A
    failure is logged, not raised: it only costs the first request its time."""
    from structgen.engine.request import GenerateRequest

    req = GenerateRequest("warm-up", SamplingParams(max_tokens=4), Constraint.regex(r"[a-z]{1,4}"))
    try:
        out = engine.generate([req])[0]
    except Exception as exc:
        log.warning("warm-up request failed: %r", exc)
        return
    if out.finish_reason == "error":
        log.warning("warm-up request failed: %r", out.error)
