"""FlashInfer paged attention (page size 1) over the engine's KV pool, and CUDA-graph decode.

Extend batches (prefill chunks, radix-reused prefixes, jump-forward chains mixed with decodes)
run ``BatchPrefillWithPagedKVCacheWrapper`` with ragged queries and a causal mask; batches of
pure decodes run ``BatchDecodeWithPagedKVCacheWrapper``.  Both are planned once per forward
(one wrapper per distinct sliding window).  The req-to-token table stays on the host; a plan
gathers the batch's KV slots into int32 page indices and sends them with one pinned,
non-blocking copy.  Layout after SGLang's ``FlashInferAttnBackend`` (Zheng et al. 2024) and the
FlashInfer paper (Ye et al. 2025); our own code over the ``flashinfer`` Python API.  The CUDA
graphs that replay its decode and small extend forwards are in :mod:`.cuda_graphs`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from structgen import kernels
from structgen.runtime.attention import AttentionBackend, ForwardBatch
from structgen.runtime.memory import KVPool, ReqToTokenPool
from structgen.runtime.staging import PinnedStaging, pinned_staging, to_device

WORKSPACE_BYTES = 256 << 20
FLASHINFER_DTYPES = (torch.bfloat16, torch.float16)
DECODE_KERNELS = ("auto", "flashinfer", "triton")
# "auto" captures the Triton decode kernel for buckets of at most this many requests
# (benchmarks/decode_micro.py --sections decode_attn), FlashInfer's above.
TRITON_DECODE_MAX_BS = 4


PREFILL_KERNELS = ("auto", "fa2", "fa3")


def check_prefill_kernel(name: str) -> None:
    """Raises ``ValueError`` unless ``name`` is one of :data:`PREFILL_KERNELS`."""
    if name not in PREFILL_KERNELS:
        raise ValueError(f"prefill kernel {name!r} is not available; available: {', '.join(PREFILL_KERNELS)}")


def check_decode_kernel(name: str) -> None:
    """Raises ``ValueError`` unless ``name`` is one of :data:`DECODE_KERNELS`."""
    if name not in DECODE_KERNELS:
        raise ValueError(f"decode kernel {name!r} is not available; available: {', '.join(DECODE_KERNELS)}")


class TritonDecodeLayout(NamedTuple):
    """Device KV layout the Triton decode kernel reads at run time: ``kv_indptr`` int32
    ``[bs + 1]``, ``kv_indices`` int32 ``[≥ total]``, and the splits per (request, KV head)."""

    kv_indptr: torch.Tensor
    kv_indices: torch.Tensor
    num_splits: int


def flashinfer_available() -> bool:
    """Whether ``flashinfer`` imports and a CUDA device is present."""
    if not torch.cuda.is_available():
        return False
    try:
        import flashinfer  # noqa: F401
    except Exception:
        return False
    return True


def _indptr(lens: list[int], staging: PinnedStaging) -> torch.Tensor:
    """Pinned host int32 ``[len(lens) + 1]`` prefix sums of ``lens`` (staged; commit after
    the plan that copies it)."""
    out = staging.alloc((len(lens) + 1,), torch.int32)
    out[0] = 0
    torch.cumsum(torch.tensor(lens, dtype=torch.int32), 0, out=out[1:])
    return out


def fast_decode_replanner(
    wrapper: Any, num_heads: int, num_kv_heads: int, head_dim: int, window: int
) -> Callable[[torch.Tensor], None] | None:
    """A re-planner for a CUDA-graph ``BatchDecodeWithPagedKVCacheWrapper`` already planned
    once for its fixed batch size: ``replan(indptr_host)`` takes the new host int32 KV indptr
    ``[bs + 1]`` (page size 1); the wrapper's indptr / indices device buffers must already hold
    the new layout.

    Only the scheduler step runs: the wrapper's compiled module computes the split-KV work
    partition on the host and copies it into the int workspace that the captured kernels read.
    The wrapper's Python ``plan`` adds ~0.2 ms per call of checks, dtype resolution and buffer
    copies that a graph replay with unchanged shapes does not need (SGLang's
    ``fast_decode_plan`` skips them for the same reason).  The eligibility checks run here,
    once.  Returns None when the wrapper is not on FlashInfer's CUDA-core decode path or lacks
    the internals this relies on (another FlashInfer version): the caller then plans it the
    documented way."""
    module = getattr(wrapper, "_cached_module", None)
    if (
        module is None
        or getattr(wrapper, "_plan_info", None) is None
        or getattr(wrapper, "use_tensor_cores", True)
        or getattr(wrapper, "_uses_cudnn", False)
        or getattr(wrapper, "_backend", None) not in ("auto", "fa2")
        or not getattr(wrapper, "is_cuda_graph_enabled", False)
        or not hasattr(wrapper, "_pin_memory_int_workspace_buffer")
    ):
        return None
    dtype = getattr(wrapper, "_cached_q_data_type", None)
    kv_dtype = getattr(wrapper, "_cached_kv_data_type", None)
    if dtype is None or kv_dtype is None:
        return None
    head = (wrapper._float_workspace_buffer, wrapper._int_workspace_buffer, wrapper._pin_memory_int_workspace_buffer)
    tail = (num_heads, num_kv_heads, 1, True, window - 1 if window > 0 else -1, 0.0, head_dim, head_dim,
            torch.empty(0, dtype=dtype), torch.empty(0, dtype=kv_dtype))  # fmt: skip
    plan = module.plan

    def replan(indptr_host: torch.Tensor) -> None:
        wrapper._plan_info = plan(*head, indptr_host, indptr_host.numel() - 1, *tail)

    return replan


class FlashInferAttentionBackend(AttentionBackend):
    """``AttentionBackend`` on FlashInfer.  ``windows``: the distinct per-layer sliding windows
    (0 = full attention); ``layer_windows[i]`` is layer ``i``'s; ``sm_scale`` the softmax scale
    of every layer (planned once); ``prefill_kernel`` (:data:`PREFILL_KERNELS`): FlashInfer's
    backend for the paged prefill wrappers, "auto" (its choice: FA3 on Hopper) or "fa2" / "fa3"
    (``ValueError`` for another name).  KV and queries must be
    bfloat16 or float16 (``ValueError`` otherwise); head_dim as FlashInfer supports (64, 128,
    256)."""

    def __init__(
        self,
        kv_pool: KVPool,
        req_to_token: ReqToTokenPool,
        *,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        sm_scale: float,
        layer_windows: list[int],
        prefill_kernel: str = "auto",
    ) -> None:
        super().__init__(kv_pool, req_to_token)
        import flashinfer

        check_prefill_kernel(prefill_kernel)
        self.prefill_kernel = prefill_kernel

        if kv_pool.dtype not in FLASHINFER_DTYPES:
            raise ValueError(f"the flashinfer attention backend needs a bfloat16 / float16 KV pool, got {kv_pool.dtype}")
        self.fi = flashinfer
        self.num_heads, self.num_kv_heads, self.head_dim, self.sm_scale = num_heads, num_kv_heads, head_dim, sm_scale
        self.layer_windows = layer_windows
        self.windows = sorted(set(layer_windows))
        self.device = kv_pool.device
        self.workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=self.device)
        self.prefill = {w: self.prefill_wrapper() for w in self.windows}
        self.decode = {w: flashinfer.BatchDecodeWithPagedKVCacheWrapper(self.workspace, "NHD") for w in self.windows}
        cap = kv_pool.capacity + 1
        shape = (cap, 1, num_kv_heads, head_dim)  # pages of one token
        self.kv_caches = [(k.view(shape), v.view(shape)) for k, v in zip(kv_pool.k_buffers, kv_pool.v_buffers)]
        self._active: dict[int, Any] = {}
        self._triton_decode: TritonDecodeLayout | None = None
        self._out_loc = torch.zeros(0, dtype=torch.int64, device=self.device)

    def prefill_wrapper(self, **cuda_graph_buffers: Any) -> Any:
        """A ``BatchPrefillWithPagedKVCacheWrapper`` on the shared workspace running this
        backend's prefill kernel (``cuda_graph_buffers``: ``use_cuda_graph=True`` and the
        wrapper's fixed buffers, for a captured graph)."""
        return self.fi.BatchPrefillWithPagedKVCacheWrapper(self.workspace, "NHD", backend=self.prefill_kernel, **cuda_graph_buffers)

    # ------------------------------------------------------------------ planning

    def page_indices(self, rows: list[int], kv_lens: list[int]) -> torch.Tensor:
        """Host int64 ``[sum kv_lens]``: the KV slots of each request row in order."""
        table = self.req_to_token.req_to_token_cpu
        return torch.cat([table[row, :n] for row, n in zip(rows, kv_lens)])

    def plan_decode(self, wrappers: dict[int, Any], kv_lens: list[int], kv_indices: torch.Tensor) -> None:
        """Plan decode ``wrappers`` (window → wrapper) for requests of ``kv_lens`` tokens whose
        slots are ``kv_indices`` (host int64, sent with one pinned non-blocking copy)."""
        self._plan(wrappers, None, kv_lens, kv_indices)

    def plan_extend(self, wrappers: dict[int, Any], qo_lens: list[int], kv_lens: list[int], kv_indices: torch.Tensor) -> None:
        """Plan prefill ``wrappers`` (window → wrapper; causal) for requests extending
        ``qo_lens`` tokens to ``kv_lens``, whose slots are ``kv_indices`` (host int64)."""
        self._plan(wrappers, qo_lens, kv_lens, kv_indices)

    def _plan(self, wrappers: dict[int, Any], extend_lens: list[int] | None, kv_lens: list[int], kv_indices: torch.Tensor) -> None:
        staging = pinned_staging(self.device)
        indices_cpu = staging.alloc(tuple(kv_indices.shape), torch.int32).copy_(kv_indices)
        indices_gpu = indices_cpu.to(self.device, non_blocking=True)  # [N]
        kv_indptr = _indptr(kv_lens, staging)  # FlashInfer reads these on the host and copies them
        qo_indptr = _indptr(extend_lens, staging) if extend_lens is not None else None
        last_page_len = staging.alloc((len(kv_lens),), torch.int32).fill_(1)  # page size 1
        heads = (self.num_heads, self.num_kv_heads, self.head_dim, 1)
        dtype = self.kv_pool.dtype
        for w, wrapper in wrappers.items():
            opts = {"window_left": w - 1 if w > 0 else -1, "q_data_type": dtype, "kv_data_type": dtype, "sm_scale": self.sm_scale}
            if extend_lens is None:
                wrapper.plan(kv_indptr, indices_gpu, last_page_len, *heads, **opts)
            else:
                wrapper.plan(qo_indptr, kv_indptr, indices_gpu, last_page_len, *heads, causal=True, **opts)
        staging.commit()  # one event after the indices' and the plans' copies of the staged tensors
        self._active = dict(wrappers)
        self._triton_decode = None

    def plan(self, batch: ForwardBatch) -> None:
        self._out_loc = to_device(batch.out_cache_loc_cpu, self.device)  # [T]
        kv_lens = [p + n for p, n in zip(batch.prefix_lens, batch.extend_lens)]
        indices = self.page_indices(batch.req_pool_indices, kv_lens)
        if all(n == 1 for n in batch.extend_lens):
            self._plan(self.decode, None, kv_lens, indices)
        else:
            self._plan(self.prefill, batch.extend_lens, kv_lens, indices)

    def bind(self, wrappers: dict[int, Any], out_loc: torch.Tensor) -> None:
        """Use already-planned ``wrappers`` (window → wrapper) and the device ``out_loc`` for the
        next forward (CUDA-graph capture binds its static buffers this way)."""
        self._active = dict(wrappers)
        self._triton_decode = None
        self._out_loc = out_loc

    def bind_triton_decode(self, layout: TritonDecodeLayout, out_loc: torch.Tensor) -> None:
        """Run the next decode forward's attention on the Triton split-KV kernel over the
        device ``layout`` (its buffers are read when the kernels run, so a CUDA graph captured
        after this call follows later writes to them) and the device ``out_loc``."""
        self._active = {}
        self._triton_decode = layout
        self._out_loc = out_loc

    # ------------------------------------------------------------------ per layer

    def attend(self, layer_id: int, q: torch.Tensor, *, scale: float, window: int = 0) -> torch.Tensor:
        assert scale == self.sm_scale, (scale, self.sm_scale)
        layout = self._triton_decode
        if layout is not None:
            pool = self.kv_pool
            return kernels.decode_attention(
                q,
                pool.k_buffers[layer_id],
                pool.v_buffers[layer_id],
                layout.kv_indptr,
                layout.kv_indices,
                scale=scale,
                window=window,
                num_splits=layout.num_splits,
                backend="triton",
            )
        return self._active[window].run(q.contiguous(), self.kv_caches[layer_id])  # type: ignore[no-any-return]
