"""CUDA graphs of the model forward over the FlashInfer backend.

:class:`DecodeGraphRunner` captures decode forwards for bucketed batch sizes with static input
buffers and FlashInfer's decode wrapper in CUDA-graph mode; a replay stages the inputs and the
KV layout (indptr | indices) in one pinned host region, sends them with one asynchronous copy,
re-plans the split-KV partition (:func:`~.flashinfer_backend.fast_decode_replanner`) and
launches the graph: no host synchronization.  Buckets of few requests may instead capture our
Triton split-KV decode kernel (:func:`structgen.kernels.decode_attention`), which reads the same
indptr / indices buffers on the device, so their replays need no re-plan (``decode_kernel``,
:data:`~.flashinfer_backend.DECODE_KERNELS`).  :class:`ExtendGraphRunner` captures small extend
batches (jump-forward chains, short prefills joining decodes) padded to captured
``(requests, tokens)`` sizes.  After SGLang's ``CudaGraphRunner``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import accumulate
from typing import Any, NamedTuple

import numpy as np
import torch

from structgen import kernels
from structgen.runtime.attention import ForwardBatch
from structgen.runtime.flashinfer_backend import (
    TRITON_DECODE_MAX_BS,
    FlashInferAttentionBackend,
    TritonDecodeLayout,
    check_decode_kernel,
    fast_decode_replanner,
)
from structgen.runtime.staging import pinned_staging, to_device

EXTEND_TOKEN_MULTIPLES = (1.25, 1.5, 1.75, 2, 3, 4, 6, 8, 12, 16)


def extend_token_buckets(bs: int, max_tokens: int) -> list[int]:
    """Token counts captured for extend batches of ``bs`` requests: ``ceil(m · bs)`` for the
    multiples m of :data:`EXTEND_TOKEN_MULTIPLES`, at least ``bs + 1`` (an extend batch has one
    token more than it has requests, padding requests included), deduplicated and kept where
    ≤ ``max_tokens``.  A full batch of decodes carrying a few jump-forward chains needs little
    more than ``bs`` tokens: the quarter steps below ``2 · bs`` pad it by at most a quarter
    instead of doubling it (on an 8B model a step of 512 tokens costs about what its 512 rows
    cost, padding or not: benchmarks/extend_cost.py, B=256 ``1x`` against k=2); above, the
    half-steps (3, 6, 12) keep padding under a third."""
    out: list[int] = []
    for m in EXTEND_TOKEN_MULTIPLES:
        t = max(bs + 1, math.ceil(m * bs))
        if t <= max_tokens and (not out or t > out[-1]):
            out.append(t)
    return out


def extend_graph_key(num_reqs: int, num_tokens: int, keys: dict[int, list[int]]) -> tuple[int, int] | None:
    """The captured ``(bs, tokens)`` an extend batch of ``num_reqs`` requests and
    ``num_tokens`` tokens pads to: the smallest batch bucket ≥ ``num_reqs`` having a token
    bucket with room for the real tokens plus one token per padding request, and its smallest
    such token bucket (padding costs little GPU time next to an eager forward's host
    launches).  None when no captured graph fits (the batch runs eagerly).  ``keys``: batch
    bucket → token buckets."""
    for bs in sorted(keys):
        if bs < num_reqs:
            continue
        need = num_tokens + bs - num_reqs
        for t in keys[bs]:
            if t >= need:
                return bs, t
    return None


class PaddedExtend(NamedTuple):
    """An extend batch laid out for a captured graph of ``bs`` requests and ``tokens`` tokens.

    Padding requests (after the real ones) extend one token each at position 0 into KV slot 0
    (the padding slot); the tokens still missing go to the last request, real or padding, as
    extra queries after its real ones whose KV also lands in slot 0.  Causal attention keeps
    every real query blind to them (they come later in the same request), and their logits are
    never read.  ``qo_lens``/``kv_lens`` ``[bs]``; ``pad_tail``: the extra tokens of the last
    request (their KV page indices are slot 0)."""

    qo_lens: list[int]
    kv_lens: list[int]
    pad_tail: int


def pad_extend(extend_lens: list[int], prefix_lens: list[int], bs: int, tokens: int) -> PaddedExtend:
    """Lay out an extend batch (``extend_lens``, ``prefix_lens`` of its real requests) for the
    graph ``(bs, tokens)``; raises ``ValueError`` when it does not fit."""
    n = len(extend_lens)
    real = sum(extend_lens)
    if n > bs or real + bs - n > tokens:
        raise ValueError(f"{n} requests / {real} tokens do not fit the ({bs}, {tokens}) graph")
    qo = [*extend_lens, *([1] * (bs - n))]
    kv = [p + e for p, e in zip(prefix_lens, extend_lens)] + [1] * (bs - n)
    tail = tokens - sum(qo)
    qo[-1] += tail
    kv[-1] += tail
    return PaddedExtend(qo, kv, tail)


def capture_graph(
    forward_fn: Callable[..., torch.Tensor], args: tuple[torch.Tensor, ...], mempool: Any, stream: torch.cuda.Stream
) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    """Warm ``forward_fn(*args)`` up twice on ``stream`` (autotuning, lazy init), then capture
    it into a CUDA graph drawing on ``mempool``; returns the graph and its static output."""
    dev = stream.device
    stream.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(stream):
        for _ in range(2):
            forward_fn(*args)
    torch.cuda.current_stream(dev).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=mempool, stream=stream):
        out = forward_fn(*args)
    return graph, out


def graph_buckets(max_bs: int, max_rows: int = 0) -> list[int]:
    """Captured batch sizes: powers of two below ``max_bs`` (≥ 1), then ``max_bs`` itself, then
    quarter steps of ``max_bs`` up to ``max_rows`` (rows beyond the running requests: extend
    batches run as decodes, one row per token, :func:`~.attention.flatten_extend`)."""
    out = [1 << i for i in range(max_bs.bit_length()) if 1 << i < max_bs]
    out.append(max_bs)
    for q in range(5, 9):  # 1.25, 1.5, 1.75, 2 × max_bs
        rows = -(-q * max_bs // 4)
        if out[-1] < rows <= max_rows:
            out.append(rows)
    return out


class DecodeGraphRunner:
    """CUDA graphs of decode forwards (one new token per request) for bucketed batch sizes.

    ``forward_fn(input_ids [bs], positions [bs]) -> logits [bs, V]`` is the model forward the
    graphs capture; the backend is bound to each bucket's CUDA-graph decode wrappers.  Padded
    rows decode token 0 at position 0 into KV slot 0 (the padding slot) and are dropped.
    ``mempool``: the CUDA-graph memory pool handle shared with the extend graphs.
    ``decode_kernel`` (:data:`DECODE_KERNELS`): the attention each bucket captures, FlashInfer's
    decode wrapper or the Triton split-KV kernel; ``"auto"`` takes Triton for buckets of at most
    :data:`TRITON_DECODE_MAX_BS` requests.  ``max_rows`` (> ``max_bs``): also capture up to
    that many rows, for extend batches flattened into decodes (:func:`graph_buckets`).
    ``ValueError`` for an unknown kernel.
    """

    def __init__(
        self,
        backend: FlashInferAttentionBackend,
        forward_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        *,
        max_bs: int,
        max_context: int,
        mempool: Any,
        decode_kernel: str = "auto",
        max_rows: int = 0,
    ) -> None:
        check_decode_kernel(decode_kernel)
        fi = backend.fi
        self.backend = backend
        self.device = backend.device
        self.buckets = graph_buckets(max_bs, max_rows)
        top = self.buckets[-1]
        dev = self.device
        # One device region, one host→device copy per replay: bucket bs's int64 [3 * bs] inputs
        # (input ids | positions | out_cache_loc) end where the int32 layout starts, KV indptr
        # (padded to bs_max + 1) | KV indices.  Buckets share it: one graph replays at a time.
        self.io = torch.zeros(24 * top + 4 * (top + 1 + top * max_context), dtype=torch.uint8, device=dev)
        self.inputs = {bs: self.io[24 * (top - bs) : 24 * top].view(torch.int64) for bs in self.buckets}
        self.meta = self.io[24 * top :].view(torch.int32)
        self.kv_indptr_buf, self.kv_indices_buf = self.meta[: top + 1], self.meta[top + 1 :]
        self.last_page_buf = torch.ones(top, dtype=torch.int32, device=dev)  # page size 1: constant
        self.wrappers: dict[int, dict[int, Any]] = {}
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, torch.Tensor] = {}
        self._replans: dict[int, list[Callable[[torch.Tensor], None]]] = {}  # bs -> fast re-planners ([]: plan the documented way)
        self.mempool = mempool
        self.triton_buckets = {
            bs for bs in self.buckets if decode_kernel == "triton" or (decode_kernel == "auto" and bs <= TRITON_DECODE_MAX_BS)
        }
        sms = torch.cuda.get_device_properties(dev).multi_processor_count
        stream = torch.cuda.Stream(device=dev)
        for bs in reversed(self.buckets):  # largest first: smaller graphs reuse its pool
            inp = self.inputs[bs]
            if bs in self.triton_buckets:
                splits = kernels.decode_num_splits(bs, backend.num_kv_heads, sms)
                layout = TritonDecodeLayout(self.kv_indptr_buf[: bs + 1], self.kv_indices_buf, splits)
                self.kv_indptr_buf[: bs + 1].copy_(torch.arange(bs + 1, dtype=torch.int32))  # one key per row while capturing
                backend.bind_triton_decode(layout, inp[2 * bs :])
                self.graphs[bs], self.outputs[bs] = capture_graph(forward_fn, (inp[:bs], inp[bs : 2 * bs]), mempool, stream)
                continue
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
            backend.bind(self.wrappers[bs], inp[2 * bs :])
            self.graphs[bs], self.outputs[bs] = capture_graph(forward_fn, (inp[:bs], inp[bs : 2 * bs]), mempool, stream)
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
        top = self.buckets[-1]
        kv_lens = [p + 1 for p in batch.prefix_lens] + [1] * (bs - n)  # padded rows: token 0 at position 0 into slot 0
        total = sum(kv_lens)
        staging = pinned_staging(self.device)
        staged = staging.alloc((24 * bs + 4 * (top + 1 + total),), torch.uint8)  # one region: int64 inputs | int32 layout
        host_in = staged[: 24 * bs].view(torch.int64)
        host_meta = staged[24 * bs :].view(torch.int32)
        a, m = host_in.numpy(), host_meta.numpy()
        a[:] = 0
        a[:n] = batch.input_ids_cpu.numpy()
        a[bs : bs + n] = batch.positions_cpu.numpy()
        a[2 * bs : 2 * bs + n] = batch.out_cache_loc_cpu.numpy()
        m[: top + 1] = 0
        m[1 : bs + 1] = list(accumulate(kv_lens))
        table = self.backend.req_to_token.req_to_token_cpu.numpy()
        off = top + 1
        for row, length in zip(batch.req_pool_indices, kv_lens):
            m[off : off + length] = table[row, :length]
            off += length
        m[off:] = 0  # padding rows read slot 0
        self.io[24 * (top - bs) : 24 * top + 4 * (top + 1 + total)].copy_(staged, non_blocking=True)
        if bs not in self.triton_buckets:  # the Triton kernel reads indptr / indices on the device: nothing to plan
            self._replan(bs, host_meta[: bs + 1], kv_lens, m[top + 1 :])
        staging.commit()  # after the copies and the plans that read the staged regions
        self.graphs[bs].replay()
        return self.outputs[bs][:n]

    def _replan(self, bs: int, indptr_host: torch.Tensor, kv_lens: list[int], indices_np: np.ndarray) -> None:
        replans = self._replans.get(bs)
        if replans is None:
            b = self.backend
            found = [fast_decode_replanner(w, b.num_heads, b.num_kv_heads, b.head_dim, win) for win, w in self.wrappers[bs].items()]
            replans = self._replans[bs] = [f for f in found if f is not None] if all(f is not None for f in found) else []
        if replans:
            for replan in replans:
                replan(indptr_host)
        else:
            indices = torch.from_numpy(indices_np.astype(np.int64))
            self.backend.plan_decode(self.wrappers[bs], kv_lens, indices)  # the documented plan (rewrites the same buffers)


class ExtendGraphRunner:
    """CUDA graphs of small extend batches: jump-forward chains mixed with decodes, short
    prefills joining running decodes.

    Eager, such a batch costs a full model's worth of host launches for little GPU work; here
    each ``(bs, tokens)`` pair of :func:`graph_buckets` × :func:`extend_token_buckets` is
    captured with static inputs and FlashInfer's paged prefill wrapper in CUDA-graph mode (its
    batch size and query rows fixed per wrapper, so batches are padded with
    :func:`pad_extend`).  A replay copies the padded inputs, re-plans the wrappers (host work
    and asynchronous copies into their fixed buffers) and launches the graph.  SGLang captures
    its speculative-verify batches the same way (fixed query rows per request);
    ``forward_fn(input_ids [T], positions [T], sample_rows [bs]) -> logits [bs, V]``.
    """

    def __init__(
        self,
        backend: FlashInferAttentionBackend,
        forward_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
        *,
        max_bs: int,
        max_tokens: int,
        max_context: int,
        mempool: Any,
    ) -> None:
        self.backend = backend
        self.device = dev = backend.device
        self.keys: dict[int, list[int]] = {}
        for bs in graph_buckets(max_bs):
            toks = extend_token_buckets(bs, max_tokens)
            if toks:
                self.keys[bs] = toks
        top_bs = max(self.keys, default=0)
        top_t = max((t for ts in self.keys.values() for t in ts), default=0)
        self.inputs = torch.zeros((3, top_t), dtype=torch.int64, device=dev)  # [3, T_max]: input ids, positions, out_cache_loc
        self.input_ids, self.positions, self.out_loc = self.inputs[0], self.inputs[1], self.inputs[2]
        self.sample_rows = torch.zeros(top_bs, dtype=torch.int64, device=dev)  # [bs_max]
        self.qo_indptr_buf = torch.zeros(top_bs + 1, dtype=torch.int32, device=dev)
        self.kv_indptr_buf = torch.zeros(top_bs + 1, dtype=torch.int32, device=dev)
        self.kv_indices_buf = torch.zeros(top_bs * max_context + top_t, dtype=torch.int32, device=dev)
        self.last_page_buf = torch.ones(top_bs, dtype=torch.int32, device=dev)
        self.wrappers: dict[tuple[int, int], dict[int, Any]] = {}
        self.graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}
        self.outputs: dict[tuple[int, int], torch.Tensor] = {}
        stream = torch.cuda.Stream(device=dev)
        for bs in sorted(self.keys, reverse=True):  # largest first: smaller graphs reuse the pool
            for t in sorted(self.keys[bs], reverse=True):
                key = (bs, t)
                self.wrappers[key] = {
                    w: backend.prefill_wrapper(
                        use_cuda_graph=True,
                        qo_indptr_buf=self.qo_indptr_buf[: bs + 1],
                        paged_kv_indptr_buf=self.kv_indptr_buf[: bs + 1],
                        paged_kv_indices_buf=self.kv_indices_buf,
                        paged_kv_last_page_len_buf=self.last_page_buf[:bs],
                    )
                    for w in backend.windows
                }
                lay = pad_extend([], [], bs, t)  # all padding: the plan fixes t query rows
                backend.plan_extend(self.wrappers[key], lay.qo_lens, lay.kv_lens, torch.zeros(t, dtype=torch.int64))
                backend.bind(self.wrappers[key], self.out_loc[:t])
                args = (self.input_ids[:t], self.positions[:t], self.sample_rows[:bs])
                self.graphs[key], self.outputs[key] = capture_graph(forward_fn, args, mempool, stream)
        torch.cuda.synchronize(dev)

    def key_for(self, batch: ForwardBatch) -> tuple[int, int] | None:
        """The graph ``batch`` replays on, or None (run it eagerly): it must fit a captured
        size and need at most one sampled row per padded request."""
        key = extend_graph_key(len(batch.extend_lens), batch.num_tokens, self.keys)
        return key if key is not None and len(batch.sample_rows) <= key[0] else None

    def replay(self, batch: ForwardBatch, key: tuple[int, int]) -> torch.Tensor:
        """Run ``batch`` through graph ``key`` (from :meth:`key_for`); returns float32 logits
        ``[S, V]`` for its sample rows (a view of the graph's static output, valid until the
        next replay)."""
        bs, t = key
        real = batch.num_tokens
        lay = pad_extend(batch.extend_lens, batch.prefix_lens, bs, t)
        host = torch.zeros((3, t), dtype=torch.int64)  # padding: token 0 at position 0 into slot 0
        host[0, :real] = batch.input_ids_cpu
        host[1, :real] = batch.positions_cpu
        host[2, :real] = batch.out_cache_loc_cpu
        rows = torch.zeros(bs, dtype=torch.int64)
        rows[: len(batch.sample_rows)] = torch.tensor(batch.sample_rows, dtype=torch.int64)
        self.inputs[:, :t].copy_(to_device(host, self.device), non_blocking=True)
        self.sample_rows[:bs].copy_(to_device(rows, self.device), non_blocking=True)
        table = self.backend.page_indices(batch.req_pool_indices, [p + e for p, e in zip(batch.prefix_lens, batch.extend_lens)])
        pad_slots = sum(lay.kv_lens) - int(table.numel())  # padding requests and the padded tail (last): slot 0
        indices = torch.cat([table, torch.zeros(pad_slots, dtype=torch.int64)])
        self.backend.plan_extend(self.wrappers[key], lay.qo_lens, lay.kv_lens, indices)
        self.graphs[key].replay()
        return self.outputs[key][: len(batch.sample_rows)]
