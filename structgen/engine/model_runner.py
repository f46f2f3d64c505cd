"""Model runner: the model, its KV pools and attention backend; one forward per step."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from structgen.engine.config import EngineConfig

from structgen.engine.sampling import FutureIds
from structgen.models import LlamaForCausalLM, load_model
from structgen.runtime.attention import (
    AttentionBackend,
    ForwardBatch,
    TorchAttentionBackend,
    flatten_extend,
    resolve_attention_backend,
)
from structgen.runtime.memory import KVAllocator, KVPool, ReqToTokenPool, capacity_from_memory, kv_bytes_per_token
from structgen.runtime.staging import to_device


class ModelRunner:
    """Loads a local checkpoint and sizes the pools, all from one :class:`EngineConfig`.

    ``max_context`` is ``min(config.memory.max_context, max_position_embeddings)``; the
    req-to-token pool has ``config.scheduler.max_running_requests`` rows; the KV capacity is
    ``memory.max_total_tokens`` or derived from free memory.  ``random_weights_seed`` draws the
    weights on the device instead of reading them (the folder then needs only config.json).
    With the FlashInfer backend and ``cuda_graph``, decode batches of up to
    ``min(cuda_graph_max_bs, max_running_requests)`` requests replay captured CUDA graphs, and
    so do extend batches of as many requests and at most ``cuda_graph_max_extend_tokens``
    tokens (padded to captured sizes; 0 turns extend graphs off).  Raises ``ModelLoadError`` /
    ``UnsupportedModelError`` for a bad folder and ``ValueError`` for a backend it cannot use.  ``decode_kernel`` picks the
    decode graphs' attention (:data:`~structgen.runtime.flashinfer_backend.DECODE_KERNELS`);
    with ``extend_as_decode`` a small extend batch replays them one row per token
    (:func:`~structgen.runtime.attention.flatten_extend`; decode graphs then capture up to
    twice ``cuda_graph_max_bs`` rows).
    :meth:`forward` returns float32 logits ``[S, vocab_size]`` for the batch's sample rows.
    Input ids may be placeholders of :attr:`future_ids` (ids sampled on the device, not yet
    seen by the host: the overlap scheduler's next step).
    """

    def __init__(self, model_path: str, config: EngineConfig) -> None:
        self.settings = config.runner_settings()  # what an engine reusing this runner must match
        memory = config.memory
        device = config.torch_device()
        max_running_requests = config.scheduler.max_running_requests
        self.device = device
        self.model: LlamaForCausalLM
        self.hf_config: Any
        self.model, self.hf_config = load_model(
            model_path, dtype=config.dtype, device=device, random_weights_seed=config.random_weights_seed
        )
        args = self.model.args
        self.dtype = self.model.lm_head.weight.dtype
        self.vocab_size = args.vocab_size
        self.max_context = min(memory.max_context, args.max_position_embeddings)
        per_token = kv_bytes_per_token(args.num_layers, args.num_kv_heads, args.head_dim, self.dtype)
        capacity = memory.max_total_tokens or capacity_from_memory(memory, per_token, device, max_running_requests)
        self.req_to_token = ReqToTokenPool(max_running_requests, self.max_context)
        self.allocator = KVAllocator(capacity)
        self.kv_pool = KVPool(capacity, args.num_layers, args.num_kv_heads, args.head_dim, self.dtype, device)
        self.future_ids = FutureIds(max_running_requests, device)  # read by every forward (and graph) for placeholder ids
        self.attention_backend = resolve_attention_backend(config.attention_backend, device, self.dtype)
        self.backend: AttentionBackend
        self.graph_runner = None
        self.extend_graph_runner = None
        self.use_cuda_graph = config.cuda_graph  # an engine reusing this runner may turn replays off
        self.forward_counts: Counter[str] = Counter()  # "decode graph" / "extend graph" / "eager" forwards run
        self.last_forward_kind: str | None = None
        if self.attention_backend == "flashinfer":
            from structgen.runtime.cuda_graphs import DecodeGraphRunner, ExtendGraphRunner
            from structgen.runtime.flashinfer_backend import FlashInferAttentionBackend

            fi_backend = FlashInferAttentionBackend(
                self.kv_pool,
                self.req_to_token,
                num_heads=args.num_heads,
                num_kv_heads=args.num_kv_heads,
                head_dim=args.head_dim,
                sm_scale=args.head_dim**-0.5,
                layer_windows=list(args.layer_windows),
                prefill_kernel=config.prefill_kernel,
            )
            self.backend = fi_backend
            if config.cuda_graph:
                max_bs = max(1, min(config.cuda_graph_max_bs, max_running_requests))
                pool = torch.cuda.graph_pool_handle()
                self.graph_runner = DecodeGraphRunner(
                    fi_backend,
                    self._decode_logits,
                    max_bs=max_bs,
                    max_context=self.max_context,
                    mempool=pool,
                    decode_kernel=config.decode_kernel,
                    max_rows=2 * max_bs if config.extend_as_decode else 0,
                )
                if config.cuda_graph_max_extend_tokens > 0:
                    self.extend_graph_runner = ExtendGraphRunner(
                        fi_backend,
                        self._extend_logits,
                        max_bs=max_bs,
                        max_tokens=config.cuda_graph_max_extend_tokens,
                        max_context=self.max_context,
                        mempool=pool,
                    )
        else:
            self.backend = TorchAttentionBackend(self.kv_pool, self.req_to_token)

    def pools_empty(self) -> bool:
        """Every KV slot and req-to-token row is free (no request holds any, nothing cached)."""
        return (
            self.allocator.available == self.allocator.capacity
            and self.req_to_token.available == self.req_to_token.req_to_token_cpu.shape[0]
        )

    def _decode_logits(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        ids = self.future_ids.resolve(input_ids)  # [B]
        return self.model.compute_logits(self.model(ids, positions, self.backend))  # [B, V]

    def _extend_logits(self, input_ids: torch.Tensor, positions: torch.Tensor, sample_rows: torch.Tensor) -> torch.Tensor:
        ids = self.future_ids.resolve(input_ids)  # [T]
        hidden = self.model(ids, positions, self.backend)  # [T, H]
        return self.model.compute_logits(hidden[sample_rows])  # [bs, V]

    def _count(self, kind: str) -> None:
        self.forward_counts[kind] += 1
        self.last_forward_kind = kind

    def synchronize(self) -> None:
        """Wait for the device's work (a no-op on CPU)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch) -> torch.Tensor:
        """Run ``batch``; returns float32 logits ``[len(batch.sample_rows), vocab_size]`` (a
        decode-graph replay for a decode-only batch, an extend-graph replay for a small extend
        batch, when graphs were captured; eager otherwise).  Counts each kind in
        ``forward_counts``."""
        if self.use_cuda_graph and self.graph_runner is not None and self.graph_runner.can_run(batch):
            self._count("decode graph")
            return self.graph_runner.replay(batch)
        if self.use_cuda_graph and self.graph_runner is not None and self.settings["extend_as_decode"]:
            flat = flatten_extend(batch, self.graph_runner.buckets[-1])
            if flat is not None:
                self._count("decode graph, one row per token")
                rows = to_device(torch.tensor(batch.sample_rows, dtype=torch.int64), self.device)  # [S]
                return self.graph_runner.replay(flat)[rows]  # [S, V]
        if self.use_cuda_graph and self.extend_graph_runner is not None:
            key = self.extend_graph_runner.key_for(batch)
            if key is not None:
                self._count("extend graph")
                return self.extend_graph_runner.replay(batch, key)
        self._count("eager")
        input_ids = self.future_ids.resolve(to_device(batch.input_ids_cpu, self.device))  # [T]
        positions = to_device(batch.positions_cpu, self.device)  # [T]
        self.backend.plan(batch)
        hidden = self.model(input_ids, positions, self.backend)  # [T, H]
        rows = to_device(torch.tensor(batch.sample_rows, dtype=torch.int64), self.device)  # [S]
        return self.model.compute_logits(hidden[rows])  # [S, V]
