"""Device-side runtime: KV pool, req-to-token pool and pinned staging, attention backends
(torch, FlashInfer) and the CUDA-graph runners."""

from structgen.runtime.attention import AttentionBackend, ForwardBatch, TorchAttentionBackend
from structgen.runtime.memory import KVAllocator, KVPool, MemoryConfig, ReqToTokenPool
from structgen.runtime.staging import to_device

__all__ = [
    "AttentionBackend",
    "ForwardBatch",
    "KVAllocator",
    "KVPool",
    "MemoryConfig",
    "ReqToTokenPool",
    "TorchAttentionBackend",
    "to_device",
]
