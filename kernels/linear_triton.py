"""Triton skinny GEMM (GEMV) for decode: ``y [M, N] = x [M, K] @ W [N, K]ᵀ (+ b)`` for small M.

At batch 1 a decode step is a chain of matrix-vector products bound by reading the weights
once.  cuBLAS picks split-K tiles for some of these shapes (plus a separate reduce kernel) and
reaches ~75% of copy bandwidth on the 33–50 MB attention projections of Llama-3-8B
(``benchmarks/results/decode/decode-roofline.md``).  Here every program owns ``BLOCK_N`` output
columns over the whole K: it streams its ``[BLOCK_N, K]`` slab of W once, in ``BLOCK_K`` chunks
pipelined ``num_stages`` deep, so no reduction pass is needed.  Two inner products:

- ``fma``: fp32 multiply-adds on CUDA cores into a ``[BLOCK_N, BLOCK_K]`` accumulator summed
  once at the end (the layout of gpt-fast's int8 GEMV and of split-K-free GEMV kernels
  generally); one activation row per program (M = 1).
- ``dot``: ``tl.dot`` of a 16-row activation tile (rows ≥ M masked) with the weight chunk, for
  1 ≤ M ≤ 16.

The kernel reads bf16 / fp16 / fp32 operands and accumulates in fp32; the output has x's dtype.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from .pdl import gdc_launch_dependents, gdc_wait, prefetch_l2, use_pdl


class GemvConfig(NamedTuple):
    """Launch parameters of :func:`gemv_triton`: the inner product (``"fma"``, M = 1 only, or
    ``"dot"``), output columns and K elements per program iteration, warps and pipeline
    stages."""

    kind: str
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int


@triton.jit
def _prefetch_then_wait(w_ptr, rn, N, K, stride_w, PF_LINES: tl.constexpr):  # type: ignore[no-untyped-def]
    """Under PDL: this program's first ``PF_LINES`` weight lines per row into L2 while the
    previous kernel finishes, then wait for it and let the next kernel start."""
    lines = tl.minimum(tl.arange(0, PF_LINES) * 64, K - 1)
    prefetch_l2(w_ptr + tl.minimum(rn, N - 1).to(tl.int64)[:, None] * stride_w + lines[None, :])
    gdc_wait()
    gdc_launch_dependents()


@triton.jit
def _gemv_fma_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, nw_ptr, N, K, stride_w, eps, HAS_BIAS: tl.constexpr, PROLOGUE: tl.constexpr,
    RESIDUAL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, USE_PDL: tl.constexpr, PF_LINES: tl.constexpr,
):  # fmt: skip
    # PROLOGUE 0: the input as is; 1: x · γ (γ at nw_ptr), 1/rms(x) applied in the epilogue; 2: silu(x[:K]) · x[K:]
    pid = tl.program_id(0)
    rn = pid * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN]
    nm = rn < N
    rk = tl.arange(0, BLOCK_K)  # [BK]
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    ss = tl.zeros((BLOCK_K,), dtype=tl.float32)  # squares summed elementwise: one reduction, after the loop
    w_rows = w_ptr + rn.to(tl.int64)[:, None] * stride_w  # [BN, 1]
    if USE_PDL:
        _prefetch_then_wait(w_ptr, rn, N, K, stride_w, PF_LINES)
    if RESIDUAL:  # issued before the weight stream so its latency hides behind it
        r = tl.load(y_ptr + rn, mask=nm, other=0.0).to(tl.float32)  # [BN]
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        km = kk < K
        x = tl.load(x_ptr + kk, mask=km, other=0.0).to(tl.float32)  # [BK]
        if PROLOGUE == 1:
            ss += x * x
            x = x * tl.load(nw_ptr + kk, mask=km, other=0.0).to(tl.float32)
        elif PROLOGUE == 2:
            x = x / (1.0 + tl.exp(-x)) * tl.load(x_ptr + K + kk, mask=km, other=0.0).to(tl.float32)
        w = tl.load(w_rows + kk[None, :], mask=nm[:, None] & km[None, :], other=0.0)  # [BN, BK]
        acc += w.to(tl.float32) * x[None, :]
    y = tl.sum(acc, axis=1)  # [BN]
    if PROLOGUE == 1:
        y *= tl.rsqrt(tl.sum(ss, axis=0) / K + eps)
    if HAS_BIAS:
        y += tl.load(b_ptr + rn, mask=nm, other=0.0).to(tl.float32)
    if RESIDUAL:  # y_ptr is the residual stream: each program adds into its own columns only
        y += r
    tl.store(y_ptr + rn, y.to(y_ptr.dtype.element_ty), mask=nm)


@triton.jit
def _gemv_dot_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_x, stride_w, stride_y,
    HAS_BIAS: tl.constexpr, RESIDUAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    USE_PDL: tl.constexpr, PF_LINES: tl.constexpr,
):  # fmt: skip
    # No prologues: math on x before tl.dot (norm, SwiGLU) slowed the decode step (the decode results at commit 7009897)
    pid = tl.program_id(0)
    rm = tl.arange(0, BLOCK_M)  # [BM]
    mm = rm < M
    rn = pid * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN]
    nm = rn < N
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    x_rows = x_ptr + rm.to(tl.int64)[:, None] * stride_x  # [BM, 1]
    w_rows = w_ptr + rn.to(tl.int64)[:, None] * stride_w  # [BN, 1]
    out = y_ptr + rm.to(tl.int64)[:, None] * stride_y + rn[None, :]  # [BM, BN]
    om = mm[:, None] & nm[None, :]
    if USE_PDL:
        _prefetch_then_wait(w_ptr, rn, N, K, stride_w, PF_LINES)
    if RESIDUAL:  # issued before the weight stream so its latency hides behind it
        r = tl.load(out, mask=om, other=0.0).to(tl.float32)  # [BM, BN]
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        km = kk < K
        w = tl.load(w_rows + kk[None, :], mask=nm[:, None] & km[None, :], other=0.0)  # [BN, BK]
        x = tl.load(x_rows + kk[None, :], mask=mm[:, None] & km[None, :], other=0.0).to(w.dtype)  # [BM, BK]
        acc = tl.dot(x, tl.trans(w), acc)  # [BM, BN]
    if HAS_BIAS:
        acc += tl.load(b_ptr + rn, mask=nm, other=0.0).to(tl.float32)[None, :]
    if RESIDUAL:  # y_ptr is the residual stream: each program adds into its own columns only
        acc += r
    tl.store(out, acc.to(y_ptr.dtype.element_ty), mask=om)


DOT_BLOCK_M = 16


def gemv_triton(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    config: GemvConfig,
    *,
    norm_weight: torch.Tensor | None = None,
    eps: float = 0.0,
    gated: bool = False,
    residual: torch.Tensor | None = None,
) -> torch.Tensor:
    """``act(x) [M, K] @ weight [N, K]ᵀ + bias [N]`` → ``[M, N]`` in x's dtype, with the decode
    layer's neighbours fused in:

    - ``norm_weight`` (γ ``[K]``, ``fma`` only): ``act(x) = rms_norm(x) · γ`` (RMSNorm, eps ``eps``).  γ is
      applied to each input chunk in the K loop and the row's ``1 / rms`` — accumulated from the
      same chunks — scales the output once in the epilogue, so the weight stream is untouched (no
      second pass over x; this is what made the two-pass prologue of b37b008 slow).
    - ``gated`` (``fma`` only): ``x`` is ``[M, 2K]`` = ``[gate | up]`` and ``act(x) = silu(gate) · up``
      (SwiGLU).  The ``dot`` kernel takes neither prologue: math on x before ``tl.dot`` slowed
      the decode step (the decode results at commit 7009897).
    - ``residual`` (``[M, N]``, x's dtype, rows contiguous): the result is added into it in
      place (each program owns its output columns, so reading and writing them is race-free)
      and ``residual`` is returned.

    Products and the norm run in float32 without the unfused path's intermediate bf16 roundings.
    ``weight`` and ``x`` must be contiguous along K; ``config.kind == "fma"`` needs M = 1,
    ``"dot"`` M ≤ 16.  Raises ``ValueError`` otherwise."""
    k = weight.shape[1] if weight.dim() == 2 else -1
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != (2 * k if gated else k):
        raise ValueError(f"gemv: x {tuple(x.shape)} and weight {tuple(weight.shape)} do not chain (gated={gated})")
    if x.stride(1) != 1 or weight.stride(1) != 1:
        raise ValueError("gemv: x and weight must be contiguous along K")
    if norm_weight is not None and (gated or norm_weight.shape != (k,)):
        raise ValueError(f"gemv: norm_weight must be [{k}] and excludes gated, got {tuple(norm_weight.shape)}, gated={gated}")
    m = x.shape[0]
    n = weight.shape[0]
    if residual is not None:
        if residual.shape != (m, n) or residual.dtype != x.dtype or residual.stride(1) != 1:
            got = f"{tuple(residual.shape)} {residual.dtype}"
            raise ValueError(f"gemv: residual must be [{m}, {n}] {x.dtype} with contiguous rows, got {got}")
        y = residual
    else:
        y = torch.empty((m, n), dtype=x.dtype, device=x.device)  # [M, N]
    if m == 0:
        return y
    grid = (triton.cdiv(n, config.block_n),)
    b = bias if bias is not None else weight
    nw = norm_weight if norm_weight is not None else weight
    prologue = 1 if norm_weight is not None else 2 if gated else 0
    pdl = use_pdl(x)
    pf_lines = max(1, 2 * config.block_k // 64)  # the first two K chunks of each row, in 128-byte lines of 64 bf16
    if config.kind == "fma":
        if m != 1:
            raise ValueError(f"gemv 'fma' takes one row, got M={m}")
        _gemv_fma_kernel[grid](
            x, weight, b, y, nw, n, k, weight.stride(0), eps, HAS_BIAS=bias is not None, PROLOGUE=prologue,
            RESIDUAL=residual is not None, BLOCK_N=config.block_n, BLOCK_K=config.block_k, USE_PDL=pdl, PF_LINES=pf_lines,
            num_warps=config.num_warps, num_stages=config.num_stages, launch_pdl=pdl,
        )  # fmt: skip
    elif config.kind == "dot":
        if m > DOT_BLOCK_M:
            raise ValueError(f"gemv 'dot' takes at most {DOT_BLOCK_M} rows, got M={m}")
        if prologue:
            raise ValueError("gemv 'dot' has no norm / gated prologue (run rms_norm / silu_and_mul first, or use 'fma')")
        _gemv_dot_kernel[grid](
            x, weight, b, y, m, n, k, x.stride(0), weight.stride(0), y.stride(0), HAS_BIAS=bias is not None,
            RESIDUAL=residual is not None, BLOCK_M=DOT_BLOCK_M, BLOCK_N=config.block_n, BLOCK_K=config.block_k, USE_PDL=pdl,
            PF_LINES=pf_lines, num_warps=config.num_warps, num_stages=config.num_stages, launch_pdl=pdl,
        )  # fmt: skip
    else:
        raise ValueError(f"gemv kind must be 'fma' or 'dot', got {config.kind!r}")
    return y


# Configurations measured faster than cuBLAS (by ≥ 2%) on an H200 for Llama-3-8B projection
# shapes (N, K), from ``python benchmarks/decode_micro.py`` (benchmarks/results/decode/decode-micro.md):
# the M = 1 choice and the 2 ≤ M ≤ 8 choice (measured at M = 8); other shapes stay on cuBLAS.
# qkv (M = 1): the fma kernel with the input RMSNorm fused in, chosen inside the decode graph
# (``decode_roofline.py --gemv``, the decode results at commit 7009897): a 4.236 ms graph against 4.353 ms
# for the previous code (norm kernel + cuBLAS qkv) on the same lease.
TUNED: dict[tuple[int, int], tuple[GemvConfig | None, GemvConfig | None]] = {
    (6144, 4096): (GemvConfig("fma", 16, 512, 4, 3), None),  # qkv
    (4096, 4096): (GemvConfig("fma", 4, 1024, 4, 3), GemvConfig("dot", 32, 256, 4, 4)),  # o_proj
    (28672, 4096): (GemvConfig("dot", 64, 256, 8, 3), None),  # gate_up
    (128256, 4096): (GemvConfig("dot", 64, 128, 4, 4), GemvConfig("dot", 64, 128, 4, 4)),  # lm_head
}
DEFAULT = GemvConfig("dot", 32, 256, 4, 4)
MAX_M = 8


def tuned_config(n: int, k: int, m: int) -> GemvConfig | None:
    """The measured configuration for ``[m, k] @ [n, k]ᵀ``, or None (cuBLAS is as fast)."""
    if not 1 <= m <= MAX_M:
        return None
    pair = TUNED.get((n, k))
    if pair is None:
        return None
    return pair[0] if m == 1 else pair[1]
