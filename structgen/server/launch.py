"""``serve`` (uvicorn, graceful shutdown on SIGINT / SIGTERM) and ``ServerThread`` (a server on
a background thread, for tests and benchmarks)."""

from __future__ import annotations

import math
import socket
import threading
import time
from typing import Any

from structgen.server.app import create_app
from structgen.server.config import ServerConfig


def log_config(log_level: str) -> dict[str, Any]:
    """uvicorn's logging configuration with the ``structgen`` loggers (the start-up summary, a
    line per request at ``debug``) on its console handler at ``log_level``."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    cfg: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    cfg["loggers"]["structgen"] = {"handlers": ["default"], "level": log_level.upper(), "propagate": False}
    return cfg


def _uvicorn_config(app: Any, config: ServerConfig, log_level: str) -> Any:
    import uvicorn

    return uvicorn.Config(
        app,
        host=config.host,
        port=config.port,
        log_level=log_level,
        log_config=log_config(log_level),
        timeout_graceful_shutdown=math.ceil(config.shutdown_grace_s),  # 0: cancel at once (None would wait forever)
        access_log=False,
        lifespan="on",
    )


def serve(config: ServerConfig, *, log_level: str = "info") -> None:
    """Load the model in an engine process and serve until SIGINT / SIGTERM (graceful:
    in-flight requests get ``shutdown_grace_s`` to finish, then the rest are aborted).  If the
    engine process dies, requests in flight and new ones get 503, the server shuts down, and
    this raises ``SystemExit`` naming the cause (exit status 1): a supervisor restarts it."""
    import logging.config

    import uvicorn

    logging.config.dictConfig(log_config(log_level))  # the engine process takes its level from here
    sock = listen_socket(config.host, config.port)  # a port in use is an error before the model loads
    died: list[BaseException] = []
    try:
        app = create_app(config)
        server = uvicorn.Server(_uvicorn_config(app, config, log_level))

        def on_death(exc: BaseException) -> None:
            died.append(exc)
            server.should_exit = True

        app.state.service.client.on_death = on_death
        server.run(sockets=[sock])
    finally:
        sock.close()
    if died:
        raise SystemExit(f"structgen serve: {died[0]}; the server stopped")


def listen_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (the server listens on it once it starts).
    Raises ``RuntimeError`` naming the address when it cannot be bound (port in use, no such
    address, no permission)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as e:
        raise RuntimeError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise RuntimeError(f"cannot listen on {host}:{port}: {e.strerror or e} (is another server running there?)") from None
    return sock


class ServerThread:
    """A uvicorn server on a background thread, on an already-bound loopback socket (port 0
    picks a free port): for tests and benchmarks.  ``url`` is its base URL; a context manager
    that shuts the server down gracefully on exit.  Raises ``RuntimeError`` if it does not
    start within ``start_timeout_s``."""

    def __init__(
        self, app: Any, *, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning", start_timeout_s: float = 60.0
    ) -> None:
        import uvicorn

        self.app = app
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.host, self.port = self._sock.getsockname()[:2]
        self.url = f"http://{self.host}:{self.port}"
        svc = getattr(app.state, "service", None)
        grace = svc.config.shutdown_grace_s if svc is not None else 5.0
        self.server = uvicorn.Server(
            uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="on", timeout_graceful_shutdown=math.ceil(grace))
        )
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]}, name="structgen-uvicorn", daemon=True)
        self.start_timeout_s = start_timeout_s

    def start(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server on {self.url} did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout_s)
        self._sock.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
