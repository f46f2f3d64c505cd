"""Torch reference for paged decode attention (one query token per request, page size 1).

Same contract as :mod:`structgen.kernels.decode_attention_triton`.  Reads the KV layout on the
host (one synchronization per call): a reference and a CPU fallback, not a CUDA-graph path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def check_decode_args(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    num_splits: int,
    window: int,
) -> None:
    """Raises ``ValueError`` naming the argument whose shape, dtype or device does not fit the
    decode-attention contract."""
    if q.dim() != 3 or k_cache.dim() != 3 or v_cache.shape != k_cache.shape:
        shapes = f"{tuple(q.shape)}, {tuple(k_cache.shape)}, {tuple(v_cache.shape)}"
        raise ValueError(f"expected q [B, H, D] and k/v caches [N, KH, D], got {shapes}")
    heads, kv_heads = q.shape[1], k_cache.shape[1]
    if q.shape[2] != k_cache.shape[2] or kv_heads == 0 or heads % kv_heads:
        raise ValueError(f"q heads {heads} / head_dim {q.shape[2]} do not fit KV heads {kv_heads} / head_dim {k_cache.shape[2]}")
    if q.dtype != k_cache.dtype or v_cache.dtype != k_cache.dtype:
        raise ValueError(f"q and the k/v caches must share one dtype, got {q.dtype}, {k_cache.dtype}, {v_cache.dtype}")
    if kv_indptr.dtype != torch.int32 or kv_indices.dtype != torch.int32:
        raise ValueError(f"kv_indptr and kv_indices must be int32, got {kv_indptr.dtype}, {kv_indices.dtype}")
    if kv_indptr.dim() != 1 or kv_indptr.numel() != q.shape[0] + 1:
        raise ValueError(f"kv_indptr must be [B + 1] = [{q.shape[0] + 1}], got {tuple(kv_indptr.shape)}")
    if kv_indices.dim() != 1:
        raise ValueError(f"kv_indices must be 1-D, got {tuple(kv_indices.shape)}")
    if len({t.device for t in (q, k_cache, v_cache, kv_indptr, kv_indices)}) != 1:
        raise ValueError("q, the caches, kv_indptr and kv_indices must be on one device")
    if window < 0:
        raise ValueError(f"window must be ≥ 0 (0: full attention), got {window}")
    if num_splits < 1:
        raise ValueError(f"num_splits must be ≥ 1, got {num_splits}")


def decode_attention_torch(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    *,
    scale: float,
    window: int = 0,
    num_splits: int = 1,
) -> torch.Tensor:
    """Attention of each request's one query over its cached keys.

    ``q``: ``[B, H, D]``; ``k_cache``, ``v_cache``: ``[N, KH, D]`` (``H`` a multiple of ``KH``,
    grouped-query attention); request ``b``'s keys are the slots
    ``kv_indices[kv_indptr[b] : kv_indptr[b + 1]]`` (int32) in position order, its own new key
    last.  ``window`` > 0 keeps only the last ``window`` keys.  ``num_splits`` is accepted for
    the Triton kernel's signature and does not change the result.  Returns ``[B, H, D]`` in
    ``q.dtype`` (softmax in float32).  ``ValueError`` for mismatched arguments."""
    check_decode_args(q, k_cache, v_cache, kv_indptr, kv_indices, num_splits, window)
    group = q.shape[1] // k_cache.shape[1]
    out = torch.empty_like(q)  # [B, H, D]
    bounds = kv_indptr.tolist()
    for b in range(q.shape[0]):
        lo, hi = bounds[b], bounds[b + 1]
        if window > 0:
            lo = max(lo, hi - window)
        slots = kv_indices[lo:hi].long()  # [L]
        k = k_cache[slots].float().repeat_interleave(group, dim=1).transpose(0, 1)  # [H, L, D]
        v = v_cache[slots].float().repeat_interleave(group, dim=1).transpose(0, 1)  # [H, L, D]
        o = F.scaled_dot_product_attention(q[b].float()[:, None, :], k, v, scale=scale)  # [H, 1, D]
        out[b] = o[:, 0].to(q.dtype)
    return out
