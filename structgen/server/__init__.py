"""The HTTP server (``structgen serve``): FastAPI + uvicorn in the front-end process, the engine
in a process of its own (ZMQ between them), or on a thread for an engine the caller built.

Needs the ``server`` extra (fastapi, uvicorn, prometheus-client); ``import structgen`` does not.
"""

from structgen.server.app import create_app
from structgen.server.config import ServerConfig
from structgen.server.engine_client import EngineClient, EngineDeadError, EngineInfo, EngineSnapshot
from structgen.server.engine_process import EngineProcess
from structgen.server.engine_thread import EngineThread
from structgen.server.launch import ServerThread, serve
from structgen.server.protocol import APIError
from structgen.server.service import Service

__all__ = [
    "APIError",
    "EngineClient",
    "EngineDeadError",
    "EngineInfo",
    "EngineProcess",
    "EngineSnapshot",
    "EngineThread",
    "ServerConfig",
    "ServerThread",
    "Service",
    "create_app",
    "serve",
]
