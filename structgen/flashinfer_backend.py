"""FlashInfer paged attention (page size 1) over the engine's KV pool, and CUDA-graph decode.

Extend batches (prefill chunks, radix-reused prefixes, jump-forward chains mixed with decodes)
run ``BatchPrefillWithPagedKVCacheWrapper`` with ragged queries and a causal mask; batches of
pure decodes run ``BatchDecodeWithPagedKVCacheWrapper``.  Both are planned once per forward
(one wrapper per distinct sliding window).  The req-to-token table stays on the host; a plan
gathers the batch's KV slots into int32 page indices and sends them with one pinned,
non-blocking copy.  Layout after SGLang's ``FlashInferAttnBackend`` (Zheng et al. 2024) and the
FlashInfer paper (Ye et al. 2025); our own code over the ``flashinfer`` Python API.

:class:`DecodeGraphRunner` captures decode forwards for bucketed batch sizes with static input
buffers and FlashInfer's decode wrapper in CUDA-graph mode; a replay copies inputs, re-plans
(host work plus asynchronous copies into the wrapper's fixed buffers) and launches the graph:
no host synchronization.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .attention import AttentionBackend, ForwardBatch
from .memory import KVPool, ReqToTokenPool, to_device

WORKSPACE_BYTES = 256 << 20
FLASHINFER_DTYPES = (torch.bfloat16, torch.float16)


def flashinfer_available() -> bool:
    """Whether ``flashinfer`` imports and a CUDA device is present."""
    if not torch.cuda.is_available():
        return False
    try:
        import flashinfer  # noqa: F401
    except Exception:
        return False
    return True


def _pinned_int32(values: torch.Tensor) -> torch.Tensor:
    return values.to(torch.int32).pin_memory()


def _indptr(lens: list[int]) -> torch.Tensor:
    """Pinned host int32 ``[len(lens) + 1]`` prefix sums of ``lens``."""
    out = torch.zeros(len(lens) + 1, dtype=torch.int64)
    out[1:] = torch.tensor(lens, dtype=torch.int64).cumsum(0)
    return _pinned_int32(out)


class FlashInferAttentionBackend(AttentionBackend):
    """``AttentionBackend`` on FlashInfer.  ``windows``: the distinct per-layer sliding windows
    (0 = full attention); ``layer_windows[i]`` is layer ``i``'s; ``sm_scale`` the softmax scale
    of every layer (planned once).  KV and queries must be
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
    ) -> None:
        super().__init__(kv_pool, req_to_token)
        import flashinfer

        if kv_pool.dtype not in FLASHINFER_DTYPES:
            raise ValueError(f"the flashinfer attention backend needs a bfloat16 / float16 KV pool, got {kv_pool.dtype}")
        self.fi = flashinfer
        self.num_heads, self.num_kv_heads, self.head_dim, self.sm_scale = num_heads, num_kv_heads, head_dim, sm_scale
        self.layer_windows = layer_windows
        self.windows = sorted(set(layer_windows))
        self.device = kv_pool.device
        self.workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=self.device)
        self.prefill = {w: flashinfer.BatchPrefillWithPagedKVCacheWrapper(self.workspace, "NHD") for w in self.windows}
        self.decode = {w: flashinfer.BatchDecodeWithPagedKVCacheWrapper(self.workspace, "NHD") for w in self.windows}
        cap = kv_pool.capacity + 1
        shape = (cap, 1, num_kv_heads, head_dim)  # pages of one token
        self.kv_caches = [(k.view(shape), v.view(shape)) for k, v in zip(kv_pool.k_buffers, kv_pool.v_buffers)]
        self._active: dict[int, Any] = {}
        self._out_loc = torch.zeros(0, dtype=torch.int64, device=self.device)

    # ------------------------------------------------------------------ planning

    def page_indices(self, rows: list[int], kv_lens: list[int]) -> torch.Tensor:
        """Host int64 ``[sum kv_lens]``: the KV slots of each request row in order."""
        table = self.req_to_token.req_to_token_cpu
        return torch.cat([table[row, :n] for row, n in zip(rows, kv_lens)])

    def plan_decode(self, wrappers: dict[int, Any], kv_lens: list[int], kv_indices: torch.Tensor) -> None:
        """Plan decode ``wrappers`` (window → wrapper) for requests of ``kv_lens`` tokens whose
        slots are ``kv_indices`` (host int64, sent with one pinned non-blocking copy)."""
        self._plan(wrappers, None, kv_lens, kv_indices)

    def _plan(self, wrappers: dict[int, Any], extend_lens: list[int] | None, kv_lens: list[int], kv_indices: torch.Tensor) -> None:
        kv_indptr = _indptr(kv_lens)
        indices_gpu = to_device(kv_indices.to(torch.int32), self.device)  # [N]
        last_page_len = _pinned_int32(torch.ones(len(kv_lens), dtype=torch.int64))  # page size 1
        heads = (self.num_heads, self.num_kv_heads, self.head_dim, 1)
        dtype = self.kv_pool.dtype
        for w, wrapper in wrappers.items():
            opts = {"window_left": w - 1 if w > 0 else -1, "q_data_type": dtype, "kv_data_type": dtype, "sm_scale": self.sm_scale}
            if extend_lens is None:
                wrapper.plan(kv_indptr, indices_gpu, last_page_len, *heads, **opts)
            else:
                wrapper.plan(_indptr(extend_lens), kv_indptr, indices_gpu, last_page_len, *heads, causal=True, **opts)
        self._active = dict(wrappers)

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
        self._out_loc = out_loc

    # ------------------------------------------------------------------ per layer

    def forward(self, layer_id: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float, window: int = 0) -> torch.Tensor:
        self.kv_pool.store(layer_id, self._out_loc, k, v)
        assert scale == self.sm_scale, (scale, self.sm_scale)
        return self._active[window].run(q.contiguous(), self.kv_caches[layer_id])  # type: ignore[no-any-return]


def graph_buckets(max_bs: int) -> list[int]:
    """Captured batch sizes: powers of two below ``max_bs`` (≥ 1), then ``max_bs`` itself."""
    out = [1 << i for i in range(max_bs.bit_length()) if 1 << i < max_bs]
    return [*out, max_bs]


class DecodeGraphRunner:
    """CUDA graphs of decode forwards (one new token per request) for bucketed batch sizes.

    ``forward_fn(input_ids [bs], positions [bs]) -> logits [bs, V]`` is the model forward the
    graphs capture; the backend is bound to each bucket's CUDA-graph decode wrappers.  Padded
    rows decode token 0 at position 0 into KV slot 0 (the padding slot) and are dropped.
    """

    def __init__(
        self,
        backend: FlashInferAttentionBackend,
        forward_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        *,
        max_bs: int,
        max_context: int,
    ) -> None:
        fi = backend.fi
        self.backend = backend
        self.device = backend.device
        self.buckets = graph_buckets(max_bs)
        top = self.buckets[-1]
        dev = self.device
        self.inputs = torch.zeros((3, top), dtype=torch.int64, device=dev)  # [3, bs_max]: input ids, positions, out_cache_loc
        self.input_ids, self.positions, self.out_loc = self.inputs[0], self.inputs[1], self.inputs[2]
        self.kv_indptr_buf = torch.zeros(top + 1, dtype=torch.int32, device=dev)
        self.kv_indices_buf = torch.zeros(top * max_context, dtype=torch.int32, device=dev)
        self.last_page_buf = torch.ones(top, dtype=torch.int32, device=dev)
        self.wrappers: dict[int, dict[int, Any]] = {}
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, torch.Tensor] = {}
        self.mempool = torch.cuda.graph_pool_handle()
        stream = torch.cuda.Stream(device=dev)
        for bs in reversed(self.buckets):  # largest first: smaller graphs reuse its pool
            self.wrappers[bs] = {
                w: fi.BatchDecodeWithPagedKVCacheWrapper(
                    backend.workspace,
                    "NHD",
                    use_cuda_graph=True,
                    paged_kv_indptr_buffer=self.kv_indptr_buf[: bs + 1],
                    paged_kv_indices_buffer=self.kv_indices_buf,
                    paged_kv_last_page_len_buffer=self.last_page_buf[:bs],
                )
                for w in backend.windows
            }
            backend.plan_decode(self.wrappers[bs], [1] * bs, torch.zeros(bs, dtype=torch.int64))
            backend.bind(self.wrappers[bs], self.out_loc[:bs])
            stream.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(stream):
                for _ in range(2):  # warm-up outside capture (autotuning, lazy init)
                    forward_fn(self.input_ids[:bs], self.positions[:bs])
            torch.cuda.current_stream(dev).wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.mempool, stream=stream):
                self.outputs[bs] = forward_fn(self.input_ids[:bs], self.positions[:bs])
            self.graphs[bs] = graph
        torch.cuda.synchronize(dev)

    def can_run(self, batch: ForwardBatch) -> bool:
        """True for a batch of decodes only (every extend length 1, every row sampled) that fits
        the largest bucket."""
        n = len(batch.extend_lens)
        return 0 < n <= self.buckets[-1] and all(e == 1 for e in batch.extend_lens) and len(batch.sample_rows) == n

    def replay(self, batch: ForwardBatch) -> torch.Tensor:
        """Run ``batch`` (``can_run`` must hold) through its bucket's graph; returns float32
        logits ``[B, V]`` (a view of the graph's static output, valid until the next replay)."""
        n = len(batch.extend_lens)
        bs = next(b for b in self.buckets if b >= n)
        host = torch.zeros((3, bs), dtype=torch.int64)  # padded rows: token 0 at position 0 into slot 0
        host[0, :n] = batch.input_ids_cpu
        host[1, :n] = batch.positions_cpu
        host[2, :n] = batch.out_cache_loc_cpu
        self.inputs[:, :bs].copy_(to_device(host, self.device), non_blocking=True)
        kv_lens = [p + 1 for p in batch.prefix_lens] + [1] * (bs - n)
        indices = torch.cat([self.backend.page_indices(batch.req_pool_indices, kv_lens[:n]), torch.zeros(bs - n, dtype=torch.int64)])
        self.backend.plan_decode(self.wrappers[bs], kv_lens, indices)
        self.graphs[bs].replay()
        return self.outputs[bs][:n]
