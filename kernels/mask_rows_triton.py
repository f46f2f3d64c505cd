"""Triton kernels applying precomputed FSM mask rows to logits, fused with temperature scaling,
and a variant fused with greedy argmax.

Per step only ``row_idx`` (``[B]`` int32) travels host → device; the rows themselves sit in a
device-resident pool ``[R, W]`` int32 uploaded once per grammar row (see
:class:`structgen.mask_pool.MaskRowPool`).  This is the precomputed-mask design of
outlines-core / SGLang's compressed FSM taken to the GPU, in place of per-step bitmask uploads
(xgrammar's ``apply_token_bitmask_inplace``).  Same contract as :mod:`.mask_rows_torch`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .mask_rows_torch import _check, _check_out

BLOCK_V = 2048


@triton.jit
def _mask_rows_kernel(
    logits_ptr,
    stride_l,
    row_idx_ptr,
    pool_ptr,
    stride_p,
    temp_ptr,
    vocab,
    vocab_limit,
    HAS_TEMP: tl.constexpr,
    BLOCK: tl.constexpr,
):
    b = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    in_range = offs < vocab
    row = tl.load(row_idx_ptr + b)
    # unconstrained rows (-1) read pool row 0 and ignore it: no scalar term in the load mask
    words = tl.load(pool_ptr + tl.maximum(row, 0).to(tl.int64) * stride_p + offs // 32, mask=in_range, other=0)
    allowed = (((words >> (offs % 32)) & 1) != 0) | (row < 0)
    allowed = allowed & (offs < vocab_limit)
    ptrs = logits_ptr + b.to(tl.int64) * stride_l + offs
    x = tl.load(ptrs, mask=in_range, other=0.0).to(tl.float32)
    if HAS_TEMP:
        t = tl.load(temp_ptr + b)
        x = x / tl.where(t > 0, t, 1.0)
    x = tl.where(allowed, x, float("-inf"))
    tl.store(ptrs, x.to(logits_ptr.dtype.element_ty), mask=in_range)


@triton.jit
def _masked_argmax_partial_kernel(
    logits_ptr,
    stride_l,
    row_idx_ptr,
    pool_ptr,
    stride_p,
    vocab,
    vocab_limit,
    best_val_ptr,
    best_idx_ptr,
    num_blocks,
    BLOCK: tl.constexpr,
):
    b = tl.program_id(0)
    blk = tl.program_id(1)
    offs = blk * BLOCK + tl.arange(0, BLOCK)
    in_range = offs < vocab
    row = tl.load(row_idx_ptr + b)
    # unconstrained rows (-1) read pool row 0 and ignore it: no scalar term in the load mask
    words = tl.load(pool_ptr + tl.maximum(row, 0).to(tl.int64) * stride_p + offs // 32, mask=in_range, other=0)
    allowed = (((words >> (offs % 32)) & 1) != 0) | (row < 0)
    allowed = allowed & (offs < vocab_limit) & in_range
    x = tl.load(logits_ptr + b.to(tl.int64) * stride_l + offs, mask=in_range, other=0.0).to(tl.float32)
    x = tl.where(allowed, x, float("-inf"))
    val, idx = tl.max(x, axis=0, return_indices=True, return_indices_tie_break_left=True)
    tl.store(best_val_ptr + b * num_blocks + blk, val)
    tl.store(best_idx_ptr + b * num_blocks + blk, blk * BLOCK + idx)


def _check_triton(logits: torch.Tensor, row_idx: torch.Tensor, pool: torch.Tensor) -> None:
    _check(logits, row_idx, pool)
    if logits.stride(1) != 1 or pool.stride(1) != 1:
        raise ValueError("logits and pool must be contiguous along the vocabulary")
    if pool.shape[0] == 0:
        raise ValueError("the mask-row pool is empty")


def apply_mask_rows_triton(
    logits: torch.Tensor,
    row_idx: torch.Tensor,
    pool: torch.Tensor,
    *,
    temperature: torch.Tensor | None = None,
    vocab_limit: int | None = None,
) -> None:
    """Triton version of :func:`~structgen.kernels.mask_rows_torch.apply_mask_rows_torch`
    (same arguments, errors and result).  Grid ``(B, ceil(V / 2048))``; reads and writes each
    logit once."""
    _check_triton(logits, row_idx, pool)
    batch, vocab = logits.shape
    if batch == 0:
        return
    temp = temperature if temperature is not None else row_idx  # placeholder pointer when unused
    grid = (batch, triton.cdiv(vocab, BLOCK_V))
    _mask_rows_kernel[grid](
        logits,
        logits.stride(0),
        row_idx,
        pool,
        pool.stride(0),
        temp,
        vocab,
        vocab if vocab_limit is None else vocab_limit,
        HAS_TEMP=temperature is not None,
        BLOCK=BLOCK_V,
        num_warps=8,
    )


@triton.jit
def _argmax_reduce_kernel(best_val_ptr, best_idx_ptr, out_ptr, num_blocks, BLOCK_B: tl.constexpr):
    """Row ``b``: the index of the first block holding the row's maximum, as int64."""
    b = tl.program_id(0)
    offs = tl.arange(0, BLOCK_B)
    vals = tl.load(best_val_ptr + b * num_blocks + offs, mask=offs < num_blocks, other=float("-inf"))
    _best, blk = tl.max(vals, axis=0, return_indices=True, return_indices_tie_break_left=True)
    tl.store(out_ptr + b, tl.load(best_idx_ptr + b * num_blocks + blk).to(tl.int64))


def masked_argmax_triton(
    logits: torch.Tensor, row_idx: torch.Tensor, pool: torch.Tensor, *, vocab_limit: int | None = None, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Triton version of :func:`~structgen.kernels.mask_rows_torch.masked_argmax_torch`: a
    per-block max/argmax kernel (grid ``(B, ceil(V / 2048))``) then a one-program-per-row
    reduction writing int64 ids (into ``out`` when given).  Reads each logit once and writes
    none."""
    _check_triton(logits, row_idx, pool)
    _check_out(out, logits)
    batch, vocab = logits.shape
    blocks = triton.cdiv(vocab, BLOCK_V)
    ids = out if out is not None else torch.empty(batch, dtype=torch.int64, device=logits.device)  # [B]
    if batch == 0:
        return ids
    best_val = torch.empty((batch, blocks), dtype=torch.float32, device=logits.device)  # [B, NB]
    best_idx = torch.empty((batch, blocks), dtype=torch.int32, device=logits.device)  # [B, NB]
    _masked_argmax_partial_kernel[(batch, blocks)](
        logits,
        logits.stride(0),
        row_idx,
        pool,
        pool.stride(0),
        vocab,
        vocab if vocab_limit is None else vocab_limit,
        best_val,
        best_idx,
        blocks,
        BLOCK=BLOCK_V,
        num_warps=8,
    )
    _argmax_reduce_kernel[(batch,)](best_val, best_idx, ids, blocks, BLOCK_B=triton.next_power_of_2(blocks), num_warps=1)
    return ids
