"""``CompilePool``: compile processes driven from the caller's own thread, with no helper thread.

``concurrent.futures.ProcessPoolExecutor`` hands tasks to its workers and takes their answers
back on helper threads of the calling process (a queue-management thread and a queue feeder
thread), and keeps at most one task per worker queued beyond those running.  In the engine's
process every hand-off on those threads must take the GIL from the engine loop, which runs
Python with few pauses, and waits up to the switch interval each time; between two tasks a
worker waits for several such hand-offs.  Under a burst of cold schemas the compile processes
then sit idle most of the time (measured in ``benchmarks/results/grammar-handoff-cpu``).

Here nothing runs on a helper thread.  :meth:`CompilePool.submit` writes the task to one pipe
that every worker reads from (a non-blocking write: what the pipe cannot take now is written at
the next :meth:`~CompilePool.poll`), so a worker that frees up takes the next task at once; a
worker writes each shipped grammar to a file in a private folder (on ``/dev/shm`` where there is
one) and answers with its path on one shared answer pipe; :meth:`~CompilePool.poll`, called by
the engine loop once per step, reads every answer there is without blocking.  The futures
:meth:`~CompilePool.submit` returns are :class:`PolledFuture`: waiting on one (``result``,
``exception``) polls the pool meanwhile, so a caller that never polls still gets its answer.

A worker that dies breaks the pool (as ``ProcessPoolExecutor`` does): every task not answered
fails with :class:`~.errors.CompileWorkerError` and the owner starts a new pool.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import shutil
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, NamedTuple

from .errors import CompileWorkerError

_HEADER = struct.Struct("!Q")  # each message on either pipe: its length, then its pickle
_READY = -1  # the task id of a worker's "started" answer
PIPE_BYTES = 1 << 20  # the task pipe's size where it can grow (a burst of hundreds of schemas)
SHM_MIN_FREE = 1 << 30  # /dev/shm holds the grammars in flight only with this much free


class CompileAnswer(NamedTuple):
    """A worker's answer to one task: ``blob`` (the task function's bytes, or the exception it
    raised), ``seconds`` (the worker's own time on it) and ``path`` (the file that held
    ``blob``, left on disk for a consumer that forwards it: the consumer removes it or hands
    it on; None for an exception or a grammar sent inline)."""

    blob: bytes | BaseException
    seconds: float
    path: str | None


class PolledFuture(Future[Any]):
    """A ``Future`` answered by :meth:`CompilePool.poll`: ``result`` and ``exception`` poll
    the pool while they wait, so the answer arrives without anyone else polling."""

    def __init__(self, pool: CompilePool) -> None:
        super().__init__()
        self._pool = pool

    def _drive(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.done():
            left = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
            if left <= 0:
                return
            self._pool.wait(left)

    def result(self, timeout: float | None = None) -> Any:
        self._drive(timeout)
        return super().result(timeout=0)  # not done by now: TimeoutError, as a Future's result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._drive(timeout)
        return super().exception(timeout=0)


class CompilePool:
    """``processes`` spawned workers running ``task(payload)`` after ``init(*init_args)``; ``task``
    returns ``(bytes or the exception it caught, seconds)`` (as
    :func:`~.compile_process.worker_compile` does).  Thread-safe.  Raises ``ValueError`` for
    ``processes`` < 1."""

    def __init__(self, processes: int, init: Callable[..., None], init_args: tuple[Any, ...], task: Callable[[Any], Any]) -> None:
        if processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes}")
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")  # never fork a process that may hold CUDA
        self.folder = tempfile.mkdtemp(prefix="structgen-grammars-", dir=_memory_folder())
        task_r, self._task_w = ctx.Pipe(duplex=False)
        self._answer_r, answer_w = ctx.Pipe(duplex=False)
        read_lock, write_lock = ctx.Lock(), ctx.Lock()
        self._locks = (read_lock, write_lock)  # alive while workers start: each opens them by name
        init_blob = pickle.dumps(init_args, protocol=pickle.HIGHEST_PROTOCOL)  # pickled once for every worker
        self._procs = []
        for _ in range(processes):
            proc = ctx.Process(
                target=_worker_main,
                args=(task_r, answer_w, read_lock, write_lock, init, init_blob, task, self.folder),
                daemon=True,
                name="structgen-compile",
            )
            proc.start()
            self._procs.append(proc)
        task_r.close()
        answer_w.close()
        os.set_blocking(self._task_w.fileno(), False)
        os.set_blocking(self._answer_r.fileno(), False)
        _widen(self._task_w.fileno())  # a burst's tasks in the pipe at once, not left for the next poll
        self._lock = threading.Lock()
        self._out = bytearray()  # tasks written but not yet taken by the pipe
        self._in = bytearray()  # answers read but not yet whole
        self._futures: dict[int, PolledFuture] = {}
        self._next_id = 0
        self.ready = 0  # workers started
        self.broken: str | None = None  # why the pool stopped serving, once it has

    @property
    def healthy(self) -> bool:
        """Not broken, and every worker alive (one that died idle leaves the pool unfit too:
        it may have died holding the task pipe's lock)."""
        return self.broken is None and all(p.exitcode is None for p in self._procs)

    def future(self) -> PolledFuture:
        """A new future that waits on this pool (for a caller's own result derived from a task's)."""
        return PolledFuture(self)

    def submit(self, payload: Any) -> PolledFuture:
        """Queue ``task(payload)`` for the next free worker; never blocks.  The future's result
        is a :class:`CompileAnswer`; a broken pool fails it with ``CompileWorkerError``."""
        fut = PolledFuture(self)
        with self._lock:
            if self.broken is not None:
                fut.set_exception(CompileWorkerError(self.broken))
                return fut
            task_id = self._next_id
            self._next_id += 1
            self._futures[task_id] = fut
            msg = pickle.dumps((task_id, payload), protocol=pickle.HIGHEST_PROTOCOL)
            self._out += _HEADER.pack(len(msg))
            self._out += msg
            self._flush()
        return fut

    def poll(self) -> int:
        """Read every answer the workers have sent (never blocks) and answer those futures;
        finds a dead worker (the pool breaks).  Returns the answers read."""
        answered: list[tuple[PolledFuture, CompileAnswer | None, BaseException | None]] = []
        with self._lock:
            if self.broken is None:
                self._flush()
                self._read(answered)
                if self._futures and any(p.exitcode is not None for p in self._procs):
                    self._break("a grammar compile worker process stopped", answered)
        for fut, answer, exc in answered:  # outside the lock: a callback may submit again
            if fut.set_running_or_notify_cancel():
                if exc is not None:
                    fut.set_exception(exc)
                else:
                    fut.set_result(answer)
        return len(answered)

    def wait(self, timeout: float) -> int:
        """Block until an answer arrives, a worker stops or ``timeout`` seconds pass, then
        :meth:`poll`.  Returns the answers read."""
        if self.broken is not None:
            time.sleep(min(max(timeout, 0.0), 0.01))  # nothing will arrive: no hot loop for a waiter
        else:
            with self._lock:
                writing = bool(self._out)
            rfds: list[Any] = [self._answer_r.fileno(), *(p.sentinel for p in self._procs)]
            try:
                select.select(rfds, [self._task_w.fileno()] if writing else [], [], max(timeout, 0.0))
            except (OSError, ValueError):
                pass  # closed meanwhile: poll reports it
        return self.poll()

    def start(self, timeout_s: float) -> None:
        """Wait until every worker has run ``init``.  Raises ``TimeoutError`` past
        ``timeout_s``, ``CompileWorkerError`` when the pool broke."""
        deadline = time.monotonic() + timeout_s
        while self.ready < len(self._procs):
            if self.broken is not None:
                raise CompileWorkerError(self.broken)
            if any(p.exitcode is not None for p in self._procs):
                raise CompileWorkerError("a grammar compile worker process stopped while starting")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{len(self._procs) - self.ready} compile worker processes did not start within {timeout_s} s")
            self.wait(min(left, 0.1))

    def close(self) -> None:
        """Stop the workers (a compile in progress is cut short), fail the futures not answered
        with ``CancelledError`` and remove the folder."""
        answered: list[tuple[PolledFuture, CompileAnswer | None, BaseException | None]] = []
        with self._lock:
            if self.broken is None:
                self._break("the compiler was closed", answered)
        for fut, _answer, _exc in answered:
            fut.cancel()
        for p in self._procs:
            p.join(timeout=5)
        self._task_w.close()
        self._answer_r.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    # ------------------------------------------------------------------ under the lock

    def _flush(self) -> None:
        while self._out:
            try:
                n = os.write(self._task_w.fileno(), self._out)
            except OSError:  # full for now; or no worker left to read (poll finds it by exit codes)
                return
            del self._out[:n]

    def _read(self, answered: list[tuple[PolledFuture, CompileAnswer | None, BaseException | None]]) -> None:
        fd = self._answer_r.fileno()
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:  # every worker gone: found by the exit codes
                break
            self._in += chunk
        size = _HEADER.size
        while len(self._in) >= size:
            (n,) = _HEADER.unpack_from(self._in)
            if len(self._in) < size + n:
                break
            task_id, ok, value, seconds = pickle.loads(self._in[size : size + n])
            del self._in[: size + n]
            if task_id == _READY:
                self.ready += 1
                continue
            fut = self._futures.pop(task_id, None)
            if fut is None:
                continue
            if ok and isinstance(value, bytes):  # sent inline: the folder was full
                answered.append((fut, CompileAnswer(value, seconds, None), None))
            elif ok:
                try:
                    with open(value, "rb") as f:
                        answered.append((fut, CompileAnswer(f.read(), seconds, value), None))
                except OSError as e:
                    answered.append((fut, None, CompileWorkerError(f"a compiled grammar could not be read back: {e}")))
            else:
                answered.append((fut, CompileAnswer(value, seconds, None), None))

    def _break(self, why: str, answered: list[tuple[PolledFuture, CompileAnswer | None, BaseException | None]]) -> None:
        self.broken = why
        for fut in self._futures.values():
            answered.append((fut, None, CompileWorkerError(f"{why}; retry the request")))
        self._futures.clear()
        for p in self._procs:
            if p.exitcode is None:
                p.terminate()


def _memory_folder() -> str | None:
    """``/dev/shm`` where it is writable with at least :data:`SHM_MIN_FREE` bytes free (a
    container's default is often 64 MB), else None (the system's temporary folder)."""
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) and st.f_bavail * st.f_frsize >= SHM_MIN_FREE else None


def _widen(fd: int) -> None:
    """Grow the pipe at ``fd`` to :data:`PIPE_BYTES` where the platform allows (Linux's
    ``F_SETPIPE_SZ``, up to ``/proc/sys/fs/pipe-max-size``); else it keeps its size."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (ImportError, OSError):
        pass


def _write_message(fd: int, obj: Any) -> None:
    msg = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    data = memoryview(_HEADER.pack(len(msg)) + msg)
    while data:
        data = data[os.write(fd, data) :]


def _read_exact(fd: int, n: int) -> bytes | None:
    parts = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            return None
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def _worker_main(task_r: Any, answer_w: Any, read_lock: Any, write_lock: Any, init: Callable[..., None],
                 init_blob: bytes, task: Callable[[Any], Any], folder: str) -> None:  # fmt: skip
    """A worker: ``init``, say so, then take tasks until the task pipe closes.  A grammar goes
    to a file in ``folder``; an answer that does not pickle goes back as its message."""
    init(*pickle.loads(init_blob))
    rfd, wfd = task_r.fileno(), answer_w.fileno()
    with write_lock:
        _write_message(wfd, (_READY, True, os.getpid(), 0.0))
    while True:
        with read_lock:
            head = _read_exact(rfd, _HEADER.size)
            msg = None if head is None else _read_exact(rfd, _HEADER.unpack(head)[0])
        if msg is None:
            return
        task_id, payload = pickle.loads(msg)
        t0 = time.perf_counter()
        try:
            out, seconds = task(payload)
        except BaseException as e:  # anything a task raises goes back to its caller
            out, seconds = e, time.perf_counter() - t0
        if isinstance(out, bytes):
            path = os.path.join(folder, f"{task_id}.pkl")
            try:
                with open(path, "wb") as f:
                    f.write(out)
                answer: tuple[Any, ...] = (task_id, True, path, seconds)
            except OSError:  # the folder is full: the grammar goes on the answer pipe itself
                with contextlib.suppress(OSError):
                    os.unlink(path)
                answer = (task_id, True, out, seconds)
        else:
            try:
                pickle.dumps(out)
            except Exception:
                out = CompileWorkerError(f"{type(out).__name__}: {out}")
            answer = (task_id, False, out, seconds)
        with write_lock:
            _write_message(wfd, answer)
