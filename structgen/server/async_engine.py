"""One engine loop thread that owns the :class:`~structgen.engine.engine.Engine` (and its device);
asyncio handlers talk to it through a command inbox and per-request chunk queues.

The loop drains the inbox (submit / abort / call), runs one ``Engine.step`` when there is work,
and hands each :class:`~structgen.engine.request.StreamChunk` to its request's ``asyncio.Queue`` with
``loop.call_soon_threadsafe``.  Nothing but this thread touches the engine's scheduler, pools
or radix cache, so aborts from disconnecting clients are applied between steps.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, NamedTuple, TypeVar

from structgen.engine.engine import Engine
from structgen.engine.request import GenerateRequest, StreamChunk
from structgen.fsm import Constraint, TokenFSM

log = logging.getLogger("structgen.server")
T = TypeVar("T")


class EngineDeadError(RuntimeError):
    """The engine loop stopped (shut down, or a step raised); no request can be served."""


class EngineSnapshot(NamedTuple):
    """Engine occupancy read on the loop thread: requests waiting for a grammar, waiting for
    admission, running; KV slots free / held by unpinned radix nodes / total; radix tokens
    pinned by ``lock_ref`` (0 when idle)."""

    grammar: int
    waiting: int
    running: int
    kv_free: int
    kv_evictable: int
    kv_capacity: int
    radix_locked: int


class _Stream(NamedTuple):
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[StreamChunk]


class AsyncEngine:
    """Runs ``engine`` on a daemon thread; thread-safe and asyncio-friendly.

    ``idle_wait_s``: how long the loop sleeps on an empty inbox when there is no work;
    ``on_finish``: called on the loop thread with the last chunk of every submitted request
    (aborted ones included), e.g. for metrics.
    Raises :class:`EngineDeadError` from :meth:`submit` once the loop has stopped.
    """

    def __init__(self, engine: Engine, *, idle_wait_s: float = 0.05, on_finish: Callable[[StreamChunk], None] | None = None) -> None:
        self.engine = engine
        self.on_finish = on_finish
        self.idle_wait_s = idle_wait_s
        self._inbox: deque[tuple[Callable[[], Any], Future[Any] | None]] = deque()
        self._wake = threading.Condition()
        self._streams: dict[int, _Stream] = {}
        self._stop = False
        self._dead: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="structgen-engine", daemon=True)
        self._tokenize_lock = threading.Lock()
        self.steps = 0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and self._dead is None and not self._stop

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Abort what is still in flight (their streams end with reason "abort"), stop the
        loop and join it (at most ``timeout_s``)."""

        def abort_all() -> None:
            for rid in list(self._streams):
                self.engine.abort(rid)

        if self._thread.is_alive() and not self._stop:
            self._post(abort_all, None)
            deadline = time.monotonic() + timeout_s
            while self._streams and time.monotonic() < deadline and self._thread.is_alive():
                time.sleep(0.01)
            self._stop = True
            self._notify()
            self._thread.join(max(0.0, deadline - time.monotonic()))

    # ------------------------------------------------------------------ calls from asyncio

    async def tokenize(self, prompt: Any, chat_template_kwargs: dict[str, Any] | None = None) -> list[int]:
        """``Engine.tokenize`` off the event loop (the tokenizer is used by one thread at a time);
        raises ``RequestError``."""

        def run() -> list[int]:
            with self._tokenize_lock:
                return self.engine.tokenize(prompt, chat_template_kwargs)

        return await asyncio.to_thread(run)

    async def compile(self, constraint: Constraint) -> TokenFSM:
        """Compile on the engine's compiler workers (shared, cached; failures cached too)."""
        return await asyncio.wrap_future(self.engine.compiler.submit(constraint))

    async def submit(self, request: GenerateRequest) -> tuple[int, asyncio.Queue[StreamChunk]]:
        """Queue ``request`` on the engine; returns its id and the queue its chunks arrive on
        (the last has ``finished`` set).  Raises ``RequestError`` or :class:`EngineDeadError`."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[StreamChunk] = asyncio.Queue()

        def do() -> int:
            rid = self.engine.submit(request)
            self._streams[rid] = _Stream(loop, queue)
            return rid

        rid = await self.call(do)
        return rid, queue

    def abort(self, rid: int) -> None:
        """Abort request ``rid`` before the next step (no-op when it already finished or the
        loop has stopped)."""
        try:
            self._post(lambda: self.engine.abort(rid) if rid in self._streams else None, None)
        except EngineDeadError:
            pass

    async def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the loop thread between steps; its result or exception
        (:class:`EngineDeadError` when the loop stops first)."""
        fut: Future[T] = Future()
        self._post(fn, fut)
        return await asyncio.wrap_future(fut)

    async def snapshot(self) -> EngineSnapshot:
        """Occupancy, read consistently between two steps."""
        return await self.call(self._snapshot)

    def _snapshot(self) -> EngineSnapshot:
        eng = self.engine
        sched = eng.scheduler
        radix = eng.cache.radix
        return EngineSnapshot(
            grammar=len(sched.grammar),
            waiting=len(sched.prefill.waiting),
            running=len(sched.decode),
            kv_free=eng.runner.allocator.available,
            kv_evictable=radix.evictable_size if radix else 0,
            kv_capacity=eng.runner.allocator.capacity,
            radix_locked=radix.protected_size if radix else 0,
        )

    # ------------------------------------------------------------------ the loop thread

    def _post(self, fn: Callable[[], Any], fut: Future[Any] | None) -> None:
        with self._wake:
            if self._dead is not None or self._stop:
                raise EngineDeadError(f"the engine loop has stopped ({self._dead or 'shut down'})")
            self._inbox.append((fn, fut))
            self._wake.notify()

    def _execute(self, fn: Callable[[], Any], fut: Future[Any] | None) -> None:
        try:
            result = fn()
        except Exception as exc:  # relayed to the caller (RequestError, ...)
            if fut is None:
                raise
            fut.set_exception(exc)
        else:
            if fut is not None:
                fut.set_result(result)

    def _notify(self) -> None:
        with self._wake:
            self._wake.notify()

    def _run(self) -> None:
        try:
            while not self._stop:
                while self._inbox:
                    self._execute(*self._inbox.popleft())
                if self.engine.has_unfinished():
                    self._dispatch(self.engine.step())
                    self.steps += 1
                else:
                    with self._wake:
                        if not self._inbox and not self._stop:
                            self._wake.wait(self.idle_wait_s)
        except BaseException as exc:  # a failing step leaves the engine unusable: fail everyone clearly
            log.exception("engine loop failed")
            self._dead = exc
            for rid, stream in list(self._streams.items()):
                stream.loop.call_soon_threadsafe(stream.queue.put_nowait, StreamChunk(rid, "", True, "error", None, exc))
            self._streams.clear()
        finally:
            with self._wake:  # no post gets in after this: pending calls fail instead of hanging
                self._stop = True
                while self._inbox:
                    _fn, fut = self._inbox.popleft()
                    if fut is not None:
                        fut.set_exception(EngineDeadError(f"the engine loop has stopped ({self._dead or 'shut down'})"))

    def _dispatch(self, chunks: list[StreamChunk]) -> None:
        for chunk in chunks:
            stream = self._streams.get(chunk.rid)
            if stream is None:
                continue
            if chunk.finished:
                del self._streams[chunk.rid]
                self.engine.forget(chunk.rid)
                if self.on_finish is not None:
                    self.on_finish(chunk)
            try:
                stream.loop.call_soon_threadsafe(stream.queue.put_nowait, chunk)
            except RuntimeError:  # the event loop is gone (shutdown)
                pass
