"""Torch references for the decoder's small fused ops: RMSNorm (with the residual add),
SiLU-and-mul, and rotary embedding applied in place to the fused qkv projection.

Numerics follow Hugging Face Llama: RMSNorm computed in float32 and cast back before the weight
multiply; rotary in float32 with the rotate-half layout.  Same contract as
:mod:`structgen.kernels.model_ops_triton`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rms_norm_torch(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``weight * x / rms(x)`` (Zhang & Sennrich 2019).  ``x``: ``[T, H]``; ``weight``: ``[H]``;
    returns ``[T, H]`` in ``x.dtype``."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(x.dtype)


def fused_add_rms_norm_torch(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``residual' = x + residual`` (in ``x.dtype``) and ``rms_norm(residual')``; returns
    ``(normed [T, H], residual' [T, H])``."""
    summed = x + residual
    return rms_norm_torch(summed, weight, eps), summed


def silu_and_mul_torch(gate_up: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` for ``gate_up = [gate | up]`` of shape ``[T, 2I]``; returns ``[T, I]``."""
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up


def rope_qkv_inplace_torch(qkv: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, num_rot_heads: int, head_dim: int) -> None:
    """Rotate, in place, the first ``num_rot_heads`` heads (q then k) of each row of the fused
    projection ``qkv`` ``[T, ≥ num_rot_heads * head_dim]`` by position ``positions`` (int64
    ``[T]``) with frequencies ``inv_freq`` (float32 ``[head_dim / 2]``); rotate-half layout
    (Su et al. 2021, RoFormer; Hugging Face Llama)."""
    t = qkv.shape[0]
    heads = qkv[:, : num_rot_heads * head_dim].view(t, num_rot_heads, head_dim)  # [T, NR, D]
    freqs = positions.float()[:, None] * inv_freq[None, :]  # [T, D/2]
    emb = torch.cat((freqs, freqs), dim=-1)  # [T, D]
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]  # [T, 1, D]
    xf = heads.float()
    half = head_dim // 2
    rotated = torch.cat((-xf[..., half:], xf[..., :half]), dim=-1)
    heads.copy_((xf * cos + rotated * sin).to(qkv.dtype))


def rope_store_kv_torch(
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
    """RoPE on the q and k heads of ``qkv`` ``[T, (H + 2 KH) · D]`` (positions int64 ``[T]``,
    ``inv_freq`` float32 ``[D / 2]``), with the rotated k and the v heads written to the KV
    caches ``[N, KH, D]`` at ``slots`` (int64 ``[T]``).  Afterwards the q heads of ``qkv`` are
    rotated in place; its k and v heads are left unspecified (the caches hold them)."""
    t = qkv.shape[0]
    rope_qkv_inplace_torch(qkv, positions, inv_freq, num_heads + num_kv_heads, head_dim)
    k = qkv[:, num_heads * head_dim : (num_heads + num_kv_heads) * head_dim].view(t, num_kv_heads, head_dim)  # [T, KH, D]
    v = qkv[:, (num_heads + num_kv_heads) * head_dim :].view(t, num_kv_heads, head_dim)  # [T, KH, D]
    k_cache[slots] = k.to(k_cache.dtype)
    v_cache[slots] = v.to(v_cache.dtype)


def check_placeholders(ids: torch.Tensor, table: torch.Tensor) -> None:
    """Raises ``ValueError`` unless ``ids`` and ``table`` are 1-D int64 tensors on one device."""
    if ids.dtype != torch.int64 or table.dtype != torch.int64 or ids.device != table.device or ids.dim() != 1 or table.dim() != 1:
        raise ValueError(
            f"ids and table must be 1-D int64 tensors on one device, got {ids.dtype} {list(ids.shape)} on {ids.device} "
            f"and {table.dtype} {list(table.shape)} on {table.device}"
        )


def resolve_placeholders_torch(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """``ids`` (int64 ``[T]``) with every negative id ``−1 − j`` replaced by ``table[j]`` (int64
    ``[J]``, same device; ``j < J`` is the caller's promise, not checked on the device), others
    unchanged; a new tensor.  The overlap scheduler's forwards take ids sampled on the device
    this way (SGLang's future token map).  ``ValueError`` for other dtypes or devices."""
    check_placeholders(ids, table)
    rows = torch.bitwise_not(ids).clamp_(min=0)  # [T]: -1 - id, the row a placeholder names
    return torch.where(ids < 0, table.index_select(0, rows), ids)
