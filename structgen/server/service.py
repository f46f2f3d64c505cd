"""``Service``: what every route shares — admission (queue bound) → tokenize (in the front end's
process, on a worker thread) → context check → submit to the engine through its
:class:`~structgen.server.engine_client.EngineClient` (the engine compiles the grammar on its
workers; failures are cached) → collect or stream chunks.  A client that disconnects aborts its
request, which frees its KV slots and radix locks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NamedTuple

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from structgen.engine.gc_pauses import GCPauses
from structgen.engine.prompt_format import PromptFormat
from structgen.engine.prompt_tokenizer import PromptTokenizer, fit_context
from structgen.engine.request import RequestError, SamplingParams, StreamChunk, Usage
from structgen.fsm import Constraint
from structgen.fsm.errors import GrammarCompileError
from structgen.schemas import ConstraintError
from structgen.server.config import ServerConfig
from structgen.server.engine_client import EngineClient, EngineDeadError
from structgen.server.errors import constraint_error, request_error
from structgen.server.metrics import ServerMetrics
from structgen.server.protocol import APIError

log = logging.getLogger("structgen.server")
INLINE_TOKENIZE_CHARS = 4096  # text prompts up to this long are tokenized on the event loop; longer ones on a thread


class Running(NamedTuple):
    """A request handed to the engine: its id, chunk queue, host-side timings, whether it has a
    constraint and the request field that carried it (named in errors)."""

    rid: int
    queue: asyncio.Queue[StreamChunk]
    start_s: float
    constrained: bool
    constraint_param: str


class Result(NamedTuple):
    """A finished request as the routes render it; ``stop_reason``: the user stop string that
    ended it (the text is cut there, so a constrained output is not validated), or None."""

    text: str
    finish_reason: str
    usage: Usage
    timings: dict[str, float]
    stop_reason: str | None = None


class Service:
    """Admission, submit and collection shared by every route.  ``client``: the engine (its
    ``on_finish`` is taken for metrics); ``prompts``: the tokenizer used in this process;
    ``prompt_format``: the model folder's declared prompt wrapping."""

    def __init__(self, config: ServerConfig, client: EngineClient, prompts: PromptTokenizer, prompt_format: PromptFormat) -> None:
        self.config = config
        self.client = client
        self.prompts = prompts
        self.prompt_format = prompt_format
        client.on_finish = self._account
        self.inflight = 0
        self.closing = False
        self._tokenize_lock = threading.Lock()
        info = client.info
        self.model_name = config.served_model_name or os.path.basename(os.path.normpath(info.model_path))
        self.created = int(time.time())
        self.gc_pauses = GCPauses()  # this process's collector pauses (closed by the app's lifespan)
        self.metrics = ServerMetrics(queue_length=lambda: self.inflight, engine=lambda: client.state, gc=self.gc_pauses.stats)

    def summary(self) -> str:
        """One line on what is being served: model, dtype, device, context, KV pool, CUDA graphs,
        compile workers and the engine's process (logged at start-up)."""
        info = self.client.info
        where = "this process" if info.pid == os.getpid() else f"process {info.pid}"
        return f"serving {self.model_name} ({info.model_path}): {info.description}; engine in {where}"

    def _account(self, chunk: StreamChunk) -> None:
        if chunk.usage is not None:
            self.metrics.observe_usage(chunk.usage, chunk.finish_reason or "error")

    # -------------------------------------------------------------- admission → submit

    def admit(self) -> None:
        """Count one request in, or raise 503 (shutting down / engine dead) or 429 (queue full)."""
        if self.closing or not self.client.alive:
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
        context (:func:`fit_context`) and submit; raises :class:`APIError` (400 / 503).  The
        engine compiles the constraint: a schema it cannot compile ends the request with an
        error chunk (422 from :meth:`collect`, or before the first byte of a stream).
        ``unwrapped``: the prompt as given when ``prompt`` is it wrapped in
        the model's declared format; used instead when the wrapped one does not fit."""
        start_s = time.perf_counter()
        try:
            ids = await self._tokenize_async(prompt, chat_template_kwargs)
        except RequestError as exc:
            raise request_error(exc, "prompt", "invalid_prompt") from None
        try:
            params = fit_context(self.client.info.context, len(ids), params)
        except RequestError as exc:
            if unwrapped is None:
                raise request_error(exc, "prompt") from None
            return await self.start(prompt=unwrapped, constraint=constraint, params=params, constraint_param=constraint_param)
        try:
            rid, queue = await self.client.submit(ids, params, constraint)
        except EngineDeadError as exc:
            raise APIError(503, str(exc), type="server_error", code="unavailable") from None
        return Running(rid, queue, start_s, constraint is not None, constraint_param)

    async def _tokenize_async(self, prompt: Any, chat_template_kwargs: dict[str, Any] | None) -> list[int]:
        """A short prompt is tokenized right here on the event loop, as SGLang's tokenizer
        manager does (a thread hop costs more than the tokenizer under load: every handoff waits
        for the GIL); a long one, or any while another is being tokenized, on a worker thread."""
        short = isinstance(prompt, str) and len(prompt) <= INLINE_TOKENIZE_CHARS
        if short and self._tokenize_lock.acquire(blocking=False):
            try:
                return self.prompts.tokenize(prompt, chat_template_kwargs)
            finally:
                self._tokenize_lock.release()
        return await asyncio.to_thread(self._tokenize, prompt, chat_template_kwargs)

    def _tokenize(self, prompt: Any, chat_template_kwargs: dict[str, Any] | None) -> list[int]:
        with self._tokenize_lock:  # Hugging Face fast tokenizers are used by one thread at a time
            return self.prompts.tokenize(prompt, chat_template_kwargs)

    # -------------------------------------------------------------- collection

    def _finish(self, run: Running, chunk: StreamChunk, text: str, first_s: float) -> Result:
        """The request's :class:`Result` from its last ``chunk`` and ``text`` (``first_s``: when
        its first chunk reached this process), or the :class:`APIError` its error maps to."""
        if chunk.usage is not None and run.constrained:
            self.metrics.compile_seconds.observe(chunk.usage.grammar_s)
        if chunk.finish_reason == "error" or chunk.usage is None:
            err = chunk.error
            if isinstance(err, RequestError):
                raise request_error(err, None)
            if isinstance(err, (ConstraintError, GrammarCompileError)):
                raise constraint_error(err, run.constraint_param)
            if isinstance(err, EngineDeadError):
                raise APIError(503, str(err), type="server_error", code="unavailable")
            log.error("request %d failed in the engine: %r", run.rid, err)
            raise APIError(500, f"the engine failed on this request: {err!r}", type="server_error", code="engine_error")
        usage = chunk.usage
        now = time.perf_counter()
        self.metrics.latency_seconds.observe(now - run.start_s)
        timings = {  # ttft_ms: arrival here → first chunk back here (tokenization, transit, queue, prefill)
            "queue_ms": round(usage.queue_s * 1e3, 3),
            "compile_ms": round(usage.grammar_s * 1e3, 3),
            "ttft_ms": round(((first_s if usage.completion_tokens else now) - run.start_s) * 1e3, 3),
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
        first_s: float | None = None
        try:
            while True:
                chunk = await run.queue.get()
                first_s = first_s or time.perf_counter()
                parts.append(chunk.delta)
                if chunk.finished:
                    finished = True
                    return self._finish(run, chunk, "".join(parts), first_s)
        finally:
            if not finished:
                self.client.abort(run.rid)

    async def chunks(
        self, run: Running, first: StreamChunk | None = None, first_s: float | None = None
    ) -> AsyncIterator[tuple[str, Result | None]]:
        """Yield ``(delta, None)`` as text arrives and ``("", result)`` last, starting with
        ``first`` when the caller already took it from the queue (at ``first_s``).  The caller
        aborts the request when it stops early."""
        parts: list[str] = []
        while True:
            chunk, first = (first, None) if first is not None else (await run.queue.get(), None)
            first_s = first_s or time.perf_counter()
            parts.append(chunk.delta)
            if chunk.delta:
                yield chunk.delta, None
            if chunk.finished:
                yield "", self._finish(run, chunk, "".join(parts), first_s)
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
            try:  # the first chunk decides between an error response and a stream
                first = await _unless_disconnected(request, run.queue.get())
                first_s = time.perf_counter()
                if isinstance(first, Response):  # the client left before its first token
                    self.client.abort(run.rid)
                    release_once()
                    return first
                if first.finished and first.finish_reason == "error":
                    self._finish(run, first, "", first_s)  # raises the request's APIError
            except BaseException:
                self.client.abort(run.rid)
                raise
        except BaseException:
            release_once()
            raise

        created = time.time()
        done = False

        async def events() -> AsyncIterator[str]:
            nonlocal done
            try:
                async for delta, result in self.chunks(run, first, first_s):
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
                self.client.abort(run.rid)
            release_once()

        return _SSEResponse(events(), close)


# Characters json.dumps(ensure_ascii=False) leaves raw that line readers built on str.splitlines
# (httpx's iter_lines among them) take for line ends; escaped, an event stays one line.
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _sse(payload: Any) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False).translate(_LINE_BREAKS)}\n\n"


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
