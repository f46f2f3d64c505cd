"""Host-side engine: requests, scheduler and its managers, radix cache, sampling with the
device-resident mask-row pool, and the model runner that drives the device side."""

from structgen.engine.config import EngineConfig
from structgen.engine.engine import Engine, EngineStats, eos_token_ids
from structgen.engine.request import GenerateRequest, RequestError, RequestOutput, SamplingParams, StreamChunk, Usage
from structgen.engine.scheduler import SchedulerConfig

__all__ = [
    "Engine",
    "EngineConfig",
    "EngineStats",
    "GenerateRequest",
    "RequestError",
    "RequestOutput",
    "SamplingParams",
    "SchedulerConfig",
    "StreamChunk",
    "Usage",
    "eos_token_ids",
]
