"""Dispatchers (``backend="auto"``) of the logits-side and decoder kernels, each picking the
Triton implementation for CUDA tensors when triton imports and the torch reference otherwise;
a Triton module is imported only when picked.  The decode GEMV's dispatcher is in
:mod:`.linear`."""

from __future__ import annotations

import functools
from types import ModuleType

import torch
from structgen.kernels.decode_attention_torch import decode_attention_torch
from structgen.kernels.mask_rows_torch import apply_mask_rows_torch, masked_argmax_torch
from structgen.kernels.model_ops_torch import (
    fused_add_rms_norm_torch,
    resolve_placeholders_torch,
    rms_norm_torch,
    rope_qkv_inplace_torch,
    rope_store_kv_torch,
    silu_and_mul_torch,
)

BACKENDS = ("auto", "torch", "triton")


@functools.cache
def triton_available() -> bool:
    """Whether ``triton`` imports (the kernels then compile on CUDA or interpret on CPU)."""
    try:
        import triton  # noqa: F401
    except Exception:
        return False
    return True


def resolve_backend(backend: str, device: torch.device) -> str:
    """``"torch"`` or ``"triton"`` for tensors on ``device``.  Raises ``ValueError`` for an
    unknown backend and ``RuntimeError`` when ``"triton"`` is asked for without triton."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown kernel backend {backend!r}; available: {', '.join(BACKENDS)}")
    if backend == "auto":
        return "triton" if device.type == "cuda" and triton_available() else "torch"
    if backend == "triton" and not triton_available():
        raise RuntimeError("kernel backend 'triton' requested but triton is not installed (pip install 'structgen[gpu]')")
    return backend


@functools.cache
def _mask_triton() -> ModuleType:
    from structgen.kernels import mask_rows_triton

    return mask_rows_triton


@functools.cache
def _ops_triton() -> ModuleType:
    from structgen.kernels import model_ops_triton

    return model_ops_triton


def apply_mask_rows(
    logits: torch.Tensor,
    row_idx: torch.Tensor,
    pool: torch.Tensor,
    *,
    temperature: torch.Tensor | None = None,
    vocab_limit: int | None = None,
    backend: str = "auto",
) -> None:
    """Mask ``logits`` ``[B, V]`` in place with pool rows ``row_idx`` (int32 ``[B]``, −1 =
    unconstrained), dividing allowed logits by ``temperature`` (float32 ``[B]``, ≤ 0 = unscaled).
    Full contract: :func:`~structgen.kernels.mask_rows_torch.apply_mask_rows_torch`."""
    if resolve_backend(backend, logits.device) == "triton":
        _mask_triton().apply_mask_rows_triton(logits, row_idx, pool, temperature=temperature, vocab_limit=vocab_limit)
    else:
        apply_mask_rows_torch(logits, row_idx, pool, temperature=temperature, vocab_limit=vocab_limit)


def masked_argmax(
    logits: torch.Tensor,
    row_idx: torch.Tensor,
    pool: torch.Tensor,
    *,
    vocab_limit: int | None = None,
    out: torch.Tensor | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """Greedy ids (int64 ``[B]``, into ``out`` when given) under the mask rows, ``logits``
    unchanged.  Contract: :func:`~structgen.kernels.mask_rows_torch.masked_argmax_torch`."""
    if resolve_backend(backend, logits.device) == "triton":
        return _mask_triton().masked_argmax_triton(logits, row_idx, pool, vocab_limit=vocab_limit, out=out)  # type: ignore[no-any-return]
    return masked_argmax_torch(logits, row_idx, pool, vocab_limit=vocab_limit, out=out)


def resolve_placeholders(ids: torch.Tensor, table: torch.Tensor, *, backend: str = "auto") -> torch.Tensor:
    """``ids`` (int64 ``[T]``) with each negative id ``−1 − j`` replaced by ``table[j]`` (int64
    ``[J]``, same device); see :func:`~structgen.kernels.model_ops_torch.resolve_placeholders_torch`."""
    if resolve_backend(backend, ids.device) == "triton":
        return _ops_triton().resolve_placeholders_triton(ids, table)  # type: ignore[no-any-return]
    return resolve_placeholders_torch(ids, table)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, *, backend: str = "auto") -> torch.Tensor:
    """RMSNorm of ``x`` ``[T, H]``; see :func:`~structgen.kernels.model_ops_torch.rms_norm_torch`."""
    if resolve_backend(backend, x.device) == "triton":
        return _ops_triton().rms_norm_triton(x, weight, eps)  # type: ignore[no-any-return]
    return rms_norm_torch(x, weight, eps)


def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float, *, backend: str = "auto"
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(rms_norm(x + residual), x + residual)``; see
    :func:`~structgen.kernels.model_ops_torch.fused_add_rms_norm_torch`."""
    if resolve_backend(backend, x.device) == "triton":
        return _ops_triton().fused_add_rms_norm_triton(x, residual, weight, eps)  # type: ignore[no-any-return]
    return fused_add_rms_norm_torch(x, residual, weight, eps)


def silu_and_mul(gate_up: torch.Tensor, *, backend: str = "auto") -> torch.Tensor:
    """``silu(gate) * up`` of ``[T, 2I]`` → ``[T, I]``; see
    :func:`~structgen.kernels.model_ops_torch.silu_and_mul_torch`."""
    if resolve_backend(backend, gate_up.device) == "triton":
        return _ops_triton().silu_and_mul_triton(gate_up)  # type: ignore[no-any-return]
    return silu_and_mul_torch(gate_up)


def rope_qkv_inplace(
    qkv: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, num_rot_heads: int, head_dim: int, *, backend: str = "auto"
) -> None:
    """Rotary embedding in place on the first ``num_rot_heads`` heads of ``qkv``; see
    :func:`~structgen.kernels.model_ops_torch.rope_qkv_inplace_torch`."""
    if resolve_backend(backend, qkv.device) == "triton":
        _ops_triton().rope_qkv_inplace_triton(qkv, positions, inv_freq, num_rot_heads, head_dim)
    else:
        rope_qkv_inplace_torch(qkv, positions, inv_freq, num_rot_heads, head_dim)


def rope_store_kv(
    qkv: torch.Tensor,
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    slots: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    *,
    backend: str = "auto",
) -> None:
    """RoPE on q in place and the rotated k, v stored at ``slots`` of the caches ``[N, KH, D]``;
    see :func:`~structgen.kernels.model_ops_torch.rope_store_kv_torch`."""
    if resolve_backend(backend, qkv.device) == "triton":
        _ops_triton().rope_store_kv_triton(qkv, positions, inv_freq, slots, k_cache, v_cache, num_heads, num_kv_heads, head_dim)
    else:
        rope_store_kv_torch(qkv, positions, inv_freq, slots, k_cache, v_cache, num_heads, num_kv_heads, head_dim)


@functools.cache
def _decode_attention_triton() -> ModuleType:
    from structgen.kernels import decode_attention_triton

    return decode_attention_triton


def decode_num_splits(batch: int, kv_heads: int, num_sms: int, *, max_splits: int = 64) -> int:
    """Splits per (request, KV head) for :func:`decode_attention`: the largest power of two
    ≤ ``max_splits`` that keeps ``batch · kv_heads · splits`` within four programs per SM, at
    least 1 (flash-decoding fills the GPU only when few requests leave SMs idle; a split
    shorter than a tile of keys stays empty).  Chosen from ``benchmarks/decode_micro.py
    --sections decode_attn`` on the H200 (the decode results at commit 64da35c).  ``ValueError``
    unless every count is ≥ 1."""
    if min(batch, kv_heads, num_sms, max_splits) < 1:
        raise ValueError(f"batch, kv_heads, num_sms and max_splits must be ≥ 1, got {batch}, {kv_heads}, {num_sms}, {max_splits}")
    splits = 1
    while splits * 2 <= max_splits and batch * kv_heads * splits * 2 <= 4 * num_sms:
        splits *= 2
    return splits


def decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    *,
    scale: float,
    window: int = 0,
    num_splits: int = 1,
    backend: str = "auto",
) -> torch.Tensor:
    """Paged decode attention, one query per request: ``q [B, H, D]`` over the slots
    ``kv_indices[kv_indptr[b]:kv_indptr[b + 1]]`` of ``k_cache`` / ``v_cache`` ``[N, KH, D]``;
    see :func:`~structgen.kernels.decode_attention_torch.decode_attention_torch`.  The Triton
    kernel reads the layout on the device (CUDA-graph safe); the torch reference reads it on
    the host."""
    if resolve_backend(backend, q.device) == "triton":
        return _decode_attention_triton().decode_attention_triton(  # type: ignore[no-any-return]
            q, k_cache, v_cache, kv_indptr, kv_indices, scale=scale, window=window, num_splits=num_splits
        )
    return decode_attention_torch(q, k_cache, v_cache, kv_indptr, kv_indices, scale=scale, window=window, num_splits=num_splits)
