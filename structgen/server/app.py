"""The FastAPI app: ``/v1/structured``, the OpenAI-compatible routes, ``/health``, ``/metrics``.

Every route goes through one :class:`Service`: admission (queue bound) → tokenize → compile
(on the compiler workers; failures are cached, so a repeated bad schema is refused at once) →
submit to the :class:`~structgen.server.async_engine.AsyncEngine` → collect or stream chunks.
A client that disconnects aborts its request, which frees its KV slots and radix locks.
Errors are ``{"error": {"message", "type", "param", "code"}}`` with the status of the issue's
table: 400 bad body or field (prompt longer than the context), 401 API key, 413 body too large,
422 constraint refused (unsupported keyword + JSON pointer, regex position, compile limits),
429 queue full, 503 shutting down.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from structgen.api import extraction_prompts, uses_extraction_prompt
from structgen.engine import Engine, EngineConfig
from structgen.fsm import Constraint
from structgen.fsm.compiler import OutputValidationError
from structgen.fsm.errors import GrammarCompileError, GrammarTimeoutError
from structgen.request import GenerateRequest, RequestError, SamplingParams, StreamChunk, Usage
from structgen.schemas import ConstraintError, SchemaOptions
from structgen.schemas.errors import RegexError, SchemaError, UnsupportedSchemaError

from .async_engine import AsyncEngine, EngineDeadError
from .metrics import ServerMetrics
from .protocol import APIError, ChatCompletionRequest, CompletionRequest, StructuredRequest

log = logging.getLogger("structgen.server")


@dataclass(frozen=True)
class ServerConfig:
    """Server settings.  ``model``: a local model folder (None: the embedded default);
    ``api_key``: required as ``Authorization: Bearer KEY`` on ``/v1/*`` when set;
    ``max_queue``: requests accepted and not yet answered (more get 429);
    ``max_body_bytes``: larger bodies get 413; ``served_model_name``: the id in ``/v1/models``
    (default: the folder name); ``shutdown_grace_s``: how long shutdown waits for in-flight
    requests.  Raises ``ValueError`` for values out of range."""

    model: str | None = None
    tokenizer: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    max_queue: int = 1024
    max_body_bytes: int = 4 * 1024 * 1024
    served_model_name: str | None = None
    shutdown_grace_s: float = 30.0
    engine: EngineConfig = field(default_factory=EngineConfig)

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in [0, 65535], got {self.port}")
        if self.max_queue < 1:
            raise ValueError(f"max_queue must be ≥ 1, got {self.max_queue}")
        if self.max_body_bytes < 1024:
            raise ValueError(f"max_body_bytes must be ≥ 1024, got {self.max_body_bytes}")
        if self.api_key is not None and not self.api_key:
            raise ValueError("api_key must not be empty (leave it unset to disable authentication)")
        if self.shutdown_grace_s < 0:
            raise ValueError(f"shutdown_grace_s must be ≥ 0, got {self.shutdown_grace_s}")


# ---------------------------------------------------------------------------------- errors


def _error_response(err: APIError) -> JSONResponse:
    headers = {"Retry-After": "1"} if err.status in (429, 503) else None
    return JSONResponse(err.body(), status_code=err.status, headers=headers)


def _validation_error(exc: RequestValidationError) -> APIError:
    errors = exc.errors()
    parts, param = [], None
    for e in errors[:3]:
        loc = [str(x) for x in e.get("loc", ()) if x != "body"]
        msg = str(e.get("msg", "invalid")).removeprefix("Value error, ")
        if e.get("type") == "json_invalid":
            parts.append(f"the body is not valid JSON ({e.get('ctx', {}).get('error', msg)})")
            continue
        if not loc and ": " in msg:  # model validators name their field first ("n: ...")
            head, rest = msg.split(": ", 1)
            if head.isidentifier():
                loc, msg = [head], rest
        param = param or (".".join(loc) or None)
        parts.append(f"{'.'.join(loc) or 'body'}: {msg}")
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return APIError(400, "; ".join(parts) + more, type="invalid_request_error", param=param, code="invalid_value")


def _constraint_error(exc: Exception, param: str) -> APIError:
    if isinstance(exc, UnsupportedSchemaError):
        return APIError(422, f"unsupported schema: {exc}", type="invalid_request_error", param=param, code="unsupported_schema")
    if isinstance(exc, SchemaError):
        return APIError(422, f"invalid schema: {exc}", type="invalid_request_error", param=param, code="invalid_schema")
    if isinstance(exc, RegexError):
        return APIError(422, f"invalid regex: {exc}", type="invalid_request_error", param=param, code="invalid_regex")
    if isinstance(exc, GrammarTimeoutError):
        return APIError(422, f"grammar compile timed out: {exc}", type="invalid_request_error", param=param, code="compile_timeout")
    if isinstance(exc, GrammarCompileError):
        return APIError(422, f"grammar cannot be compiled: {exc}", type="invalid_request_error", param=param, code="compile_limit")
    return APIError(422, f"invalid constraint: {exc}", type="invalid_request_error", param=param, code="invalid_constraint")


class _Gatekeeper:
    """ASGI middleware: 401 for ``/v1/*`` without the API key (when set), 413 for bodies over
    ``max_body_bytes`` (by Content-Length, or counted while they arrive); counts every answer
    by route and status."""

    def __init__(self, app: ASGIApp, max_body_bytes: int, api_key: str | None, count: Callable[[str, int], None]) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.api_key = api_key
        self.count = count

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.count(path, int(message["status"]))
            await send(message)

        await self._gate(scope, receive, counted)

    async def _gate(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if self.api_key is not None and scope["path"].startswith("/v1/"):
            auth = headers.get("authorization", "")
            given = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
            if not given or not secrets.compare_digest(given.encode(), self.api_key.encode()):
                msg = "missing API key: send 'Authorization: Bearer <key>'" if not given else "invalid API key"
                await _error_response(APIError(401, msg, type="authentication_error", code="invalid_api_key"))(scope, receive, send)
                return
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                await _error_response(APIError(400, "invalid Content-Length header", type="invalid_request_error"))(scope, receive, send)
                return
            if int(length) > self.max_body_bytes:
                await _error_response(self._too_large())(scope, receive, send)
                return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.max_body_bytes:
                    raise StarletteHTTPException(413, self._too_large().message)
            return msg

        await self.app(scope, limited, send)

    def _too_large(self) -> APIError:
        return APIError(413, f"request body exceeds {self.max_body_bytes} bytes", type="invalid_request_error", code="body_too_large")


# ---------------------------------------------------------------------------------- the service


class Running(NamedTuple):
    """A request accepted by the engine: its id, chunk queue and host-side timings."""

    rid: int
    queue: asyncio.Queue[StreamChunk]
    prompt_tokens: int
    start_s: float
    compile_s: float
    submit_s: float


class Result(NamedTuple):
    text: str
    finish_reason: str
    usage: Usage
    timings: dict[str, float]


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
        # a model trained on structgen's extraction prompt (the embedded demo model) gets a text
        # prompt for a schema wrapped in it, as structgen.generate does
        self.extraction_prompt = uses_extraction_prompt(engine.model_path)
        self.created = int(time.time())
        alloc = engine.runner.allocator
        radix = engine.cache.radix
        self.metrics = ServerMetrics(
            queue_length=lambda: self.inflight,
            kv_free=lambda: alloc.available + (radix.evictable_size if radix else 0),
            radix_locked=lambda: radix.protected_size if radix else 0,
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
        *,
        max_tokens: int | None,
        temperature: float,
        top_p: float,
        top_k: int = 0,
        seed: int | None = None,
        stop: tuple[str, ...] = (),
        jump_forward: bool | None = None,
        budget_completion: bool = True,
        constraint_param: str = "json_schema",
    ) -> Running:
        """Tokenize, compile and submit; raises :class:`APIError` (400 / 422 / 503)."""
        start_s = time.perf_counter()
        try:
            ids = await self.aengine.tokenize(prompt)
        except RequestError as exc:
            raise APIError(400, str(exc), type="invalid_request_error", param=exc.param or "prompt", code="invalid_prompt") from None
        ctx = min(self.engine.runner.max_context, self.engine.runner.allocator.capacity)
        if len(ids) >= ctx:
            raise APIError(
                400,
                f"the prompt has {len(ids)} tokens; this model's context is {ctx} tokens and at least one must be left to generate",
                type="invalid_request_error",
                param="prompt",
                code="context_length_exceeded",
            )
        room = ctx - len(ids)
        if max_tokens is not None and max_tokens > room:
            raise APIError(
                400,
                f"max_tokens={max_tokens} plus the prompt's {len(ids)} tokens exceed this model's context of {ctx} tokens "
                f"(at most {room} completion tokens fit)",
                type="invalid_request_error",
                param="max_tokens",
                code="context_length_exceeded",
            )
        try:
            params = SamplingParams(
                max_tokens=max_tokens or room,
                temperature=temperature,
                top_k=top_k,
                top_p=top_p,
                seed=seed,
                stop=stop,
                jump_forward=jump_forward,
                budget_completion=budget_completion,
            )
        except RequestError as exc:
            raise APIError(400, str(exc), type="invalid_request_error", param=exc.param, code="invalid_value") from None
        compile_s = 0.0
        if constraint is not None:
            t0 = time.perf_counter()
            try:
                await self.aengine.compile(constraint)
            except (ConstraintError, GrammarCompileError) as exc:
                raise _constraint_error(exc, constraint_param) from None
            finally:
                compile_s = time.perf_counter() - t0
                self.metrics.compile_seconds.observe(compile_s)
        try:
            rid, queue = await self.aengine.submit(GenerateRequest(ids, params, constraint))
        except RequestError as exc:
            raise APIError(400, str(exc), type="invalid_request_error", param=exc.param, code="invalid_value") from None
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
                raise _constraint_error(err, "json_schema")
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
        return Result(text, chunk.finish_reason or "stop", usage, timings)

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


def _usage_openai(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        "forced_tokens": usage.forced_tokens,
    }


def _usage_structured(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "cached_tokens": usage.cached_tokens,
        "completion_tokens": usage.completion_tokens,
        "forced_tokens": usage.forced_tokens,
    }


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


# ---------------------------------------------------------------------------------- the app


def create_app(config: ServerConfig | None = None, *, engine: Engine | None = None) -> FastAPI:
    """The FastAPI app serving ``engine`` (or a new engine on ``config.model``; the embedded
    default model when that is None).  Raises ``ModelLoadError`` for a bad model folder."""
    config = config or ServerConfig()
    owns = engine is None
    if engine is None:
        from structgen.api import default_model_path

        engine = Engine(config.model or default_model_path(), config.engine, tokenizer_path=config.tokenizer)
    svc = Service(config, engine, owns_engine=owns)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        svc.aengine.start()
        try:
            yield
        finally:
            svc.closing = True
            await asyncio.to_thread(svc.aengine.shutdown, config.shutdown_grace_s)
            if svc.owns_engine:
                engine.close()

    app = FastAPI(title="structgen", version="0.1", lifespan=lifespan)
    app.state.service = svc
    routes = {"/v1/structured", "/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"}

    def count(path: str, status: int) -> None:
        svc.metrics.requests.labels(path if path in routes else "other", str(status)).inc()

    app.add_middleware(_Gatekeeper, max_body_bytes=config.max_body_bytes, api_key=config.api_key, count=count)

    @app.exception_handler(APIError)
    async def _api_error(_r: Request, exc: APIError) -> JSONResponse:
        return _error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _bad_body(_r: Request, exc: RequestValidationError) -> JSONResponse:
        return _error_response(_validation_error(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_r: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        code = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large"}.get(exc.status_code)
        return _error_response(APIError(exc.status_code, str(exc.detail), type=kind, code=code))

    @app.exception_handler(Exception)
    async def _internal(_r: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return _error_response(APIError(500, f"internal error: {exc!r}", type="server_error", code="internal"))

    def check_model(name: str | None) -> None:
        if name is not None and name != svc.model_name:
            raise APIError(
                404,
                f"model {name!r} is not served here; GET /v1/models lists {svc.model_name!r}",
                type="invalid_request_error",
                param="model",
                code="model_not_found",
            )

    async def respond(
        request: Request,
        stream: bool,
        start: Callable[[], Awaitable[Running]],
        render: Callable[[Result], dict[str, Any]],
        render_delta: Callable[[str, float], dict[str, Any]],
        render_final: Callable[[Result], list[dict[str, Any]]],
    ) -> Response:
        """Run one request: JSON when ``stream`` is false, else SSE deltas, the final events
        and ``[DONE]``; errors before the first byte are plain error responses."""
        svc.admit()
        released = False

        def release_once() -> None:
            nonlocal released
            if not released:
                released = True
                svc.release()

        if not stream:

            async def work() -> Response:
                run = await start()
                return JSONResponse(render(await svc.collect(run)))

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
                async for delta, result in svc.chunks(run):
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
                svc.aengine.abort(run.rid)
            release_once()

        return _SSEResponse(events(), close)

    # -------------------------------------------------------------- /v1/structured

    @app.post("/v1/structured")
    async def structured(body: StructuredRequest, request: Request) -> Response:
        """A constrained generation: ``output`` is the parsed, jsonschema-validated JSON for
        schema requests (the matched text for regexes, absent for free text)."""
        check_model(body.model)
        options = SchemaOptions(whitespace=body.whitespace, strict=body.strict)
        constraint: Constraint | None = None
        param = "json_schema"
        if body.json_schema is not None:
            constraint = Constraint.json_schema(body.json_schema, options)
        elif body.regex is not None:
            constraint, param = Constraint.regex(body.regex), "regex"
        prompt: Any = body.prompt if body.messages is None else _messages(body.messages)
        if svc.extraction_prompt:
            (prompt,) = extraction_prompts(constraint, [prompt])
        rid_text = f"sg-{uuid.uuid4().hex}"

        def output_of(result: Result) -> dict[str, Any]:
            out: dict[str, Any] = {
                "id": rid_text,
                "object": "structured",
                "model": svc.model_name,
                "text": result.text,
                "output": None,
                "finish_reason": result.finish_reason,
                "usage": _usage_structured(result.usage),
                "timings": result.timings,
            }
            if constraint is not None and result.finish_reason == "stop":
                out["output"] = _validated(constraint, result.text, param)
            elif constraint is None:
                out.pop("output")
            return out

        return await respond(
            request,
            body.stream,
            lambda: svc.start(
                prompt,
                constraint,
                max_tokens=body.max_tokens,
                temperature=body.temperature,
                top_p=body.top_p,
                top_k=body.top_k,
                seed=body.seed,
                stop=body.stop_tuple(),
                jump_forward=body.jump_forward,
                budget_completion=body.budget_completion,
                constraint_param=param,
            ),
            output_of,
            lambda delta, _c: {"id": rid_text, "object": "structured.chunk", "delta": delta},
            lambda result: [{**output_of(result), "object": "structured.final"}],
        )

    # -------------------------------------------------------------- OpenAI routes

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatCompletionRequest, request: Request) -> Response:
        """OpenAI chat completions; ``response_format`` json_schema / json_object constrain the
        content (``strict: false`` drops unenforceable keywords and post-validates)."""
        check_model(body.model)
        constraint: Constraint | None = None
        fmt = body.response_format
        if fmt is not None and fmt.type == "json_object":
            constraint = Constraint.json_schema({"type": "object"})
        elif fmt is not None and fmt.type == "json_schema":
            assert fmt.json_schema is not None
            schema = fmt.json_schema.schema_ if fmt.json_schema.schema_ is not None else {"type": "object"}
            constraint = Constraint.json_schema(schema, SchemaOptions(strict=fmt.json_schema.strict is not False))
        messages = _messages(body.messages)
        cid = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())

        def content(result: Result) -> str:
            if constraint is not None and result.finish_reason == "stop":
                _validated(constraint, result.text, "response_format")
            return result.text

        def render(result: Result) -> dict[str, Any]:
            return {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": svc.model_name,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content(result), "refusal": None},
                        "finish_reason": result.finish_reason,
                        "logprobs": None,
                    }
                ],
                "usage": _usage_openai(result.usage),
                "timings": result.timings,
            }

        first = [True]

        def delta(text: str, _c: float) -> dict[str, Any]:
            d: dict[str, Any] = {"content": text}
            if first[0]:
                d["role"] = "assistant"
                first[0] = False
            return _chat_chunk(cid, created, svc.model_name, d, None)

        def final(result: Result) -> list[dict[str, Any]]:
            content(result)
            events = [_chat_chunk(cid, created, svc.model_name, {}, result.finish_reason)]
            if body.stream_options is not None and body.stream_options.include_usage:
                events.append({**_chat_chunk(cid, created, svc.model_name, {}, None), "choices": [], "usage": _usage_openai(result.usage)})
            return events

        return await respond(
            request,
            body.stream,
            lambda: svc.start(
                messages,
                constraint,
                max_tokens=body.max_tokens,
                temperature=body.temperature,
                top_p=body.top_p,
                seed=body.seed,
                stop=body.stop_tuple(),
                constraint_param="response_format",
            ),
            render,
            delta,
            final,
        )

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request) -> Response:
        """OpenAI text completions (one prompt: text or token ids)."""
        check_model(body.model)
        cid = f"cmpl-{uuid.uuid4().hex}"
        created = int(time.time())

        def choice(text: str, reason: str | None) -> dict[str, Any]:
            return {"index": 0, "text": text, "finish_reason": reason, "logprobs": None}

        def render(result: Result) -> dict[str, Any]:
            return {
                "id": cid,
                "object": "text_completion",
                "created": created,
                "model": svc.model_name,
                "choices": [choice(result.text, result.finish_reason)],
                "usage": _usage_openai(result.usage),
            }

        def chunk(text: str, reason: str | None) -> dict[str, Any]:
            return {"id": cid, "object": "text_completion", "created": created, "model": svc.model_name, "choices": [choice(text, reason)]}

        def final(result: Result) -> list[dict[str, Any]]:
            events = [chunk("", result.finish_reason)]
            if body.stream_options is not None and body.stream_options.include_usage:
                events.append({**chunk("", None), "choices": [], "usage": _usage_openai(result.usage)})
            return events

        return await respond(
            request,
            body.stream,
            lambda: svc.start(
                body.prompt,
                None,
                max_tokens=body.max_tokens,
                temperature=body.temperature,
                top_p=body.top_p,
                seed=body.seed,
                stop=body.stop_tuple(),
            ),
            render,
            lambda text, _c: chunk(text, None),
            final,
        )

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": svc.model_name, "object": "model", "created": svc.created, "owned_by": "structgen"}]}

    @app.get("/health")
    async def health() -> JSONResponse:
        ok = svc.aengine.alive and not svc.closing
        return JSONResponse({"status": "ok" if ok else "unavailable", "in_flight": svc.inflight}, status_code=200 if ok else 503)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(svc.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    return app


def _messages(messages: list[Any]) -> list[dict[str, str]]:
    out = []
    for i, m in enumerate(messages):
        try:
            out.append({"role": m.role, "content": m.text()})
        except ValueError as exc:
            raise APIError(
                400, f"messages[{i}].{exc}", type="invalid_request_error", param=f"messages.{i}.content", code="invalid_value"
            ) from None
    return out


def _validated(constraint: Constraint, text: str, param: str) -> Any:
    try:
        return constraint.validate(text)
    except (OutputValidationError, ValueError) as exc:
        raise APIError(
            422,
            f"the output failed validation against the constraint: {exc}",
            type="invalid_request_error",
            param=param,
            code="output_validation_failed",
        ) from None


def _chat_chunk(cid: str, created: int, model: str, delta: dict[str, Any], reason: str | None) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": reason, "logprobs": None}],
    }
