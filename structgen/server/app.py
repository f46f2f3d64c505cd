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
from structgen.server.config import ServerConfig
from structgen.server.errors import install_error_handlers
from structgen.server.gate import Gatekeeper
from structgen.server.routes import ROUTES, router
from structgen.server.service import Service

log = logging.getLogger("structgen.server")


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
        log.info("%s", svc.summary())
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
        svc.metrics.requests.labels(path if path in ROUTES else "other", str(status)).inc()

    app.add_middleware(Gatekeeper, max_body_bytes=config.max_body_bytes, api_key=config.api_key, count=count)

    install_error_handlers(app)
    app.include_router(router)
    return app
