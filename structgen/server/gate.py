"""``Gatekeeper``: the API-key and body-size gate in front of every route (pure ASGI)."""

from __future__ import annotations

import secrets
from collections.abc import Callable

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from structgen.server.errors import error_response
from structgen.server.protocol import APIError


class Gatekeeper:
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
                await error_response(APIError(401, msg, type="authentication_error", code="invalid_api_key"))(scope, receive, send)
                return
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                await error_response(APIError(400, "invalid Content-Length header", type="invalid_request_error"))(scope, receive, send)
                return
            if int(length) > self.max_body_bytes:
                await error_response(self._too_large())(scope, receive, send)
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
