"""Model runner: the model, its KV pools and attention backend; one forward per step."""

from __future__ import annotations

from typing import Any

import torch

from .attention import AttentionBackend, ForwardBatch, TorchAttentionBackend
from .memory import KVAllocator, KVPool, MemoryConfig, ReqToTokenPool, capacity_from_memory, kv_bytes_per_token, to_device
from .models import LlamaForCausalLM, load_model

ATTENTION_BACKENDS = ("torch",)


class ModelRunner:
    """Loads a local checkpoint and sizes the pools.

    ``max_context`` is ``min(memory.max_context, max_position_embeddings)``; the KV capacity is
    ``memory.max_total_tokens`` or derived from free memory.  :meth:`forward` returns float32
    logits ``[S, vocab_size]`` for the batch's sample rows.
    """

    def __init__(
        self, model_path: str, memory: MemoryConfig, *, device: torch.device, dtype: str = "auto", attention_backend: str = "torch"
    ) -> None:
        if attention_backend not in ATTENTION_BACKENDS:
            raise ValueError(f"attention backend {attention_backend!r} is not available; available: {', '.join(ATTENTION_BACKENDS)}")
        self.device = device
        self.model: LlamaForCausalLM
        self.hf_config: Any
        self.model, self.hf_config = load_model(model_path, dtype=dtype, device=device)
        args = self.model.args
        self.dtype = self.model.lm_head.weight.dtype
        self.vocab_size = args.vocab_size
        self.max_context = min(memory.max_context, args.max_position_embeddings)
        per_token = kv_bytes_per_token(args.num_layers, args.num_kv_heads, args.head_dim, self.dtype)
        capacity = memory.max_total_tokens or capacity_from_memory(memory, per_token, device)
        self.req_to_token = ReqToTokenPool(memory.max_running_requests, self.max_context)
        self.allocator = KVAllocator(capacity)
        self.kv_pool = KVPool(capacity, args.num_layers, args.num_kv_heads, args.head_dim, self.dtype, device)
        self.backend: AttentionBackend = TorchAttentionBackend(self.kv_pool, self.req_to_token)

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch) -> torch.Tensor:
        """Run ``batch``; returns float32 logits ``[len(batch.sample_rows), vocab_size]``."""
        input_ids = to_device(batch.input_ids_cpu, self.device)  # [T]
        positions = to_device(batch.positions_cpu, self.device)  # [T]
        self.backend.plan(batch)
        hidden = self.model(input_ids, positions, self.backend)  # [T, H]
        rows = to_device(torch.tensor(batch.sample_rows, dtype=torch.int64), self.device)  # [S]
        return self.model.compute_logits(hidden[rows])  # [S, V]
