"""The server's error table: every failure becomes ``{"error": {"message", "type", "param",
"code"}}`` with its status (400 bad body or field, 401 API key, 413 body too large, 422
constraint refused, 429 queue full, 500 internal, 503 shutting down)."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from structgen.engine.request import RequestError, SamplingParams
from structgen.fsm.errors import GrammarCompileError, GrammarTimeoutError
from structgen.schemas.errors import RegexError, SchemaError, UnsupportedSchemaError
from structgen.server.protocol import APIError, ChatCompletionRequest, CompletionRequest, StructuredRequest

log = logging.getLogger("structgen.server")


def error_response(err: APIError) -> JSONResponse:
    """The ``{"error": …}`` response of ``err`` (``Retry-After`` on 429 / 503)."""
    headers = {"Retry-After": "1"} if err.status in (429, 503) else None
    return JSONResponse(err.body(), status_code=err.status, headers=headers)


def validation_error(exc: RequestValidationError) -> APIError:
    """400 naming the first invalid fields of a body FastAPI could not parse."""
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


def sampling_params(body: StructuredRequest | ChatCompletionRequest | CompletionRequest) -> SamplingParams:
    """The body's :class:`SamplingParams`, or 400 naming the field out of range."""
    try:
        return body.sampling_params()
    except RequestError as exc:
        raise request_error(exc, None) from None


def request_error(exc: RequestError, param: str | None, code: str = "invalid_value") -> APIError:
    """400 for a request the engine refused, naming its field and code (``code`` when it has none)."""
    return APIError(400, str(exc), type="invalid_request_error", param=exc.param or param, code=exc.code or code)


def constraint_error(exc: Exception, param: str) -> APIError:
    """422 for a constraint the compile layer refused, with a code per kind of refusal."""
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


def install_error_handlers(app: FastAPI) -> None:
    """Every error leaves ``app`` as ``{"error": …}``: APIError as is, unparsable bodies as 400,
    Starlette's HTTP errors with their status, anything else as a logged 500."""

    @app.exception_handler(APIError)
    async def _api_error(_r: Request, exc: APIError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _bad_body(_r: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(validation_error(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_r: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        code = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large"}.get(exc.status_code)
        return error_response(APIError(exc.status_code, str(exc.detail), type=kind, code=code))

    @app.exception_handler(Exception)
    async def _internal(_r: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return error_response(APIError(500, f"internal error: {exc!r}", type="server_error", code="internal"))
