"""Triton skinny GEMM (GEMV) for decode: ``y [M, N] = x [M, K] @ W [N, K]ᵀ (+ b)`` for small M.

At batch 1 a decode step is a chain of matrix-vector products bound by reading the weights
once.  cuBLAS picks split-K tiles for some of these shapes (plus a separate reduce kernel) and
reaches ~75% of copy bandwidth on the 33–50 MB attention projections of Llama-3-8B
(``benchmarks/results/decode-roofline.md``).  Here every program owns ``BLOCK_N`` output
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
def _gemv_fma_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, K, stride_w, HAS_BIAS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    rn = pid * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN]
    nm = rn < N
    rk = tl.arange(0, BLOCK_K)  # [BK]
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    w_rows = w_ptr + rn.to(tl.int64)[:, None] * stride_w  # [BN, 1]
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        km = kk < K
        x = tl.load(x_ptr + kk, mask=km, other=0.0).to(tl.float32)  # [BK]
        w = tl.load(w_rows + kk[None, :], mask=nm[:, None] & km[None, :], other=0.0)  # [BN, BK]
        acc += w.to(tl.float32) * x[None, :]
    y = tl.sum(acc, axis=1)  # [BN]
    if HAS_BIAS:
        y += tl.load(b_ptr + rn, mask=nm, other=0.0).to(tl.float32)
    tl.store(y_ptr + rn, y.to(y_ptr.dtype.element_ty), mask=nm)


@triton.jit
def _gemv_dot_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, r_ptr, nw_ptr, r_out_ptr, M, N, K, stride_x, stride_w, stride_y, stride_r, eps,
    HAS_BIAS: tl.constexpr, PROLOGUE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    # PROLOGUE 0: x as is; 1: rms_norm(x + r) · nw (program 0 writes x + r to r_out); 2: silu(x[:, :K]) · x[:, K:]
    pid = tl.program_id(0)
    rm = tl.arange(0, BLOCK_M)  # [BM]
    mm = rm < M
    rn = pid * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN]
    nm = rn < N
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    x_rows = x_ptr + rm.to(tl.int64)[:, None] * stride_x  # [BM, 1]
    w_rows = w_ptr + rn.to(tl.int64)[:, None] * stride_w  # [BN, 1]
    dt = w_ptr.dtype.element_ty
    if PROLOGUE == 1:  # first pass: each row's mean square of h = x + r (h rounded as the unfused kernel stores it)
        r_rows = r_ptr + rm.to(tl.int64)[:, None] * stride_r
        ss = tl.zeros((BLOCK_M,), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            kk = k0 + rk
            xm = mm[:, None] & (kk < K)[None, :]
            h = (tl.load(x_rows + kk[None, :], mask=xm, other=0.0).to(tl.float32)
                 + tl.load(r_rows + kk[None, :], mask=xm, other=0.0).to(tl.float32)).to(dt)  # fmt: skip
            if pid == 0:
                tl.store(r_out_ptr + rm.to(tl.int64)[:, None] * K + kk[None, :], h, mask=xm)
            hf = h.to(tl.float32)
            ss += tl.sum(hf * hf, axis=1)
        inv = tl.rsqrt(ss / K + eps)  # [BM]
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        km = kk < K
        xm = mm[:, None] & km[None, :]
        if PROLOGUE == 1:
            h = (tl.load(x_rows + kk[None, :], mask=xm, other=0.0).to(tl.float32)
                 + tl.load(r_rows + kk[None, :], mask=xm, other=0.0).to(tl.float32)).to(dt)  # fmt: skip
            normed = (h.to(tl.float32) * inv[:, None]).to(dt)
            nw = tl.load(nw_ptr + kk, mask=km, other=0.0).to(tl.float32)
            x = (nw[None, :] * normed.to(tl.float32)).to(dt)  # [BM, BK]
        elif PROLOGUE == 2:
            g = tl.load(x_rows + kk[None, :], mask=xm, other=0.0).to(tl.float32)
            u = tl.load(x_rows + K + kk[None, :], mask=xm, other=0.0)
            sg = (g / (1.0 + tl.exp(-g))).to(dt)
            x = (sg.to(tl.float32) * u.to(tl.float32)).to(dt)  # [BM, BK]
        else:
            x = tl.load(x_rows + kk[None, :], mask=xm, other=0.0).to(dt)  # [BM, BK]
        w = tl.load(w_rows + kk[None, :], mask=nm[:, None] & km[None, :], other=0.0)  # [BN, BK]
        acc = tl.dot(x, tl.trans(w), acc)  # [BM, BN]
    if HAS_BIAS:
        acc += tl.load(b_ptr + rn, mask=nm, other=0.0).to(tl.float32)[None, :]
    out = y_ptr + rm.to(tl.int64)[:, None] * stride_y + rn[None, :]
    tl.store(out, acc.to(y_ptr.dtype.element_ty), mask=mm[:, None] & nm[None, :])


DOT_BLOCK_M = 16


def _dot(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    y: torch.Tensor,
    config: GemvConfig,
    k: int,
    prologue: int,
    residual: torch.Tensor | None = None,
    norm_weight: torch.Tensor | None = None,
    residual_out: torch.Tensor | None = None,
    eps: float = 0.0,
) -> None:
    m, n = y.shape
    if m > DOT_BLOCK_M:
        raise ValueError(f"gemv 'dot' takes at most {DOT_BLOCK_M} rows, got M={m}")
    r = residual if residual is not None else x
    _gemv_dot_kernel[(triton.cdiv(n, config.block_n),)](
        x, weight, bias if bias is not None else weight, y, r, norm_weight if norm_weight is not None else weight,
        residual_out if residual_out is not None else y, m, n, k, x.stride(0), weight.stride(0), y.stride(0), r.stride(0), eps,
        HAS_BIAS=bias is not None, PROLOGUE=prologue, BLOCK_M=DOT_BLOCK_M, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )  # fmt: skip


def gemv_triton(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, config: GemvConfig) -> torch.Tensor:
    """``x [M, K] @ weight [N, K]ᵀ + bias [N]`` → ``[M, N]`` in x's dtype.

    ``weight`` and ``x`` must be contiguous along K; ``config.kind == "fma"`` needs M = 1,
    ``"dot"`` M ≤ 16.  Raises ``ValueError`` otherwise."""
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"gemv: x {tuple(x.shape)} and weight {tuple(weight.shape)} do not chain")
    if x.stride(1) != 1 or weight.stride(1) != 1:
        raise ValueError("gemv: x and weight must be contiguous along K")
    m, k = x.shape
    n = weight.shape[0]
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)  # [M, N]
    if m == 0:
        return y
    grid = (triton.cdiv(n, config.block_n),)
    b = bias if bias is not None else weight
    if config.kind == "fma":
        if m != 1:
            raise ValueError(f"gemv 'fma' takes one row, got M={m}")
        _gemv_fma_kernel[grid](
            x, weight, b, y, n, k, weight.stride(0), HAS_BIAS=bias is not None, BLOCK_N=config.block_n,
            BLOCK_K=config.block_k, num_warps=config.num_warps, num_stages=config.num_stages,
        )  # fmt: skip
    elif config.kind == "dot":
        _dot(x, weight, bias, y, config, k, 0)
    else:
        raise ValueError(f"gemv kind must be 'fma' or 'dot', got {config.kind!r}")
    return y


# Configurations measured faster than cuBLAS (by ≥ 2%) on an H200 for Llama-3-8B projection
# shapes (N, K), from ``python benchmarks/decode_micro.py`` (benchmarks/results/decode-micro.md):
# the M = 1 choice and the 2 ≤ M ≤ 8 choice (measured at M = 8); other shapes stay on cuBLAS.
TUNED: dict[tuple[int, int], tuple[GemvConfig | None, GemvConfig | None]] = {
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


def add_rms_norm_gemv_triton(
    x: torch.Tensor,
    residual: torch.Tensor,
    norm_weight: torch.Tensor,
    eps: float,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    config: GemvConfig,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(rms_norm(x + residual) · norm_weight) @ weightᵀ + bias`` and ``x + residual`` in one
    launch (``"dot"`` configs, M ≤ 16): every program recomputes the norm of the ``[M, K]``
    input (read from L2) before streaming its weight slab, and program 0 writes the new
    residual stream.  The rounding matches ``fused_add_rms_norm`` followed by the GEMV.
    Returns ``(y [M, N], residual_out [M, K])``; raises ``ValueError`` for bad shapes."""
    if config.kind != "dot":
        raise ValueError(f"the fused norm GEMV needs a 'dot' config, got {config.kind!r}")
    if x.shape != residual.shape or x.dim() != 2 or x.shape[1] != weight.shape[1] or norm_weight.shape != (x.shape[1],):
        raise ValueError(
            f"add_rms_norm_gemv: x {tuple(x.shape)}, residual {tuple(residual.shape)}, weight {tuple(weight.shape)} do not chain"
        )
    if x.stride(1) != 1 or residual.stride(1) != 1 or weight.stride(1) != 1 or x.dtype != weight.dtype:
        raise ValueError("add_rms_norm_gemv: operands must be contiguous along K and x must have the weight's dtype")
    m, k = x.shape
    y = torch.empty((m, weight.shape[0]), dtype=x.dtype, device=x.device)  # [M, N]
    res_out = torch.empty((m, k), dtype=x.dtype, device=x.device)  # [M, K]
    if m:
        _dot(x, weight, bias, y, config, k, 1, residual, norm_weight, res_out, eps)
    return y, res_out


def silu_mul_gemv_triton(gate_up: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, config: GemvConfig) -> torch.Tensor:
    """``(silu(gate) · up) @ weightᵀ + bias`` for ``gate_up = [gate | up]`` ``[M, 2K]`` in one
    launch (``"dot"`` configs, M ≤ 16), rounding as ``silu_and_mul`` followed by the GEMV.
    Returns ``[M, N]``; raises ``ValueError`` for bad shapes."""
    if config.kind != "dot":
        raise ValueError(f"the fused SiLU GEMV needs a 'dot' config, got {config.kind!r}")
    if gate_up.dim() != 2 or gate_up.shape[1] != 2 * weight.shape[1] or gate_up.stride(1) != 1 or weight.stride(1) != 1:
        raise ValueError(f"silu_mul_gemv: gate_up {tuple(gate_up.shape)} and weight {tuple(weight.shape)} do not chain")
    if gate_up.dtype != weight.dtype:
        raise ValueError("silu_mul_gemv: gate_up must have the weight's dtype")
    m, k = gate_up.shape[0], weight.shape[1]
    y = torch.empty((m, weight.shape[0]), dtype=gate_up.dtype, device=gate_up.device)  # [M, N]
    if m:
        _dot(gate_up, weight, bias, y, config, k, 2)
    return y


# Fused-prologue configurations (same H200 measurements: the standalone GEMV at these
# configurations is within 1% of cuBLAS or faster, and the fusion saves the norm / SiLU launch).
FUSED_TUNED: dict[tuple[int, int], GemvConfig] = {
    (6144, 4096): GemvConfig("dot", 32, 256, 4, 4),  # qkv after input_layernorm
    (28672, 4096): GemvConfig("dot", 64, 256, 8, 3),  # gate_up after post_attention_layernorm
    (4096, 14336): GemvConfig("dot", 32, 256, 4, 4),  # down after SiLU-and-mul
}


def fused_config(n: int, k: int, m: int) -> GemvConfig | None:
    """The configuration of a fused-prologue GEMV for ``[m, k] @ [n, k]ᵀ``, or None."""
    return FUSED_TUNED.get((n, k)) if 1 <= m <= MAX_M else None
