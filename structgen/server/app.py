"""``create_app``: the FastAPI app wired from its parts — :class:`~.service.Service` (one per
app, on ``app.state``), the :class:`~.gate.Gatekeeper` middleware, the error table
(:mod:`.errors`) and the routes (:mod:`.routes`)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI

from structgen.engine.engine import Engine
from structgen.engine.gc_pauses import freeze_heap
from structgen.engine.prompt_format import load_prompt_format
from structgen.engine.prompt_tokenizer import PromptTokenizer, load_tokenizer
from structgen.server.config import ServerConfig
from structgen.server.engine_client import EngineClient, warm_up
from structgen.server.engine_process import EngineProcess
from structgen.server.engine_thread import EngineThread
from structgen.server.errors import install_error_handlers
from structgen.server.gate import Gatekeeper
from structgen.server.routes import ROUTES, router
from structgen.server.service import Service

log = logging.getLogger("structgen.server")
DOC_ROUTES = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})  # FastAPI's own pages


def create_app(config: ServerConfig | None = None, *, engine: Engine | None = None) -> FastAPI:
    """The FastAPI app.  Without ``engine``: the model ``config.model`` (the embedded default
    when None) is served by an engine process of its own (:class:`EngineProcess`), started and
    warmed up here; HTTP, tokenization and SSE stay in this process.  With ``engine`` (one the
    caller built, and closes): it is stepped on a thread of this process
    (:class:`EngineThread`).  Raises ``ModelLoadError`` for a bad model folder, ``ValueError``
    for a chat template that cannot render a message, ``RuntimeError`` when the engine process
    does not come up."""
    config = config or ServerConfig()
    client: EngineClient
    if engine is None:
        from structgen.api import default_model_path
        from structgen.models.loader import resolve_model_path

        model_path = resolve_model_path(config.model or default_model_path())
        client = EngineProcess(config, model_path, log_level=logging.getLogger("structgen").getEffectiveLevel())
        try:
            tokenizer = load_tokenizer(config.tokenizer or model_path, config.chat_template)
            prompts = PromptTokenizer(tokenizer, client.info.vocab_size, model_path)
            prompt_format = load_prompt_format(model_path)
        except BaseException:
            client.shutdown(5.0)
            raise
    else:
        client = EngineThread(engine)
        prompts, prompt_format = engine.prompts, engine.prompt_format
    svc = Service(config, client, prompts, prompt_format)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        log.info("%s", svc.summary())
        if engine is not None:
            await asyncio.to_thread(warm_up, engine)  # before the loop starts and /health answers
        client.start()
        if config.engine.gc_freeze:
            # what this process holds now (FastAPI, pydantic, the tokenizer, the engine on a
            # thread) lives as long as it does: out of the collector's full passes, each of
            # which would otherwise stop the event loop while it walks all of it
            freeze_heap()
        try:
            yield
        finally:
            svc.closing = True
            await asyncio.to_thread(client.shutdown, config.shutdown_grace_s)
            svc.gc_pauses.close()
            if config.engine.gc_freeze:
                gc.unfreeze()  # an app built again in this process (tests) starts from a collectable heap

    app = FastAPI(title="structgen", version="0.1", lifespan=lifespan)
    app.state.service = svc

    def count(path: str, status: int) -> None:
        svc.metrics.requests.labels(path if path in ROUTES or path in DOC_ROUTES else "other", str(status)).inc()

    app.add_middleware(Gatekeeper, max_body_bytes=config.max_body_bytes, api_key=config.api_key, count=count)

    install_error_handlers(app)
    app.include_router(router)
    return app
