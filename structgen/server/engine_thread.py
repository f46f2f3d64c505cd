""":class:`EngineThread`: the engine stepped on a thread of the front end's own process — for an
:class:`~structgen.engine.engine.Engine` the caller built and hands to ``create_app``.  asyncio
handlers talk to it through a command inbox and per-request chunk queues.

The loop drains the inbox (submit / abort / call), runs one ``Engine.step`` when there is work,
and hands each :class:`~structgen.engine.request.StreamChunk` to its request's ``asyncio.Queue`` with
``loop.call_soon_threadsafe``.  Nothing but this thread touches the engine's scheduler, pools
or radix cache, so aborts from disconnecting clients are applied between steps.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from structgen.engine.engine import Engine
from structgen.engine.request import GenerateRequest, RequestError, SamplingParams, StreamChunk
from structgen.fsm import Constraint
from structgen.server.engine_client import EngineClient, EngineDeadError, EngineSnapshot, Stream, engine_info, engine_snapshot, hand_over

log = logging.getLogger("structgen.server")
T = TypeVar("T")


class EngineThread(EngineClient):
    """Runs ``engine`` on a daemon thread; thread-safe and asyncio-friendly.

    ``idle_wait_s``: how long the loop sleeps on an empty inbox when there is no work.
    ``on_finish`` is called on the loop thread.  Raises :class:`EngineDeadError` from
    :meth:`submit` once the loop has stopped.
    """

    def __init__(self, engine: Engine, *, idle_wait_s: float = 0.05) -> None:
        self.engine = engine
        self.info = engine_info(engine, os.getpid())
        self.idle_wait_s = idle_wait_s
        self._inbox: deque[tuple[Callable[[], Any], Future[Any] | None]] = deque()
        self._wake = threading.Condition()
        self._streams: dict[int, Stream] = {}
        self._stop = False
        self._dead: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="structgen-engine", daemon=True)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if not self._thread.is_alive() and not self._stop:
            self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and self._dead is None and not self._stop

    @property
    def state(self) -> EngineSnapshot:
        return engine_snapshot(self.engine)  # read across threads: a recent step, not a locked one

    def shutdown(self, timeout_s: float = 30.0) -> None:

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

    async def submit(self, ids: list[int], params: SamplingParams, constraint: Constraint | None) -> tuple[int, asyncio.Queue[StreamChunk]]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[StreamChunk] = asyncio.Queue()

        def do() -> int:
            try:
                rid = self.engine.submit(GenerateRequest(ids, params, constraint))
            except RequestError as exc:  # the contract: a request's own errors arrive as its last chunk
                queue.put_nowait(StreamChunk(-1, "", True, "error", None, exc))
                return -1
            self._streams[rid] = Stream(loop, queue)
            return rid

        rid = await self.call(do)
        return rid, queue

    def abort(self, rid: int) -> None:
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
        return await self.call(lambda: engine_snapshot(self.engine))

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
                    self._dispatch(self.engine.step(emit=self._dispatch))  # the previous step's tokens leave mid-step
                else:
                    with self._wake:
                        if not self._inbox and not self._stop:
                            self._wake.wait(self.idle_wait_s)
        except BaseException as exc:  # a failing step leaves the engine unusable: fail everyone clearly
            log.exception("engine loop failed")
            self._dead = exc
            dead = EngineDeadError(f"the engine loop failed: {exc!r}")
            hand_over((stream, StreamChunk(rid, "", True, "error", None, dead)) for rid, stream in self._streams.items())
            self._streams.clear()
            if self.on_death is not None:
                self.on_death(dead)
        finally:
            with self._wake:  # no post gets in after this: pending calls fail instead of hanging
                self._stop = True
                while self._inbox:
                    _fn, fut = self._inbox.popleft()
                    if fut is not None:
                        fut.set_exception(EngineDeadError(f"the engine loop has stopped ({self._dead or 'shut down'})"))

    def _dispatch(self, chunks: list[StreamChunk]) -> None:
        items: list[tuple[Stream, StreamChunk]] = []
        for chunk in chunks:
            stream = self._streams.get(chunk.rid)
            if stream is None:
                continue
            if chunk.finished:
                del self._streams[chunk.rid]
                self.engine.forget(chunk.rid)
                if self.on_finish is not None:
                    self.on_finish(chunk)
            items.append((stream, chunk))
        hand_over(items)
