"""The engine process's main loop (SGLang's scheduler process, vLLM's engine core): it owns the
:class:`~structgen.engine.engine.Engine` — scheduler, grammar compiler, model runner, device —
and talks to the front end over two ZMQ sockets.

Front end → engine (one message per call, drained in full before every step):
``("submit", rid, ids, params, constraint)``, ``("abort", rid)``, ``("snapshot", seq)``,
``("shutdown",)``.  Engine → front end: ``("ready", EngineInfo)`` or ``("failed", exc)`` at start,
then one ``("out", chunks, snapshot)`` per step that produced chunks (batched per step),
``("snapshot", seq, snapshot)`` answers, and ``("dead", message)`` if a step raises.  Messages are
pickled tuples (protocol 5): a step's batch is one ``send``.  Request ids are the front end's.
"""

from __future__ import annotations

import logging
import logging.config
import os
import pickle
import sys
from typing import Any

from structgen.engine.engine import Engine
from structgen.engine.request import GenerateRequest, RequestError, StreamChunk
from structgen.server.config import ServerConfig
from structgen.server.engine_client import engine_info, engine_snapshot, warm_up

log = logging.getLogger("structgen.server")
IDLE_POLL_MS = 100  # how long an idle engine waits for a message before checking on its parent


def dumps(msg: Any) -> bytes:
    return pickle.dumps(msg, protocol=5)


def picklable_error(exc: BaseException | None) -> BaseException | None:
    """``exc`` if it survives pickling, else a ``RuntimeError`` with its type and message (an
    error that cannot cross the process boundary must not take the engine down)."""
    if exc is None:
        return None
    try:
        pickle.loads(pickle.dumps(exc, protocol=5))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


class EngineLoop:
    """Drains messages, steps the engine and sends each step's chunks.  ``recv`` / ``send``: the
    two sockets (``zmq.PULL`` / ``zmq.PUSH``); ``parent_pid``: the front end's process (the loop
    exits when it is gone)."""

    def __init__(self, engine: Engine, recv: Any, send: Any, parent_pid: int) -> None:
        self.engine = engine
        self.recv = recv
        self.send = send
        self.parent_pid = parent_pid
        self.to_engine: dict[int, int] = {}  # front-end rid → engine rid
        self.to_front: dict[int, int] = {}
        self.stopping = False

    def run(self) -> None:
        """Serve until a ``shutdown`` message (in-flight requests aborted and reported) or the
        parent's death.  A step that raises propagates (the caller reports it)."""
        import zmq

        eng = self.engine
        while True:
            if os.getppid() != self.parent_pid:
                log.error("the front-end process is gone; the engine process exits")
                return
            if not eng.has_unfinished():
                if self.stopping:
                    return
                self.recv.poll(IDLE_POLL_MS)
            while True:
                try:
                    raw = self.recv.recv(zmq.NOBLOCK)
                except zmq.Again:
                    break
                self.handle(pickle.loads(raw))
            if eng.has_unfinished():
                self.publish(eng.step(emit=self.publish))  # the previous step's tokens leave mid-step

    def handle(self, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "submit":
            _, rid, ids, params, constraint = msg
            try:
                erid = self.engine.submit(GenerateRequest(ids, params, constraint))
            except RequestError as exc:
                self.send.send(dumps(("out", [StreamChunk(rid, "", True, "error", None, exc)], engine_snapshot(self.engine))))
                return
            self.to_engine[rid] = erid
            self.to_front[erid] = rid
            if self.stopping:
                self.engine.abort(erid)
        elif kind == "abort":
            known = self.to_engine.get(msg[1])
            if known is not None:
                self.engine.abort(known)
        elif kind == "snapshot":
            self.send.send(dumps(("snapshot", msg[1], engine_snapshot(self.engine))))
        elif kind == "shutdown":
            self.stopping = True
            for erid in list(self.to_front):
                self.engine.abort(erid)
        else:
            raise ValueError(f"unknown message {kind!r} from the front end")

    def publish(self, chunks: list[StreamChunk]) -> None:
        out: list[StreamChunk] = []
        for c in chunks:
            rid = self.to_front.get(c.rid)
            if rid is None:
                continue
            if c.finished:
                del self.to_front[c.rid], self.to_engine[rid]
                self.engine.forget(c.rid)
                c = c._replace(rid=rid, error=picklable_error(c.error))
            else:
                c = c._replace(rid=rid)
            out.append(c)
        if out:
            self.send.send(dumps(("out", out, engine_snapshot(self.engine))))


def engine_main(config: ServerConfig, model_path: str, recv_addr: str, send_addr: str, parent_pid: int, log_level: int) -> None:
    """The engine process's entry point (``multiprocessing`` spawn target): load the model,
    warm up, say ``ready`` and serve; exits 0 after a shutdown, 1 when loading or a step
    fails (after telling the front end)."""
    import zmq

    from structgen.server.launch import log_config

    logging.config.dictConfig(log_config(logging.getLevelName(log_level).lower()))
    ctx = zmq.Context()
    recv = ctx.socket(zmq.PULL)
    send = ctx.socket(zmq.PUSH)
    for sock in (recv, send):
        sock.setsockopt(zmq.LINGER, 5000)  # the last messages reach the front end before exit
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RCVHWM, 0)
    recv.connect(recv_addr)
    send.connect(send_addr)
    code = 0
    try:
        try:
            engine = Engine(model_path, config.engine, tokenizer_path=config.tokenizer, chat_template=config.chat_template)
        except BaseException as exc:
            send.send(dumps(("failed", picklable_error(exc))))
            code = 1
            return
        try:
            warm_up(engine)
            send.send(dumps(("ready", engine_info(engine, os.getpid()))))
            EngineLoop(engine, recv, send, parent_pid).run()
        except BaseException as exc:
            log.exception("the engine process failed")
            send.send(dumps(("dead", f"{type(exc).__name__}: {exc}")))
            code = 1
        finally:
            engine.close()
    finally:
        recv.close()
        send.close()
        ctx.term()
        sys.exit(code)
