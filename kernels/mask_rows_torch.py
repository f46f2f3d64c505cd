"""Torch reference for applying precomputed FSM mask rows to logits (any device).

The rows live in a device-resident pool ``[R, W]`` int32 (bit ``t & 31`` of word ``t >> 5`` set
when token ``t`` is allowed); a step passes one pool row index per logits row.  Same contract
as :mod:`structgen.kernels.mask_rows_triton`, which the tests compare against this file.
"""

from __future__ import annotations

import torch


def _check(logits: torch.Tensor, row_idx: torch.Tensor, pool: torch.Tensor) -> None:
    if logits.dim() != 2 or pool.dim() != 2 or row_idx.dim() != 1:
        raise ValueError(
            f"expected logits [B, V], row_idx [B], pool [R, W]; got {tuple(logits.shape)}, {tuple(row_idx.shape)}, {tuple(pool.shape)}"
        )
    if pool.dtype != torch.int32 or row_idx.dtype != torch.int32:
        raise TypeError(f"pool and row_idx must be int32, got {pool.dtype} and {row_idx.dtype}")
    if logits.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"logits must be float32, bfloat16 or float16, got {logits.dtype}")
    if row_idx.shape[0] != logits.shape[0]:
        raise ValueError(f"row_idx has {row_idx.shape[0]} entries for {logits.shape[0]} logits rows")
    if pool.shape[1] * 32 < logits.shape[1]:
        raise ValueError(f"pool rows have {pool.shape[1]} words, fewer than ceil(V/32) for V={logits.shape[1]}")


def allowed_mask_torch(row_idx: torch.Tensor, pool: torch.Tensor, vocab: int, vocab_limit: int | None = None) -> torch.Tensor:
    """``bool [B, vocab]``: True where allowed.  Row index -1 allows every id below
    ``vocab_limit`` (default ``vocab``); ids ``≥ vocab_limit`` are never allowed."""
    words = (vocab + 31) // 32
    rows = pool[row_idx.clamp(min=0).long(), :words]  # [B, words]
    shifts = torch.arange(32, device=pool.device, dtype=torch.int32)  # [32]
    bits = ((rows.unsqueeze(-1) >> shifts) & 1).reshape(rows.shape[0], -1)[:, :vocab].bool()  # [B, V]
    bits |= (row_idx < 0).to(bits.device)[:, None]
    limit = vocab if vocab_limit is None else vocab_limit
    if limit < vocab:
        bits[:, limit:] = False
    return bits


def apply_mask_rows_torch(
    logits: torch.Tensor,
    row_idx: torch.Tensor,
    pool: torch.Tensor,
    *,
    temperature: torch.Tensor | None = None,
    vocab_limit: int | None = None,
) -> None:
    """In place: ``logits[b, t] = -inf`` where row ``row_idx[b]`` of ``pool`` disallows ``t``;
    allowed logits are divided by ``temperature[b]`` when it is given and > 0.

    ``logits``: float32 / bfloat16 / float16 ``[B, V]``; ``row_idx``: int32 ``[B]`` (−1 =
    unconstrained); ``pool``: int32 ``[R, W ≥ ceil(V/32)]``; ``temperature``: float32 ``[B]``
    (≤ 0 leaves the row unscaled, for greedy rows); ``vocab_limit``: ids at or above it are
    masked in every row (tokenizer padding).  Raises ``ValueError`` / ``TypeError`` on shapes or
    dtypes.
    """
    _check(logits, row_idx, pool)
    allowed = allowed_mask_torch(row_idx, pool, logits.shape[1], vocab_limit)  # [B, V]
    work = logits.float()
    if temperature is not None:
        t = temperature.float()
        work = work / torch.where(t > 0, t, torch.ones_like(t))[:, None]
    logits.copy_(work.masked_fill(~allowed, float("-inf")))


def masked_argmax_torch(
    logits: torch.Tensor, row_idx: torch.Tensor, pool: torch.Tensor, *, vocab_limit: int | None = None, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Greedy pick under the mask without modifying ``logits``: int64 ``[B]``, the first index of
    the largest allowed logit per row, written into ``out`` (int64 ``[B]`` on the logits'
    device) when given.  Arguments as in :func:`apply_mask_rows_torch`; ``ValueError`` for an
    ``out`` of another shape, dtype or device."""
    _check(logits, row_idx, pool)
    _check_out(out, logits)
    allowed = allowed_mask_torch(row_idx, pool, logits.shape[1], vocab_limit)
    ids = logits.float().masked_fill(~allowed, float("-inf")).argmax(dim=-1)  # [B]
    if out is None:
        return ids
    return out.copy_(ids)


def _check_out(out: torch.Tensor | None, logits: torch.Tensor) -> None:
    if out is not None and (out.shape != (logits.shape[0],) or out.dtype != torch.int64 or out.device != logits.device):
        raise ValueError(f"out must be int64 [{logits.shape[0]}] on {logits.device}, got {out.dtype} {list(out.shape)} on {out.device}")
