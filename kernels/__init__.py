"""Logits-side kernels behind one dispatcher (``backend="auto"``).

``import structgen.kernels`` never needs triton or flashinfer: an accelerated implementation is
imported only when the dispatcher picks it.
"""

from __future__ import annotations

import torch

from .token_bitmask_torch import apply_token_bitmask_inplace_torch

BACKENDS = ("auto", "torch")


def apply_token_bitmask_inplace(
    logits: torch.Tensor, bitmask: torch.Tensor, indices: torch.Tensor | None = None, *, backend: str = "auto"
) -> None:
    """Mask disallowed tokens to ``-inf`` in place.  Shapes as in
    :func:`~structgen.kernels.token_bitmask_torch.apply_token_bitmask_inplace_torch`.

    ``backend``: ``"auto"`` (the fastest available for ``logits.device``; the torch reference
    for now) or ``"torch"``.  Raises ``ValueError`` for an unknown backend.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown token-bitmask backend {backend!r}; available: {', '.join(BACKENDS)}")
    apply_token_bitmask_inplace_torch(logits, bitmask, indices)


__all__ = ["BACKENDS", "apply_token_bitmask_inplace", "apply_token_bitmask_inplace_torch"]
