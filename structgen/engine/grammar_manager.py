"""``GrammarManager``: requests whose grammar compiles on the compiler's workers; the rest of
the batch never waits for them."""

from __future__ import annotations

import gc
from concurrent.futures import Future

from structgen.engine.request import Req, Status
from structgen.fsm import GrammarCompileError, GrammarCompiler, TokenFSM


class GrammarManager:
    """Requests whose grammar is compiling.  ``poll`` returns those ready (cursor attached) and
    those whose compile failed (error attached); the rest of the batch never waits for them.
    With ``gc_freeze``, a grammar serving its first request is frozen out of the garbage
    collector's passes (``gc.freeze``: it is long-lived, cached by the compiler)."""

    def __init__(self, compiler: GrammarCompiler | None, *, gc_freeze: bool = False) -> None:
        self.compiler = compiler
        self.gc_freeze = gc_freeze
        self._pending: list[tuple[Req, Future[TokenFSM]]] = []
        self._serving: set[int] = set()  # uids of grammars that served a request (frozen with gc_freeze)

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, req: Req) -> None:
        assert req.constraint is not None
        if self.compiler is None:
            raise RuntimeError("constrained request but the engine has no grammar compiler")
        req.status = Status.GRAMMAR
        self._pending.append((req, self.compiler.submit(req.constraint)))

    def poll(self) -> tuple[list[Req], list[Req]]:
        if self.compiler is not None and self._pending:
            self.compiler.poll()  # the compile processes' answers taken in on this thread
        ready: list[Req] = []
        failed: list[Req] = []
        keep: list[tuple[Req, Future[TokenFSM]]] = []
        fresh = False
        for req, fut in self._pending:
            if not fut.done():
                keep.append((req, fut))
                continue
            exc = fut.exception()
            if exc is not None:
                req.error = exc
                failed.append(req)
            else:
                fsm = fut.result()
                req.cursor = fsm.cursor()
                ready.append(req)
                if fsm.uid not in self._serving:
                    if len(self._serving) >= 1 << 16:
                        self._serving.clear()  # bounded; a grammar seen again is frozen again (harmless)
                    self._serving.add(fsm.uid)
                    fresh = True
        self._pending = keep
        if fresh and self.gc_freeze:
            gc.freeze()
        return ready, failed

    def finished(self, req: Req) -> None:
        """``req`` is done: if its grammar met its state cap while serving, or has filled
        three quarters of it (a lazily built automaton grows with every new output), it
        leaves the compiler's cache, so later requests with the same constraint start on a
        fresh copy instead of meeting the cap; requests still on this copy finish on it."""
        cur = req.cursor
        if self.compiler is None or req.constraint is None or cur is None:
            return
        fsm = cur.fsm
        if isinstance(req.error, GrammarCompileError) or 4 * fsm.num_states >= 3 * fsm.dfa.max_states:
            self.compiler.evict(req.constraint, fsm)

    def remove(self, rid: int) -> Req | None:
        for i, (req, _f) in enumerate(self._pending):
            if req.rid == rid:
                del self._pending[i]
                return req
        return None

    def wait(self, timeout_s: float) -> None:
        """Block until some pending compile finishes (used when nothing else can run)."""
        if self._pending and self.compiler is not None:
            self.compiler.wait([f for _r, f in self._pending], timeout_s)
