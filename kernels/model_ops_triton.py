"""Triton versions of the decoder's small fused ops (same contract as
:mod:`structgen.kernels.model_ops_torch`).  In a CUDA-graph decode step each replaces a chain of
elementwise torch kernels with one launch: RMSNorm with the residual add fused (as vLLM's
``fused_add_rms_norm``), SiLU-and-mul, and rotary embedding computed from positions in place on
the fused qkv projection (no cos/sin cache)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .model_ops_torch import check_placeholders
from .pdl import gdc_launch_dependents, gdc_wait, use_pdl


@triton.jit
def _rms_norm_kernel(
    x_ptr,
    res_ptr,
    w_ptr,
    out_ptr,
    res_out_ptr,
    stride_x,
    stride_r,
    stride_o,
    hidden,
    eps,
    HAS_RES: tl.constexpr,
    BLOCK: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    if USE_PDL:
        gdc_wait()
        gdc_launch_dependents()
    t = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < hidden
    x = tl.load(x_ptr + t * stride_x + offs, mask=m, other=0.0)
    if HAS_RES:
        r = tl.load(res_ptr + t * stride_r + offs, mask=m, other=0.0)
        x = (x.to(tl.float32) + r.to(tl.float32)).to(x_ptr.dtype.element_ty)
        tl.store(res_out_ptr + t * hidden + offs, x, mask=m)
    xf = x.to(tl.float32)
    var = tl.sum(xf * xf, axis=0) / hidden
    normed = (xf * tl.rsqrt(var + eps)).to(x_ptr.dtype.element_ty)
    w = tl.load(w_ptr + offs, mask=m, other=0.0)
    y = w.to(tl.float32) * normed.to(tl.float32)
    tl.store(out_ptr + t * stride_o + offs, y.to(out_ptr.dtype.element_ty), mask=m)


def _norm(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor | None]:
    if x.dim() != 2 or x.stride(1) != 1:
        raise ValueError(f"expected x [T, H] contiguous along H, got {tuple(x.shape)}")
    tokens, hidden = x.shape
    out_dtype = torch.promote_types(x.dtype, weight.dtype)
    out = torch.empty((tokens, hidden), dtype=out_dtype, device=x.device)  # [T, H]
    res_out = torch.empty_like(x) if residual is not None else None  # [T, H]
    if tokens:
        block = triton.next_power_of_2(hidden)
        pdl = use_pdl(x)
        _rms_norm_kernel[(tokens,)](
            x,
            residual if residual is not None else x,
            weight,
            out,
            res_out if res_out is not None else out,
            x.stride(0),
            residual.stride(0) if residual is not None else 0,
            out.stride(0),
            hidden,
            eps,
            HAS_RES=residual is not None,
            BLOCK=block,
            USE_PDL=pdl,
            num_warps=min(16, max(1, block // 256)),
            launch_pdl=pdl,
        )
    return out, res_out


def rms_norm_triton(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """See :func:`~structgen.kernels.model_ops_torch.rms_norm_torch`.  One program per token."""
    return _norm(x, None, weight, eps)[0]


def fused_add_rms_norm_triton(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """See :func:`~structgen.kernels.model_ops_torch.fused_add_rms_norm_torch`."""
    out, res = _norm(x, residual, weight, eps)
    assert res is not None
    return out, res


@triton.jit
def _silu_and_mul_kernel(in_ptr, out_ptr, stride_in, inter, BLOCK: tl.constexpr, USE_PDL: tl.constexpr):
    if USE_PDL:
        gdc_wait()
        gdc_launch_dependents()
    t = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = offs < inter
    g = tl.load(in_ptr + t * stride_in + offs, mask=m, other=0.0).to(tl.float32)
    u = tl.load(in_ptr + t * stride_in + inter + offs, mask=m, other=0.0)
    # torch: silu in the input dtype, then the product in the input dtype
    s = (g / (1.0 + tl.exp(-g))).to(in_ptr.dtype.element_ty)
    y = s.to(tl.float32) * u.to(tl.float32)
    tl.store(out_ptr + t * inter + offs, y.to(out_ptr.dtype.element_ty), mask=m)


def silu_and_mul_triton(gate_up: torch.Tensor) -> torch.Tensor:
    """See :func:`~structgen.kernels.model_ops_torch.silu_and_mul_torch`."""
    if gate_up.dim() != 2 or gate_up.shape[1] % 2 or gate_up.stride(1) != 1:
        raise ValueError(f"expected gate_up [T, 2I] contiguous along the last dim, got {tuple(gate_up.shape)}")
    tokens, inter = gate_up.shape[0], gate_up.shape[1] // 2
    out = torch.empty((tokens, inter), dtype=gate_up.dtype, device=gate_up.device)  # [T, I]
    if tokens:
        block = 1024
        pdl = use_pdl(gate_up)
        _silu_and_mul_kernel[(tokens, triton.cdiv(inter, block))](
            gate_up, out, gate_up.stride(0), inter, BLOCK=block, USE_PDL=pdl, num_warps=4, launch_pdl=pdl
        )
    return out


@triton.jit
def _rope_kernel(qkv_ptr, pos_ptr, inv_freq_ptr, stride_t, num_heads, HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)  # [BH]
    d = tl.arange(0, HALF)  # [HALF]
    hm = heads < num_heads
    pos = tl.load(pos_ptr + t).to(tl.float32)
    freq = pos * tl.load(inv_freq_ptr + d)  # [HALF]
    cos = tl.cos(freq)[None, :]
    sin = tl.sin(freq)[None, :]
    base = qkv_ptr + t * stride_t + heads[:, None] * (2 * HALF) + d[None, :]  # [BH, HALF]
    x1 = tl.load(base, mask=hm[:, None], other=0.0)
    x2 = tl.load(base + HALF, mask=hm[:, None], other=0.0)
    a = x1.to(tl.float32)
    b = x2.to(tl.float32)
    tl.store(base, (a * cos - b * sin).to(x1.dtype), mask=hm[:, None])
    tl.store(base + HALF, (b * cos + a * sin).to(x1.dtype), mask=hm[:, None])


def rope_qkv_inplace_triton(qkv: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, num_rot_heads: int, head_dim: int) -> None:
    """See :func:`~structgen.kernels.model_ops_torch.rope_qkv_inplace_torch`.  Grid
    ``(T, ceil(num_rot_heads / 8))``; ``head_dim`` must be a power of two."""
    if head_dim & (head_dim - 1) or qkv.stride(1) != 1:
        raise ValueError(f"rope kernel needs a power-of-two head_dim and rows contiguous, got head_dim={head_dim}")
    tokens = qkv.shape[0]
    if tokens:
        block_h = 8
        _rope_kernel[(tokens, triton.cdiv(num_rot_heads, block_h))](
            qkv, positions, inv_freq, qkv.stride(0), num_rot_heads, HALF=head_dim // 2, BLOCK_H=block_h, num_warps=4
        )


@triton.jit
def _rope_store_kv_kernel(
    qkv_ptr, pos_ptr, inv_freq_ptr, slot_ptr, k_ptr, v_ptr, stride_t, num_heads, num_kv_heads,
    HALF: tl.constexpr, BLOCK_H: tl.constexpr, USE_PDL: tl.constexpr,
):  # fmt: skip
    if USE_PDL:
        gdc_wait()
        gdc_launch_dependents()
    t = tl.program_id(0).to(tl.int64)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)  # [BH] over q | k | v heads
    total = num_heads + 2 * num_kv_heads
    hm = heads < total
    is_q = heads < num_heads
    is_v = heads >= num_heads + num_kv_heads
    d = tl.arange(0, HALF)  # [HALF]
    pos = tl.load(pos_ptr + t).to(tl.float32)
    freq = pos * tl.load(inv_freq_ptr + d)  # [HALF]
    cos = tl.cos(freq)[None, :]
    sin = tl.sin(freq)[None, :]
    src = qkv_ptr + t * stride_t + heads[:, None] * (2 * HALF) + d[None, :]  # [BH, HALF]
    x1 = tl.load(src, mask=hm[:, None], other=0.0)
    x2 = tl.load(src + HALF, mask=hm[:, None], other=0.0)
    a = x1.to(tl.float32)
    b = x2.to(tl.float32)
    rot = ~is_v[:, None]  # q and k heads rotate, v heads are copied
    y1 = tl.where(rot, a * cos - b * sin, a).to(x1.dtype)
    y2 = tl.where(rot, b * cos + a * sin, b).to(x1.dtype)
    slot = tl.load(slot_ptr + t).to(tl.int64)
    kv_head = tl.where(is_v, heads - num_heads - num_kv_heads, heads - num_heads)
    cache_off = (slot * num_kv_heads + kv_head)[:, None] * (2 * HALF) + d[None, :]  # [BH, HALF]
    qm = (hm & is_q)[:, None]
    km = (hm & ~is_q & ~is_v)[:, None]
    vm = (hm & is_v)[:, None]
    tl.store(src, y1, mask=qm)
    tl.store(src + HALF, y2, mask=qm)
    tl.store(k_ptr + cache_off, y1.to(k_ptr.dtype.element_ty), mask=km)
    tl.store(k_ptr + cache_off + HALF, y2.to(k_ptr.dtype.element_ty), mask=km)
    tl.store(v_ptr + cache_off, y1.to(v_ptr.dtype.element_ty), mask=vm)
    tl.store(v_ptr + cache_off + HALF, y2.to(v_ptr.dtype.element_ty), mask=vm)


def rope_store_kv_triton(
    qkv: torch.Tensor,
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    slots: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
) -> None:
    """See :func:`~structgen.kernels.model_ops_torch.rope_store_kv_torch`.  One launch, grid
    ``(T, ceil((H + 2 KH) / 8))``; ``head_dim`` must be a power of two, the caches contiguous."""
    if head_dim & (head_dim - 1) or qkv.stride(1) != 1:
        raise ValueError(f"rope kernel needs a power-of-two head_dim and rows contiguous, got head_dim={head_dim}")
    if not (k_cache.is_contiguous() and v_cache.is_contiguous()):
        raise ValueError("rope_store_kv needs contiguous K/V caches")
    tokens = qkv.shape[0]
    if tokens:
        block_h = 8
        pdl = use_pdl(qkv)
        _rope_store_kv_kernel[(tokens, triton.cdiv(num_heads + 2 * num_kv_heads, block_h))](
            qkv, positions, inv_freq, slots, k_cache, v_cache, qkv.stride(0), num_heads, num_kv_heads,
            HALF=head_dim // 2, BLOCK_H=block_h, USE_PDL=pdl, num_warps=4, launch_pdl=pdl,
        )  # fmt: skip


@triton.jit
def _resolve_placeholders_kernel(ids_ptr, table_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    ids = tl.load(ids_ptr + offs, mask=m, other=0)
    hole = ids < 0
    looked = tl.load(table_ptr + tl.where(hole, -1 - ids, 0), mask=m & hole, other=0)
    tl.store(out_ptr + offs, tl.where(hole, looked, ids), mask=m)


def resolve_placeholders_triton(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Triton version of :func:`~structgen.kernels.model_ops_torch.resolve_placeholders_torch`
    (same arguments, errors and result): one launch instead of five elementwise kernels."""
    check_placeholders(ids, table)
    out = torch.empty_like(ids)  # [T]
    n = ids.numel()
    if n:
        block = min(1024, triton.next_power_of_2(n))
        _resolve_placeholders_kernel[(triton.cdiv(n, block),)](ids, table, out, n, BLOCK=block, num_warps=1 if block <= 256 else 4)
    return out
