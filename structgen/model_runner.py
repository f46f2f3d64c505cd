"""Model runner: the model, its KV pools and attention backend; one forward per step."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

from .attention import AttentionBackend, ForwardBatch, TorchAttentionBackend
from .flashinfer_backend import check_decode_kernel
from .memory import KVAllocator, KVPool, MemoryConfig, ReqToTokenPool, capacity_from_memory, kv_bytes_per_token, to_device
from .models import LlamaForCausalLM, load_model
from .sampling import FutureIds

ATTENTION_BACKENDS = ("auto", "torch", "flashinfer")


def check_attention_backend(name: str) -> None:
    """Raises ``ValueError`` unless ``name`` is one of :data:`ATTENTION_BACKENDS`."""
    if name not in ATTENTION_BACKENDS:
        raise ValueError(f"attention backend {name!r} is not available; available: {', '.join(ATTENTION_BACKENDS)}")


def resolve_attention_backend(name: str, device: torch.device, dtype: torch.dtype) -> str:
    """``"torch"`` or ``"flashinfer"``.  ``"auto"`` takes FlashInfer on CUDA when it imports
    and the model runs in bfloat16 / float16, the torch backend otherwise.  Raises
    ``ValueError`` for an unknown name or an explicit ``"flashinfer"`` it cannot honour."""
    from .flashinfer_backend import FLASHINFER_DTYPES, flashinfer_available

    check_attention_backend(name)
    usable = device.type == "cuda" and dtype in FLASHINFER_DTYPES and flashinfer_available()
    if name == "auto":
        return "flashinfer" if usable else "torch"
    if name == "flashinfer" and not usable:
        raise ValueError(
            f"attention backend 'flashinfer' needs CUDA, flashinfer installed and a bfloat16/float16 model (device {device}, dtype {dtype})"
        )
    return name


class ModelRunner:
    """Loads a local checkpoint and sizes the pools.

    ``max_context`` is ``min(memory.max_context, max_position_embeddings)``; the KV capacity is
    ``memory.max_total_tokens`` or derived from free memory.  ``random_weights_seed`` draws the
    weights on the device instead of reading them (the folder then needs only config.json).
    With the FlashInfer backend and ``cuda_graph``, decode batches of up to
    ``min(cuda_graph_max_bs, max_running_requests)`` requests replay captured CUDA graphs, and
    so do extend batches of as many requests and at most ``cuda_graph_max_extend_tokens``
    tokens (padded to captured sizes; 0 turns extend graphs off).  ``decode_kernel`` picks the
    decode graphs' attention (:data:`~structgen.flashinfer_backend.DECODE_KERNELS`).
    :meth:`forward` returns float32 logits ``[S, vocab_size]`` for the batch's sample rows.
    Input ids may be placeholders of :attr:`future_ids` (ids sampled on the device, not yet
    seen by the host: the overlap scheduler's next step).
    """

    def __init__(
        self,
        model_path: str,
        memory: MemoryConfig,
        *,
        device: torch.device,
        dtype: str = "auto",
        attention_backend: str = "auto",
        cuda_graph: bool = True,
        cuda_graph_max_bs: int = 256,
        cuda_graph_max_extend_tokens: int = 1024,
        random_weights_seed: int | None = None,
        decode_kernel: str = "auto",
    ) -> None:
        check_attention_backend(attention_backend)  # before the weights load
        check_decode_kernel(decode_kernel)
        if cuda_graph_max_extend_tokens < 0:
            raise ValueError(f"cuda_graph_max_extend_tokens must be ≥ 0, got {cuda_graph_max_extend_tokens}")
        self.device = device
        self.model: LlamaForCausalLM
        self.hf_config: Any
        self.model, self.hf_config = load_model(model_path, dtype=dtype, device=device, random_weights_seed=random_weights_seed)
        args = self.model.args
        self.dtype = self.model.lm_head.weight.dtype
        self.vocab_size = args.vocab_size
        self.max_context = min(memory.max_context, args.max_position_embeddings)
        per_token = kv_bytes_per_token(args.num_layers, args.num_kv_heads, args.head_dim, self.dtype)
        capacity = memory.max_total_tokens or capacity_from_memory(memory, per_token, device)
        self.req_to_token = ReqToTokenPool(memory.max_running_requests, self.max_context)
        self.allocator = KVAllocator(capacity)
        self.kv_pool = KVPool(capacity, args.num_layers, args.num_kv_heads, args.head_dim, self.dtype, device)
        self.future_ids = FutureIds(memory.max_running_requests, device)  # read by every forward (and graph) for placeholder ids
        self.attention_backend = resolve_attention_backend(attention_backend, device, self.dtype)
        self.backend: AttentionBackend
        self.graph_runner = None
        self.extend_graph_runner = None
        self.use_cuda_graph = cuda_graph  # an engine reusing this runner may turn replays off
        self.forward_counts: Counter[str] = Counter()  # "decode graph" / "extend graph" / "eager" forwards run
        if self.attention_backend == "flashinfer":
            from .flashinfer_backend import DecodeGraphRunner, ExtendGraphRunner, FlashInferAttentionBackend

            fi_backend = FlashInferAttentionBackend(
                self.kv_pool,
                self.req_to_token,
                num_heads=args.num_heads,
                num_kv_heads=args.num_kv_heads,
                head_dim=args.head_dim,
                sm_scale=args.head_dim**-0.5,
                layer_windows=list(args.layer_windows),
            )
            self.backend = fi_backend
            if cuda_graph:
                max_bs = max(1, min(cuda_graph_max_bs, memory.max_running_requests))
                pool = torch.cuda.graph_pool_handle()
                self.graph_runner = DecodeGraphRunner(
                    fi_backend, self._decode_logits, max_bs=max_bs, max_context=self.max_context, mempool=pool, decode_kernel=decode_kernel
                )
                if cuda_graph_max_extend_tokens > 0:
                    self.extend_graph_runner = ExtendGraphRunner(
                        fi_backend,
                        self._extend_logits,
                        max_bs=max_bs,
                        max_tokens=cuda_graph_max_extend_tokens,
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

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch) -> torch.Tensor:
        """Run ``batch``; returns float32 logits ``[len(batch.sample_rows), vocab_size]`` (a
        decode-graph replay for a decode-only batch, an extend-graph replay for a small extend
        batch, when graphs were captured; eager otherwise).  Counts each kind in
        ``forward_counts``."""
        if self.use_cuda_graph and self.graph_runner is not None and self.graph_runner.can_run(batch):
            self.forward_counts["decode graph"] += 1
            return self.graph_runner.replay(batch)
        if self.use_cuda_graph and self.extend_graph_runner is not None:
            key = self.extend_graph_runner.key_for(batch)
            if key is not None:
                self.forward_counts["extend graph"] += 1
                return self.extend_graph_runner.replay(batch, key)
        self.forward_counts["eager"] += 1
        input_ids = self.future_ids.resolve(to_device(batch.input_ids_cpu, self.device))  # [T]
        positions = to_device(batch.positions_cpu, self.device)  # [T]
        self.backend.plan(batch)
        hidden = self.model(input_ids, positions, self.backend)  # [T, H]
        rows = to_device(torch.tensor(batch.sample_rows, dtype=torch.int64), self.device)  # [S]
        return self.model.compute_logits(hidden[rows])  # [S, V]
