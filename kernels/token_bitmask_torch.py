"""Torch reference for applying token bitmasks to logits (any device)."""

from __future__ import annotations

import torch


def apply_token_bitmask_inplace_torch(logits: torch.Tensor, bitmask: torch.Tensor, indices: torch.Tensor | None = None) -> None:
    """Set ``logits[i, t] = -inf`` where bit ``t`` of row ``i`` of ``bitmask`` is clear.

    ``logits``: float ``[B, V]`` (modified in place); ``bitmask``: int32 ``[B, W]`` (bit ``t & 31``
    of word ``t >> 5``; ids ``≥ 32 W`` count as disallowed); ``indices``: optional int64 ``[K]``
    rows of ``logits`` to mask, ``bitmask`` then being ``[K, W]``.  Same layout as xgrammar's
    ``apply_token_bitmask_inplace``.
    """
    if bitmask.dtype != torch.int32:
        raise TypeError(f"bitmask must be int32, got {bitmask.dtype}")
    if logits.dim() != 2 or bitmask.dim() != 2:
        raise ValueError(f"expected logits [B, V] and bitmask [B, W], got {tuple(logits.shape)} and {tuple(bitmask.shape)}")
    rows = logits if indices is None else logits[indices]  # [K, V]
    if rows.shape[0] != bitmask.shape[0]:
        raise ValueError(f"bitmask has {bitmask.shape[0]} rows for {rows.shape[0]} logits rows")
    vocab = logits.shape[1]
    shifts = torch.arange(32, device=bitmask.device, dtype=torch.int32)  # [32]
    bits = (bitmask.unsqueeze(-1) >> shifts) & 1  # [K, W, 32]
    allowed = bits.reshape(bitmask.shape[0], -1).bool()  # [K, 32W]
    if allowed.shape[1] >= vocab:
        allowed = allowed[:, :vocab]
    else:
        allowed = torch.cat([allowed, allowed.new_zeros(allowed.shape[0], vocab - allowed.shape[1])], dim=1)
    masked = rows.masked_fill(~allowed.to(rows.device), float("-inf"))
    if indices is None:
        logits.copy_(masked)
    else:
        logits[indices] = masked
