"""``linear``: the decode GEMV dispatcher (Triton skinny GEMM for decode-sized M on measured
shapes, cuBLAS otherwise), with its optional RMSNorm / SwiGLU prologue and in-place residual
add, and ``adds_in_place``, whether that add is free."""

from __future__ import annotations

import functools
from types import ModuleType

import torch
import torch.nn.functional as F
from structgen.kernels.dispatch import resolve_backend, rms_norm, silu_and_mul


@functools.cache
def _linear_triton() -> ModuleType:
    from structgen.kernels import linear_triton

    return linear_triton


def _prologue(x: torch.Tensor, norm_weight: torch.Tensor | None, eps: float, gated: bool, backend: str) -> torch.Tensor:
    if norm_weight is not None:
        return rms_norm(x, norm_weight, eps, backend=backend)
    return silu_and_mul(x, backend=backend) if gated else x


def _decode_sized(x: torch.Tensor, weight: torch.Tensor) -> bool:
    return x.dim() == 2 and 1 <= x.shape[0] <= 8 and x.dtype == weight.dtype


def adds_in_place(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether ``linear(x, weight, residual=r)`` adds into ``r`` without a kernel of its own:
    on CUDA at decode-sized M (≤ 8), through the Triton GEMV's epilogue or cuBLAS's ``beta = 1``.
    Elsewhere a caller does better to keep the product and fuse the add into the next norm
    (``fused_add_rms_norm``): at M = 16 and 32 cuBLAS's ``beta = 1`` kernels slowed the decode
    step by 1.3–2.5% (the decode results at commit 7009897).  A query: changes nothing."""
    return x.is_cuda and _decode_sized(x, weight)


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    norm_weight: torch.Tensor | None = None,
    eps: float = 0.0,
    gated: bool = False,
    residual: torch.Tensor | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """``act(x) [M, K] @ weight [N, K]ᵀ + bias [N]`` → ``[M, N]``, optionally added into ``residual``.

    - ``norm_weight`` (γ ``[K]``, with ``eps``): ``act(x) = rms_norm(x) · γ``;
    - ``gated``: ``x`` is ``[M, 2K]`` = ``[gate | up]`` and ``act(x) = silu(gate) · up``;
    - ``residual`` ``[M, N]``: the result is added into it in place and ``residual`` is returned
      (the decoder's residual stream).

    ``"auto"`` on CUDA runs the Triton GEMV (:mod:`structgen.kernels.linear_triton`), with the
    residual add fused into its one launch (and the norm / gate too with the one-row ``fma``
    kernel; before a ``dot`` kernel they run as their own kernels), for decode-sized M (≤ 8) on the shapes
    where its measured configuration beats cuBLAS (``linear_triton.TUNED``); otherwise the ops
    run unfused (``rms_norm`` / ``silu_and_mul``, then ``F.linear`` (cuBLAS); on CUDA the residual
    add is cuBLAS's own ``beta = 1`` accumulation).  ``"triton"`` forces the GEMV for M ≤ 8 (a
    default configuration where none is tuned); ``"torch"`` always runs unfused on torch.
    Raises ``ValueError`` for shapes that do not chain."""
    chosen = resolve_backend(backend, x.device)  # an unknown backend is an error whatever the shape
    k = weight.shape[-1]
    if x.shape[-1] != (2 * k if gated else k):
        raise ValueError(f"linear: x {tuple(x.shape)} and weight {tuple(weight.shape)} do not chain (gated={gated})")
    if norm_weight is not None and gated:
        raise ValueError("linear: norm_weight and gated exclude each other")
    if norm_weight is not None and norm_weight.shape != (x.shape[-1],):
        raise ValueError(f"linear: norm_weight must be [{x.shape[-1]}], got {tuple(norm_weight.shape)}")
    if residual is not None and (residual.shape != (*x.shape[:-1], weight.shape[0]) or residual.dtype != x.dtype):
        raise ValueError(
            f"linear: residual must be {[*x.shape[:-1], weight.shape[0]]} {x.dtype}, got {list(residual.shape)} {residual.dtype}"
        )
    if _decode_sized(x, weight) and x.stride(1) == 1 and weight.stride(1) == 1:
        if chosen == "triton":
            lt = _linear_triton()
            cfg = lt.tuned_config(weight.shape[0], k, x.shape[0])
            if cfg is None and backend == "triton":
                cfg = lt.DEFAULT
            if cfg is not None:
                if cfg.kind != "fma":  # prologue math before tl.dot slowed the decode step (the decode results at commit 7009897)
                    x = _prologue(x, norm_weight, eps, gated, backend)
                    norm_weight, gated = None, False
                return lt.gemv_triton(x, weight, bias, cfg, norm_weight=norm_weight, eps=eps, gated=gated, residual=residual)  # type: ignore[no-any-return]
    x = _prologue(x, norm_weight, eps, gated, backend)
    if residual is None:
        return F.linear(x, weight, bias)
    if residual.is_cuda and x.dim() == 2:
        residual.addmm_(x, weight.t())  # cuBLAS C = A·Bᵀ + C: the add rides on the GEMM (split-K reduce included)
        if bias is not None:
            residual.add_(bias)
    else:
        residual.add_(F.linear(x, weight, bias))
    return residual
