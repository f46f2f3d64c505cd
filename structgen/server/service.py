"""``Service``: what every route shares — admission (queue bound) → tokenize → context check →
compile (on the compiler workers; failures are cached) → submit to the
:class:`~structgen.server.async_engine.AsyncEngine` → collect or stream chunks.  A client that
disconnects aborts its request, which frees its KV slots and radix locks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NamedTuple

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from structgen.engine.engine import Engine
from structgen.engine.request import GenerateRequest, RequestError, SamplingParams, StreamChunk, Usage
from structgen.fsm import Constraint
from structgen.fsm.errors import GrammarCompileError
from structgen.schemas import ConstraintError
from structgen.server.async_engine import AsyncEngine, EngineDeadError
from structgen.server.config import ServerConfig
from structgen.server.errors import constraint_error, request_error
from structgen.server.metrics import ServerMetrics
from structgen.server.protocol import APIError

log = logging.getLogger("structgen.server")


class Running(NamedTuple):
    """A request accepted by the engine: its id, chunk queue and host-side timings."""

    rid: int
    queue: asyncio.Queue[StreamChunk]
    prompt_tokens: int
    start_s: float
    compile_s: float
    submit_s: float


class Result(NamedTuple):
    """A finished request as the routes render it; ``stop_reason``: the user stop string that
    ended it (the text is cut there, so a constrained output is not validated), or None."""

    text: str
    finish_reason: str
    usage: Usage
    timings: dict[str, float]
    stop_reason: str | None = None


class Service:
    """Admission, compile, submit and collection shared by every route."""

    def __init__(self, config: ServerConfig, engine: Engine, *, owns_engine: bool) -> None:
        self.config = config
        self.engine = engine
        self.owns_engine = owns_engine
        self.aengine = AsyncEngine(engine, on_finish=self._account)
        self.inflight = 0
        self.closing = False
        self.model_name = config.served_model_name or os.path.basename(os.path.normpath(engine.model_path))
        self.created = int(time.time())
        alloc = engine.runner.allocator
        radix = engine.cache.radix
        self.metrics = ServerMetrics(
            queue_length=lambda: self.inflight,
            kv_free=lambda: alloc.available + (radix.evictable_size if radix else 0),
            radix_locked=lambda: radix.protected_size if radix else 0,
            kv_capacity=alloc.capacity,
            running=lambda: len(engine.scheduler.decode.running),
            waiting=lambda: len(engine.scheduler.prefill.waiting) + len(engine.scheduler.grammar),
        )

    def summary(self) -> str:
        """One line on what is being served: model, dtype, device, context, KV pool, CUDA graphs,
        compile and row workers (logged at start-up)."""
        eng = self.engine
        runner = eng.runner
        comp = eng.config.compiler
        graphs = "on" if runner.graph_runner is not None else "off"
        workers = f"{comp.processes} processes, {comp.row_processes} row processes" if comp.processes else f"{comp.workers} threads"
        return (
            f"serving {self.model_name} ({eng.model_path}): {str(runner.dtype).removeprefix('torch.')} on {runner.device}, "
            f"context {runner.max_context} tokens, KV pool {runner.allocator.capacity} tokens, "
            f"CUDA graphs {graphs}, compiles on {workers}"
        )

    def _account(self, chunk: StreamChunk) -> None:
        if chunk.usage is not None:
            self.metrics.observe_usage(chunk.usage, chunk.finish_reason or "error")

    # -------------------------------------------------------------- admission → submit

    def admit(self) -> None:
        """Count one request in, or raise 503 (shutting down / engine dead) or 429 (queue full)."""
        if self.closing or not self.aengine.alive:
            raise APIError(503, "the server is shutting down or its engine has stopped", type="server_error", code="unavailable")
        if self.inflight >= self.config.max_queue:
            raise APIError(
                429,
                f"queue full: {self.inflight} requests in flight (max_queue={self.config.max_queue}); retry later",
                type="rate_limit_error",
                code="queue_full",
            )
        self.inflight += 1

    def release(self) -> None:
        self.inflight -= 1

    async def start(
        self,
        prompt: Any,
        constraint: Constraint | None,
        params: SamplingParams,
        *,
        constraint_param: str = "json_schema",
        chat_template_kwargs: dict[str, Any] | None = None,
        unwrapped: Any = None,
    ) -> Running:
        """Tokenize (``chat_template_kwargs``: extra variables for the chat template), check the
        context (:meth:`Engine.check_context`), compile and submit; raises :class:`APIError`
        (400 / 422 / 503).  ``unwrapped``: the prompt as given when ``prompt`` is it wrapped in
        the model's declared format; used instead when the wrapped one does not fit."""
        start_s = time.perf_counter()
        try:
            ids = await self.aengine.tokenize(prompt, chat_template_kwargs)
        except RequestError as exc:
            raise request_error(exc, "prompt", "invalid_prompt") from None
        try:
            checked = self.engine.check_context(len(ids), params)
        except RequestError as exc:
            if unwrapped is None:
                raise request_error(exc, "prompt") from None
            return await self.start(prompt=unwrapped, constraint=constraint, params=params, constraint_param=constraint_param)
        params = checked
        compile_s = 0.0
        if constraint is not None:
            t0 = time.perf_counter()
            try:
                await self.aengine.compile(constraint)
            except (ConstraintError, GrammarCompileError) as exc:
                raise constraint_error(exc, constraint_param) from None
            finally:
                compile_s = time.perf_counter() - t0
                self.metrics.compile_seconds.observe(compile_s)
        try:
            rid, queue = await self.aengine.submit(GenerateRequest(ids, params, constraint))
        except RequestError as exc:
            raise request_error(exc, None) from None
        except EngineDeadError as exc:
            raise APIError(503, str(exc), type="server_error", code="unavailable") from None
        return Running(rid, queue, len(ids), start_s, compile_s, time.perf_counter())

    # -------------------------------------------------------------- collection

    def _finish(self, run: Running, chunk: StreamChunk, text: str) -> Result:
        if chunk.finish_reason == "error" or chunk.usage is None:
            err = chunk.error
            if isinstance(err, RequestError):
                raise APIError(400, str(err), type="invalid_request_error", param=err.param, code="invalid_value")
            if isinstance(err, (ConstraintError, GrammarCompileError)):
                raise constraint_error(err, "json_schema")
            log.error("request %d failed in the engine: %r", run.rid, err)
            raise APIError(500, f"the engine failed on this request: {err!r}", type="server_error", code="engine_error")
        usage = chunk.usage
        now = time.perf_counter()
        self.metrics.latency_seconds.observe(now - run.start_s)
        engine_ttft = usage.ttft_s if usage.completion_tokens else usage.latency_s
        timings = {
            "queue_ms": round(usage.queue_s * 1e3, 3),
            "compile_ms": round(run.compile_s * 1e3, 3),
            "ttft_ms": round((run.submit_s - run.start_s + engine_ttft) * 1e3, 3),
            "total_ms": round((now - run.start_s) * 1e3, 3),
        }
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "request %d: finish=%s prompt=%d cached=%d completion=%d forced=%d rolled_back=%d forwards=%d "
                "queue_ms=%.1f compile_ms=%.1f ttft_ms=%.1f total_ms=%.1f",
                run.rid, chunk.finish_reason, usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens,
                usage.forced_tokens, usage.rolled_back_tokens, usage.forwards,
                timings["queue_ms"], timings["compile_ms"], timings["ttft_ms"], timings["total_ms"],
            )  # fmt: skip
        return Result(text, chunk.finish_reason or "stop", usage, timings, chunk.stop_reason)

    async def collect(self, run: Running) -> Result:
        """Wait for the whole output; the request is aborted if this is cancelled."""
        parts: list[str] = []
        finished = False
        try:
            while True:
                chunk = await run.queue.get()
                parts.append(chunk.delta)
                if chunk.finished:
                    finished = True
                    return self._finish(run, chunk, "".join(parts))
        finally:
            if not finished:
                self.aengine.abort(run.rid)

    async def chunks(self, run: Running) -> AsyncIterator[tuple[str, Result | None]]:
        """Yield ``(delta, None)`` as text arrives and ``("", result)`` last.  The caller
        aborts the request when it stops early."""
        parts: list[str] = []
        while True:
            chunk = await run.queue.get()
            parts.append(chunk.delta)
            if chunk.delta:
                yield chunk.delta, None
            if chunk.finished:
                yield "", self._finish(run, chunk, "".join(parts))
                return

    def check_model(self, name: str | None) -> None:
        """404 unless ``name`` is None or the served model's id."""
        if name is not None and name != self.model_name:
            raise APIError(
                404,
                f"model {name!r} is not served here; GET /v1/models lists {self.model_name!r}",
                type="invalid_request_error",
                param="model",
                code="model_not_found",
            )

    async def respond(
        self,
        request: Request,
        stream: bool,
        start: Callable[[], Awaitable[Running]],
        render: Callable[[Result], dict[str, Any]],
        render_delta: Callable[[str, float], dict[str, Any]],
        render_final: Callable[[Result], list[dict[str, Any]]],
    ) -> Response:
        """Run one request: JSON when ``stream`` is false, else SSE deltas, the final events
        and ``[DONE]``; errors before the first byte are plain error responses."""
        self.admit()
        released = False

        def release_once() -> None:
            nonlocal released
            if not released:
                released = True
                self.release()

        if not stream:

            async def work() -> Response:
                run = await start()
                return JSONResponse(render(await self.collect(run)))

            try:
                return await _unless_disconnected(request, work())  # type: ignore[no-any-return]
            finally:
                release_once()
        try:
            run = await start()
        except BaseException:
            release_once()
            raise

        created = time.time()
        done = False

        async def events() -> AsyncIterator[str]:
            nonlocal done
            try:
                async for delta, result in self.chunks(run):
                    if result is None:
                        yield _sse(render_delta(delta, created))
                    else:
                        done = True
                        for payload in render_final(result):
                            yield _sse(payload)
            except APIError as exc:
                done = True
                yield _sse(exc.body())
            yield "data: [DONE]\n\n"

        def close() -> None:
            if not done:
                self.aengine.abort(run.rid)
            release_once()

        return _SSEResponse(events(), close)


def _sse(payload: Any) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


class _SSEResponse(StreamingResponse):
    """Server-sent events whose ``on_close`` runs however the stream ends (done, client gone,
    server shutdown): it aborts the request if unfinished and releases its queue place."""

    def __init__(self, content: AsyncIterator[str], on_close: Callable[[], None]) -> None:
        super().__init__(content, media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()


async def _wait_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def _unless_disconnected(request: Request, work: Awaitable[Any]) -> Any:
    """``await work``, cancelling it (which aborts its request) if the client goes away."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_wait_disconnect(request))
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if task in done:
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, APIError):
        await task
    return Response(status_code=499)
