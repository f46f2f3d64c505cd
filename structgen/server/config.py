"""``ServerConfig``: the server's settings (one frozen dataclass holding the engine's)."""

from __future__ import annotations

from dataclasses import dataclass, field

from structgen.engine.config import EngineConfig


@dataclass(frozen=True)
class ServerConfig:
    """Server settings.  ``model``: a local model folder (None: the embedded default);
    ``chat_template``: Jinja chat-template text used instead of the tokenizer's;
    ``api_key``: required as ``Authorization: Bearer KEY`` on ``/v1/*`` when set;
    ``max_queue``: requests accepted and not yet answered (more get 429);
    ``max_body_bytes``: larger bodies get 413; ``served_model_name``: the id in ``/v1/models``
    (default: the folder name); ``shutdown_grace_s``: how long shutdown waits for in-flight
    requests.  Raises ``ValueError`` for values out of range."""

    model: str | None = None
    tokenizer: str | None = None
    chat_template: str | None = None
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
