"""Split-KV paged decode attention in Triton (same contract as
:mod:`structgen.kernels.decode_attention_torch`).

Flash-decoding (Dao et al. 2023, "Flash-Decoding for long-context inference"): program
``(b, kh, s)`` takes request ``b``'s KV-head ``kh`` with its whole query group (GQA: the ``H / KH``
query heads that share the head, padded to 16 rows for ``tl.dot``) over the ``s``-th of
``num_splits`` equal chunks of its keys, with an online softmax, and writes a float32 partial
output and its log-sum-exp; a second kernel merges the splits.  With one split the first kernel
writes the output directly.  The KV layout is read on the device (``kv_indptr`` / ``kv_indices``),
so one launch serves any context length: a CUDA graph captures it once per batch size, and a
replay needs no re-plan.  ``kv_indptr`` and ``kv_indices`` are read before the PDL wait, so the
kernel launched just before must not write them (the engine copies them in before the step).
Both kernels launch with programmatic dependent launch on Hopper
(:mod:`structgen.kernels.pdl`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .decode_attention_torch import check_decode_args
from .pdl import gdc_launch_dependents, gdc_wait, use_pdl

LOG2E = 1.4426950408889634


@triton.jit
def _decode_split_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    indptr_ptr,
    indices_ptr,
    out_ptr,
    mid_o_ptr,
    mid_lse_ptr,
    stride_qb,
    stride_qh,
    stride_kt,
    stride_kh,
    stride_vt,
    stride_vh,
    stride_ob,
    stride_oh,
    num_heads,
    qk_scale_log2,
    window,
    G: tl.constexpr,
    GP: tl.constexpr,
    D: tl.constexpr,
    NS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    USE_PDL: tl.constexpr,
    DOT_F32: tl.constexpr,
):
    b = tl.program_id(0)
    kh = tl.program_id(1)
    sp = tl.program_id(2)
    # The layout is read before the PDL wait: the host copies it in before the step, and no
    # kernel of the step writes it.
    start = tl.load(indptr_ptr + b)
    end = tl.load(indptr_ptr + b + 1)
    first = start
    if window > 0:
        first = tl.maximum(start, end - window)
    chunk = tl.cdiv(tl.cdiv(end - first, NS), BLOCK_N) * BLOCK_N
    lo = first + sp * chunk
    hi = tl.minimum(lo + chunk, end)
    offs_g = tl.arange(0, GP)
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    g_ok = offs_g < G
    heads = kh * G + offs_g  # [GP]
    slot = tl.load(indices_ptr + lo + offs_n, mask=lo + offs_n < hi, other=0).to(tl.int64)  # [BLOCK_N], the first tile's slots
    if USE_PDL:
        gdc_wait()  # q and this step's new key come from the kernel before
        gdc_launch_dependents()
    q = tl.load(q_ptr + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh + offs_d[None, :], mask=g_ok[:, None], other=0.0)  # [GP, D]
    m_i = tl.full([GP], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([GP], dtype=tl.float32)
    acc = tl.zeros([GP, D], dtype=tl.float32)
    for n0 in range(lo, hi, BLOCK_N):
        valid = n0 + offs_n < hi  # [BLOCK_N]
        # K, V and the next tile's slots are all in flight at once: one memory latency per tile
        k = tl.load(k_ptr + slot[:, None] * stride_kt + kh * stride_kh + offs_d[None, :], mask=valid[:, None], other=0.0)  # [BLOCK_N, D]
        v = tl.load(v_ptr + slot[:, None] * stride_vt + kh * stride_vh + offs_d[None, :], mask=valid[:, None], other=0.0)  # [BLOCK_N, D]
        nxt = n0 + BLOCK_N + offs_n
        slot = tl.load(indices_ptr + nxt, mask=nxt < hi, other=0).to(tl.int64)
        if DOT_F32:
            s = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))
        s = s * qk_scale_log2  # [GP, BLOCK_N], log2 units
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))  # [GP]
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])  # [GP, BLOCK_N]
        l_i = l_i * alpha + tl.sum(p, axis=1)
        if DOT_F32:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype).to(tl.float32), v.to(tl.float32), input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    l_safe = tl.where(l_i > 0, l_i, 1.0)
    o = acc / l_safe[:, None]  # [GP, D]
    if NS == 1:
        o_ptrs = out_ptr + b.to(tl.int64) * stride_ob + heads[:, None] * stride_oh + offs_d[None, :]  # [GP, D]
        tl.store(o_ptrs, o.to(out_ptr.dtype.element_ty), mask=g_ok[:, None])
    else:
        lse = tl.where(l_i > 0, m_i + tl.log2(l_safe), float("-inf"))  # [GP], log2 units; -inf: empty split
        row = (b.to(tl.int64) * num_heads + heads) * NS + sp  # [GP]
        tl.store(mid_o_ptr + row[:, None] * D + offs_d[None, :], o, mask=g_ok[:, None])
        tl.store(mid_lse_ptr + row, lse, mask=g_ok)


@triton.jit
def _decode_merge_kernel(
    mid_o_ptr,
    mid_lse_ptr,
    out_ptr,
    stride_ob,
    stride_oh,
    num_heads,
    D: tl.constexpr,
    NS: tl.constexpr,
    NSP: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    if USE_PDL:
        gdc_wait()
        gdc_launch_dependents()
    offs_s = tl.arange(0, NSP)
    offs_d = tl.arange(0, D)
    s_ok = offs_s < NS
    row = (b.to(tl.int64) * num_heads + h) * NS + offs_s  # [NSP]
    lse = tl.load(mid_lse_ptr + row, mask=s_ok, other=float("-inf"))  # [NSP]
    m = tl.max(lse, axis=0)
    m = tl.where(m == float("-inf"), 0.0, m)
    w = tl.exp2(lse - m)  # [NSP]; 0 for empty splits
    o = tl.load(mid_o_ptr + row[:, None] * D + offs_d[None, :], mask=s_ok[:, None], other=0.0)  # [NSP, D]
    total = tl.sum(w, axis=0)
    merged = tl.sum(o * w[:, None], axis=0) / tl.where(total > 0, total, 1.0)  # [D]
    tl.store(out_ptr + b.to(tl.int64) * stride_ob + h * stride_oh + offs_d, merged.to(out_ptr.dtype.element_ty))


def decode_attention_triton(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    *,
    scale: float,
    window: int = 0,
    num_splits: int = 1,
    block_n: int = 32,
    num_warps: int = 4,
) -> torch.Tensor:
    """See :func:`~structgen.kernels.decode_attention_torch.decode_attention_torch`.
    ``num_splits`` chunks per (request, KV head) run as separate programs (more parallelism
    for few requests; see :func:`~structgen.kernels.decode_num_splits`); ``block_n`` keys per
    inner tile, ``num_warps`` warps per program.  The
    head dim must be a power of two.  ``ValueError`` for mismatched arguments."""
    check_decode_args(q, k_cache, v_cache, kv_indptr, kv_indices, num_splits, window)
    batch, heads, dim = q.shape
    kv_heads = k_cache.shape[1]
    if dim & (dim - 1) or k_cache.stride(2) != 1 or v_cache.stride(2) != 1 or q.stride(2) != 1:
        raise ValueError(f"head_dim must be a power of two with unit-stride rows, got {dim}")
    group = heads // kv_heads
    out = torch.empty_like(q)  # [B, H, D]
    if batch == 0:
        return out
    if num_splits > 1:
        mid_o = torch.empty((batch, heads, num_splits, dim), dtype=torch.float32, device=q.device)  # [B, H, NS, D]
        mid_lse = torch.empty((batch, heads, num_splits), dtype=torch.float32, device=q.device)  # [B, H, NS]
    else:
        mid_o = mid_lse = out  # unused
    pdl = use_pdl(q)
    _decode_split_kernel[(batch, kv_heads, num_splits)](
        q,
        k_cache,
        v_cache,
        kv_indptr,
        kv_indices,
        out,
        mid_o,
        mid_lse,
        q.stride(0),
        q.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        v_cache.stride(0),
        v_cache.stride(1),
        out.stride(0),
        out.stride(1),
        heads,
        scale * LOG2E,
        window,
        G=group,
        GP=max(16, triton.next_power_of_2(group)),
        D=dim,
        NS=num_splits,
        BLOCK_N=block_n,
        USE_PDL=pdl,
        DOT_F32=not q.is_cuda or q.dtype == torch.float32,  # exact fp32 dots; Triton 3.9's interpreter gets bf16 tl.dot wrong
        num_warps=num_warps,
        num_stages=2,
        launch_pdl=pdl,
    )
    if num_splits > 1:
        _decode_merge_kernel[(batch, heads)](
            mid_o,
            mid_lse,
            out,
            out.stride(0),
            out.stride(1),
            heads,
            D=dim,
            NS=num_splits,
            NSP=triton.next_power_of_2(num_splits),
            USE_PDL=pdl,
            num_warps=4,
            launch_pdl=pdl,
        )
    return out
