"""``EngineProcess``: the front end's side of an engine running in a process of its own (what
``structgen serve`` runs), so HTTP, JSON, tokenization and SSE framing never share a GIL with
the engine's step (SGLang's tokenizer-manager / scheduler split; vLLM's API server / engine
core).  The wire format is in :mod:`.engine_main`.

A receiver thread reads the engine's messages and hands each step's chunks to their requests'
asyncio queues (one ``call_soon_threadsafe`` per event loop per step).  When the engine process
dies, every request in flight ends with an :class:`EngineDeadError` chunk, :attr:`alive` turns
False, and ``on_death`` is called once.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import logging
import multiprocessing
import os
import pickle
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future
from typing import Any

from structgen.engine.request import SamplingParams, StreamChunk
from structgen.fsm import Constraint
from structgen.server.config import ServerConfig
from structgen.server.engine_client import EngineClient, EngineDeadError, EngineInfo, EngineSnapshot, Stream, hand_over
from structgen.server.engine_main import dumps, engine_main

log = logging.getLogger("structgen.server")
RECV_POLL_MS = 100  # how often the receiver thread checks that the engine process is alive
STOP_TIMEOUT_S = 30.0  # how long a shutting-down engine process may take to close (workers, pools) before it is terminated


class EngineProcess(EngineClient):
    """Spawns the engine process for ``config`` on the model folder ``model_path`` and waits
    until it is ready (model loaded, warmed up).  ``log_level``: the engine process's level for
    the ``structgen`` loggers.  Raises what loading raised in the engine process
    (``ModelLoadError``, ``ValueError`` for a bad chat template, ...), or ``RuntimeError`` when
    the process died or was not ready within ``start_timeout_s`` seconds."""

    def __init__(self, config: ServerConfig, model_path: str, *, log_level: int = logging.INFO, start_timeout_s: float = 1800.0) -> None:
        import zmq

        self._dir = tempfile.mkdtemp(prefix="structgen-")
        to_engine, from_engine = f"ipc://{self._dir}/to-engine", f"ipc://{self._dir}/from-engine"
        self._ctx = zmq.Context()
        self._send_sock = self._ctx.socket(zmq.PUSH)
        self._recv_sock = self._ctx.socket(zmq.PULL)
        for sock in (self._send_sock, self._recv_sock):
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.SNDHWM, 0)
            sock.setsockopt(zmq.RCVHWM, 0)
        self._send_sock.bind(to_engine)
        self._recv_sock.bind(from_engine)
        self._send_lock = threading.Lock()  # zmq sockets are not thread-safe: sends come from the event loop and shutdown
        self._lock = threading.Lock()  # guards _streams, _dead and _snapshots against the receiver thread
        self._streams: dict[int, Stream] = {}
        self._snapshots: dict[int, Future[EngineSnapshot]] = {}
        self._rids = itertools.count()
        self._dead: EngineDeadError | None = None
        self._closing = False
        self._state = EngineSnapshot()
        spawn = multiprocessing.get_context("spawn")  # CUDA cannot be used in a forked child
        self.process = spawn.Process(
            target=engine_main,
            args=(config, model_path, to_engine, from_engine, os.getpid(), log_level),
            name="structgen-engine",
            daemon=False,  # it starts compile and row worker processes of its own
        )
        self.process.start()
        try:
            self.info = self._wait_ready(start_timeout_s)
        except BaseException:
            self._stop_process(5.0)
            self._close_sockets()
            raise
        self._state = self._state._replace(kv_capacity=self.info.kv_capacity, kv_free=self.info.kv_capacity)
        self._receiver = threading.Thread(target=self._receive, name="structgen-engine-receiver", daemon=True)
        self._receiver.start()
        # The engine process is not a daemon (it starts worker processes of its own), so the
        # interpreter would wait for it at exit; a front end that ends without shutdown stops it.
        atexit.register(self.shutdown, 5.0)

    def _wait_ready(self, timeout_s: float) -> EngineInfo:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._recv_sock.poll(RECV_POLL_MS):
                msg = pickle.loads(self._recv_sock.recv())
                if msg[0] == "ready":
                    info: EngineInfo = msg[1]
                    return info
                if msg[0] == "failed":
                    raise msg[1]
                raise RuntimeError(f"the engine process said {msg[0]!r} before it was ready: {msg[1:]!r}")
            if not self.process.is_alive():
                raise RuntimeError(f"the engine process exited with code {self.process.exitcode} before it was ready")
        raise RuntimeError(f"the engine process was not ready within {timeout_s:.0f} s")

    # ------------------------------------------------------------------ EngineClient

    def start(self) -> None:
        """Nothing to do: the engine process serves from the moment it said ``ready``."""

    @property
    def alive(self) -> bool:
        return self._dead is None and not self._closing and self.process.is_alive()

    @property
    def state(self) -> EngineSnapshot:
        return self._state

    async def submit(self, ids: list[int], params: SamplingParams, constraint: Constraint | None) -> tuple[int, asyncio.Queue[StreamChunk]]:
        queue: asyncio.Queue[StreamChunk] = asyncio.Queue()
        rid = next(self._rids)
        with self._lock:
            if self._dead is not None or self._closing:
                raise EngineDeadError(str(self._dead or "the engine is shutting down"))
            self._streams[rid] = Stream(asyncio.get_running_loop(), queue)
        self._send(("submit", rid, ids, params, constraint))
        return rid, queue

    def abort(self, rid: int) -> None:
        if rid in self._streams and self._dead is None:
            self._send(("abort", rid))

    async def snapshot(self) -> EngineSnapshot:
        fut: Future[EngineSnapshot] = Future()
        seq = next(self._rids)
        with self._lock:
            if self._dead is not None:
                raise EngineDeadError(str(self._dead))
            self._snapshots[seq] = fut
        self._send(("snapshot", seq))
        return await asyncio.wrap_future(fut)

    def shutdown(self, timeout_s: float = 30.0) -> None:
        with self._lock:
            if self._closing:
                return
            self._closing = True
        atexit.unregister(self.shutdown)
        deadline = time.monotonic() + timeout_s
        if self._dead is None and self.process.is_alive():
            self._send(("shutdown",))  # the engine aborts what is in flight, reports it, and exits
            while self._streams and time.monotonic() < deadline and self.process.is_alive():
                time.sleep(0.01)
        self._stop_process(max(STOP_TIMEOUT_S, deadline - time.monotonic()))
        self._receiver.join(5.0)
        self._fail_all(EngineDeadError("the server shut down"))
        self._close_sockets()

    # ------------------------------------------------------------------ internals

    def _send(self, msg: tuple[Any, ...]) -> None:
        with self._send_lock:
            self._send_sock.send(dumps(msg))

    def _stop_process(self, timeout_s: float) -> None:
        self.process.join(timeout_s)
        if self.process.is_alive():
            log.warning("the engine process did not stop within %.0f s; terminating it", timeout_s)
            self.process.terminate()
            self.process.join(5.0)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(5.0)

    def _close_sockets(self) -> None:
        self._send_sock.close()
        self._recv_sock.close()
        self._ctx.term()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _receive(self) -> None:
        """The receiver thread: dispatch messages until the engine process is gone."""
        try:
            while True:
                if self._recv_sock.poll(RECV_POLL_MS):
                    self._dispatch(pickle.loads(self._recv_sock.recv()))
                elif not self.process.is_alive():
                    break
        except Exception as exc:  # a message we cannot read: treat the engine as lost
            log.exception("reading the engine process's messages failed")
            self._engine_died(f"its messages could not be read ({exc!r})")
            return
        if not self._closing:
            self._engine_died(f"the engine process exited with code {self.process.exitcode}")

    def _dispatch(self, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "out":
            self._state = msg[2]
            self._deliver(msg[1])
        elif kind == "snapshot":
            self._state = msg[2]
            with self._lock:
                fut = self._snapshots.pop(msg[1], None)
            if fut is not None:
                fut.set_result(msg[2])
        elif kind == "dead":
            self._engine_died(f"the engine failed: {msg[1]}")
        else:
            log.error("unexpected message %r from the engine process", kind)

    def _deliver(self, chunks: list[StreamChunk]) -> None:
        items: list[tuple[Stream, StreamChunk]] = []
        with self._lock:
            for chunk in chunks:
                stream = self._streams.get(chunk.rid)
                if stream is None:
                    continue
                if chunk.finished:
                    del self._streams[chunk.rid]
                items.append((stream, chunk))
        if self.on_finish is not None:
            for _stream, chunk in items:
                if chunk.finished:
                    self.on_finish(chunk)
        hand_over(items)

    def _engine_died(self, why: str) -> None:
        dead = EngineDeadError(why)
        with self._lock:
            if self._dead is not None:
                return
            self._dead = dead
        if not self._closing:
            log.error("%s; requests in flight fail and new ones get 503", why)
        self._fail_all(dead)
        if self.on_death is not None and not self._closing:
            self.on_death(dead)

    def _fail_all(self, exc: EngineDeadError) -> None:
        with self._lock:
            streams, self._streams = self._streams, {}
            snaps, self._snapshots = self._snapshots, {}
        for fut in snaps.values():
            fut.set_exception(exc)
        hand_over((stream, StreamChunk(rid, "", True, "error", None, exc)) for rid, stream in streams.items())
