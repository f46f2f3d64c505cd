"""The HTTP server (``structgen serve``): FastAPI + uvicorn, one engine loop thread.

Needs the ``server`` extra (fastapi, uvicorn, prometheus-client); ``import structgen`` does not.
"""

from structgen.server.app import create_app
from structgen.server.async_engine import AsyncEngine, EngineDeadError, EngineSnapshot
from structgen.server.config import ServerConfig
from structgen.server.launch import ServerThread, serve
from structgen.server.protocol import APIError
from structgen.server.service import Service

__all__ = [
    "APIError",
    "AsyncEngine",
    "EngineDeadError",
    "EngineSnapshot",
    "ServerConfig",
    "ServerThread",
    "Service",
    "create_app",
    "serve",
]
