"""``create_app``: the FastAPI app wired from its parts — :class:`~.service.Service` (one per
app, on ``app.state``), the :class:`~.gate.Gatekeeper` middleware, the error table
(:mod:`.errors`) and the routes (:mod:`.routes`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI

from structgen.engine.engine import Engine
from structgen.engine.request import GenerateRequest, SamplingParams
from structgen.fsm import Constraint
from structgen.server.config import ServerConfig
from structgen.server.errors import install_error_handlers
from structgen.server.gate import Gatekeeper
from structgen.server.routes import ROUTES, router
from structgen.server.service import Service

log = logging.getLogger("structgen.server")
DOC_ROUTES = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})  # FastAPI's own pages


def _warm_up(engine: Engine) -> None:
    """One short constrained request through the engine, so the first client's request does not
    pay the one-time costs (kernel selection, a first compile, first-use allocations)."""
    req = GenerateRequest("warm-up", SamplingParams(max_tokens=4), Constraint.regex(r"[a-z]{1,4}"))
    try:
        out = engine.generate([req])[0]
    except Exception as exc:  # a failed warm-up only costs the first request its time
        log.warning("warm-up request failed: %r", exc)
        return
    if out.finish_reason == "error":
        log.warning("warm-up request failed: %r", out.error)


def create_app(config: ServerConfig | None = None, *, engine: Engine | None = None) -> FastAPI:
    """The FastAPI app serving ``engine`` (or a new engine on ``config.model``; the embedded
    default model when that is None).  Raises ``ModelLoadError`` for a bad model folder."""
    config = config or ServerConfig()
    owns = engine is None
    if engine is None:
        from structgen.api import default_model_path

        engine = Engine(
            config.model or default_model_path(), config.engine, tokenizer_path=config.tokenizer, chat_template=config.chat_template
        )
    svc = Service(config, engine, owns_engine=owns)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        log.info("%s", svc.summary())
        await asyncio.to_thread(_warm_up, engine)  # before the loop starts and /health answers
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

    def count(path: str, status: int) -> None:
        svc.metrics.requests.labels(path if path in ROUTES or path in DOC_ROUTES else "other", str(status)).inc()

    app.add_middleware(Gatekeeper, max_body_bytes=config.max_body_bytes, api_key=config.api_key, count=count)

    install_error_handlers(app)
    app.include_router(router)
    return app
