"""The routes: ``/v1/structured``, the OpenAI-compatible ``/v1/chat/completions``,
``/v1/completions`` and ``/v1/models``, ``/health``, ``/version`` and ``/metrics``.  Each one builds its
constraint and :class:`SamplingParams` from the body and renders the :class:`Service`'s result."""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from structgen.engine.request import Usage
from structgen.fsm import Constraint
from structgen.fsm.constraint import OutputValidationError
from structgen.schemas import SchemaOptions
from structgen.server.constraints import request_constraint
from structgen.server.errors import sampling_params
from structgen.server.protocol import APIError, ChatCompletionRequest, CompletionRequest, StructuredRequest
from structgen.server.service import Result, Service

router = APIRouter()
ROUTES = frozenset({"/v1/structured", "/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics", "/version"})


def service(request: Request) -> Service:
    """The app's :class:`Service`."""
    svc: Service = request.app.state.service
    return svc


# /v1/structured


@router.post("/v1/structured")
async def structured(body: StructuredRequest, request: Request) -> Response:
    """A constrained generation: ``output`` is the parsed, jsonschema-validated JSON for
    schema requests (the matched text for regexes, absent for free text)."""
    svc = service(request)
    svc.check_model(body.model)
    params = sampling_params(body)
    options = SchemaOptions(whitespace=body.whitespace, strict=body.strict)
    constraint: Constraint | None = None
    param = "json_schema"
    if body.json_schema is not None:
        constraint = Constraint.json_schema(body.json_schema, options)
    elif body.regex is not None:
        constraint, param = Constraint.regex(body.regex), "regex"
    given: Any = body.prompt if body.messages is None else _messages(body.messages)
    (prompt,) = svc.prompt_format.apply(constraint, [given])  # the model folder's declared format
    rid_text = f"sg-{uuid.uuid4().hex}"

    def output_of(result: Result) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": rid_text,
            "object": "structured",
            "model": svc.model_name,
            "text": result.text,
            "output": None,
            "finish_reason": result.finish_reason,
            "stop_reason": result.stop_reason,
            "usage": _usage_structured(result.usage),
            "timings": result.timings,
        }
        if constraint is not None and result.finish_reason == "stop" and result.stop_reason is None:
            out["output"] = _validated(constraint, result.text, param)  # a stop string's cut text is not an answer to validate
        elif constraint is None:
            out.pop("output")
        return out

    return await svc.respond(
        request,
        body.stream,
        lambda: svc.start(prompt, constraint, params, constraint_param=param, unwrapped=given if prompt is not given else None),
        output_of,
        lambda delta, _c: {"id": rid_text, "object": "structured.chunk", "delta": delta},
        lambda result: [{**output_of(result), "object": "structured.final"}],
    )


# OpenAI routes


@router.post("/v1/chat/completions")
async def chat_completions(body: ChatCompletionRequest, request: Request) -> Response:
    """OpenAI chat completions; ``response_format`` json_schema / json_object constrain the
    content (``strict: false`` drops unenforceable keywords and post-validates)."""
    svc = service(request)
    svc.check_model(body.model)
    params = sampling_params(body)
    constraint, param = request_constraint(body)
    messages = _messages(body.messages)
    cid = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())

    def content(result: Result) -> str:
        if constraint is not None and result.finish_reason == "stop" and result.stop_reason is None:
            _validated(constraint, result.text, param)
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
                    "stop_reason": result.stop_reason,
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

    return await svc.respond(
        request,
        body.stream,
        lambda: svc.start(messages, constraint, params, constraint_param=param, chat_template_kwargs=body.chat_template_kwargs),
        render,
        delta,
        final,
    )


@router.post("/v1/completions")
async def completions(body: CompletionRequest, request: Request) -> Response:
    """OpenAI text completions (one prompt: text or token ids), constrained by the vLLM /
    SGLang fields (``structured_outputs``, ``guided_*``, ``regex``, ``json_schema``)."""
    svc = service(request)
    svc.check_model(body.model)
    params = sampling_params(body)
    constraint, param = request_constraint(body)
    cid = f"cmpl-{uuid.uuid4().hex}"
    created = int(time.time())

    def choice(text: str, reason: str | None) -> dict[str, Any]:
        return {"index": 0, "text": text, "finish_reason": reason, "logprobs": None}

    def text(result: Result) -> str:
        if constraint is not None and result.finish_reason == "stop" and result.stop_reason is None:
            _validated(constraint, result.text, param)
        return result.text

    def render(result: Result) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "text_completion",
            "created": created,
            "model": svc.model_name,
            "choices": [choice(text(result), result.finish_reason)],
            "usage": _usage_openai(result.usage),
        }

    def chunk(text: str, reason: str | None) -> dict[str, Any]:
        return {"id": cid, "object": "text_completion", "created": created, "model": svc.model_name, "choices": [choice(text, reason)]}

    def final(result: Result) -> list[dict[str, Any]]:
        text(result)
        events = [chunk("", result.finish_reason)]
        if body.stream_options is not None and body.stream_options.include_usage:
            events.append({**chunk("", None), "choices": [], "usage": _usage_openai(result.usage)})
        return events

    return await svc.respond(
        request,
        body.stream,
        lambda: svc.start(body.prompt, constraint, params, constraint_param=param),
        render,
        lambda text, _c: chunk(text, None),
        final,
    )


@router.get("/v1/models")
async def models(request: Request) -> dict[str, Any]:
    svc = service(request)
    return {"object": "list", "data": [{"id": svc.model_name, "object": "model", "created": svc.created, "owned_by": "structgen"}]}


@router.get("/health")
async def health(request: Request) -> JSONResponse:
    svc = service(request)
    ok = svc.client.alive and not svc.closing
    st = svc.client.state
    body = {
        "status": "ok" if ok else "unavailable",
        "in_flight": svc.inflight,
        "engine": {"alive": svc.client.alive, "pid": svc.client.info.pid, "running": st.running, "waiting": st.waiting + st.grammar},
    }
    return JSONResponse(body, status_code=200 if ok else 503)


@router.get("/version")
async def version() -> dict[str, str]:
    from structgen import __version__

    return {"version": __version__}


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    svc = service(request)
    return Response(svc.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


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
