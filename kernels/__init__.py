"""Logits-side and decoder kernels behind one dispatcher each (``backend="auto"``).

``import structgen.kernels`` never needs triton or flashinfer: a Triton implementation is
imported only when the dispatcher picks it.  ``"auto"`` picks Triton for CUDA tensors when
triton imports, the torch reference otherwise; ``"torch"`` and ``"triton"`` force one (the
Triton kernels also run on CPU tensors under ``TRITON_INTERPRET=1``, which is how CI tests them).

Kernels: precomputed FSM mask rows applied to logits (fused with temperature, or with greedy
argmax), RMSNorm (+ residual add), SiLU-and-mul, rotary embedding in place on the fused qkv
projection (alone, or fused with the KV-cache store), paged decode attention, and the decode
GEMV (skinny linear layers).  One implementation per file (``*_torch.py``, ``*_triton.py``);
the dispatchers are in :mod:`.dispatch` and :mod:`.gemv`.
"""

from structgen.kernels.dispatch import (
    BACKENDS,
    apply_mask_rows,
    decode_attention,
    decode_num_splits,
    fused_add_rms_norm,
    masked_argmax,
    resolve_backend,
    resolve_placeholders,
    rms_norm,
    rope_qkv_inplace,
    rope_store_kv,
    silu_and_mul,
    triton_available,
)
from structgen.kernels.gemv import adds_in_place, linear

__all__ = [
    "BACKENDS",
    "adds_in_place",
    "apply_mask_rows",
    "decode_attention",
    "decode_num_splits",
    "fused_add_rms_norm",
    "linear",
    "masked_argmax",
    "resolve_backend",
    "resolve_placeholders",
    "rms_norm",
    "rope_qkv_inplace",
    "rope_store_kv",
    "silu_and_mul",
    "triton_available",
]
