"""The attention-backend interface and its torch implementation (CPU and CUDA).

A backend is planned once per forward (:meth:`AttentionBackend.plan`) from the batch layout and
then called by every layer with that layer's q, k, v.  It stores the new k, v into the KV pool at
the batch's ``out_cache_loc`` and attends each query to its request's cached keys (paged, page
size 1), causally within an extend and within the layer's sliding window.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import NamedTuple

import torch
import torch.nn.functional as F

from structgen import kernels
from structgen.runtime.memory import KVPool, ReqToTokenPool
from structgen.runtime.staging import to_device


class ForwardBatch(NamedTuple):
    """One forward's layout, built on the host by the scheduler.

    ``T`` tokens of ``B`` requests flattened in request order; request ``b`` contributes
    ``extend_lens[b]`` tokens at positions ``prefix_lens[b] ..`` (``prefix_lens[b]`` tokens already
    have KV).  A decode is an extend of 1.  ``sample_rows`` (``[S]``) are the rows of ``T`` whose
    logits are needed (a request's last token when its whole pending input is in this forward).
    """

    input_ids_cpu: torch.Tensor  # int64 [T]
    positions_cpu: torch.Tensor  # int64 [T]
    out_cache_loc_cpu: torch.Tensor  # int64 [T]
    req_pool_indices: list[int]  # [B]
    prefix_lens: list[int]  # [B]
    extend_lens: list[int]  # [B]
    sample_rows: list[int]  # [S]

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids_cpu.numel())


def flatten_extend(batch: ForwardBatch, max_rows: int, max_kv_ratio: float = 2.0) -> ForwardBatch | None:
    """``batch`` as a batch of decodes, one row per token: the token at position ``p`` of a
    request becomes a row of that request extending 1 token at ``p``, so it attends to the
    request's KV up to itself (every token's K/V is stored before any row attends, so a chain's
    later tokens see its earlier ones: the causal extend, row by row).  Inputs and KV slots keep
    their order; every row is a sample row (the caller keeps ``batch.sample_rows`` of the
    logits).  A decode kernel then serves a batch of decodes carrying a few jump-forward
    chains, at the price of reading a chain's KV once per token.  None when ``batch`` is
    already all decodes, has more than ``max_rows`` tokens, or the rows would read more than
    ``max_kv_ratio`` times the KV the extend reads."""
    n = batch.num_tokens
    if n > max_rows or all(e == 1 for e in batch.extend_lens):
        return None
    rows: list[int] = []
    prefix: list[int] = []
    kv_extend = kv_rows = 0
    for row, p, e in zip(batch.req_pool_indices, batch.prefix_lens, batch.extend_lens):
        rows += [row] * e
        prefix += range(p, p + e)
        kv_extend += p + e
        kv_rows += e * p + e * (e + 1) // 2  # row i reads p + i + 1 slots
    if kv_rows > max_kv_ratio * kv_extend:
        return None
    return ForwardBatch(batch.input_ids_cpu, batch.positions_cpu, batch.out_cache_loc_cpu, rows, prefix, [1] * n, list(range(n)))


class AttentionBackend(ABC):
    """Paged attention over a :class:`KVPool`."""

    def __init__(self, kv_pool: KVPool, req_to_token: ReqToTokenPool) -> None:
        self.kv_pool = kv_pool
        self.req_to_token = req_to_token

    @abstractmethod
    def plan(self, batch: ForwardBatch) -> None:
        """Prepare index metadata for ``batch``; called once per forward before the layers.
        The req-to-token rows of the batch's requests must already hold the new tokens' slots."""

    _out_loc: torch.Tensor  # int64 [T] on the pool's device: the KV slots of this forward's tokens (set by plan)

    @abstractmethod
    def attend(self, layer_id: int, q: torch.Tensor, *, scale: float, window: int = 0) -> torch.Tensor:
        """Attention outputs ``[T, H, D]`` for ``q`` (``[T, H, D]``) over the paged KV of
        ``layer_id``, which already holds this forward's tokens.  ``window`` > 0 restricts each
        query to the last ``window`` positions (itself included)."""

    def forward(self, layer_id: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float, window: int = 0) -> torch.Tensor:
        """Store ``k``, ``v`` (``[T, KH, D]``) for ``layer_id``, then :meth:`attend` with ``q``."""
        self.kv_pool.store(layer_id, self._out_loc, k, v)
        return self.attend(layer_id, q, scale=scale, window=window)

    def forward_qkv(
        self,
        layer_id: int,
        qkv: torch.Tensor,
        positions: torch.Tensor,
        inv_freq: torch.Tensor,
        *,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        scale: float,
        window: int = 0,
    ) -> torch.Tensor:
        """Rotary embedding, KV store and attention for the fused projection ``qkv``
        ``[T, (H + 2 KH) · D]`` at ``positions`` (int64 ``[T]``; ``inv_freq`` float32
        ``[D / 2]``): one :func:`~structgen.kernels.rope_store_kv` launch rotates q in place
        and writes the rotated k and v to the pool, then :meth:`attend`.  Returns ``[T, H, D]``;
        ``qkv``'s k and v columns are left unspecified."""
        pool = self.kv_pool
        kernels.rope_store_kv(
            qkv, positions, inv_freq, self._out_loc, pool.k_buffers[layer_id], pool.v_buffers[layer_id], num_heads, num_kv_heads, head_dim
        )
        q = qkv[:, : num_heads * head_dim].view(-1, num_heads, head_dim)  # [T, H, D]
        return self.attend(layer_id, q, scale=scale, window=window)


class TorchAttentionBackend(AttentionBackend):
    """Reference backend: gathers each request's K/V pages and calls
    ``scaled_dot_product_attention`` with an explicit causal (and window) mask.  Works on CPU
    and CUDA; one SDPA call per request and layer."""

    def plan(self, batch: ForwardBatch) -> None:
        device = self.kv_pool.device
        table = self.req_to_token.req_to_token_cpu
        self._out_loc = to_device(batch.out_cache_loc_cpu, device)  # [T]
        self._segments: list[tuple[int, int, torch.Tensor, torch.Tensor]] = []
        self._masks: dict[tuple[int, int], torch.Tensor | None] = {}
        start = 0
        for row, prefix, n in zip(batch.req_pool_indices, batch.prefix_lens, batch.extend_lens):
            seq = prefix + n
            kv_idx = to_device(table[row, :seq].clone(), device)  # [L]
            q_pos = torch.arange(prefix, seq, device=device)  # [n]
            self._segments.append((start, start + n, kv_idx, q_pos))
            start += n

    def _mask(self, b: int, window: int) -> torch.Tensor | None:
        key = (b, window)
        if key not in self._masks:
            _s, _e, kv_idx, q_pos = self._segments[b]
            k_pos = torch.arange(kv_idx.numel(), device=kv_idx.device)  # [L]
            allowed = k_pos[None, :] <= q_pos[:, None]  # [n, L]
            if window > 0:
                allowed &= k_pos[None, :] > q_pos[:, None] - window
            self._masks[key] = allowed
        return self._masks[key]

    def attend(self, layer_id: int, q: torch.Tensor, *, scale: float, window: int = 0) -> torch.Tensor:
        pool = self.kv_pool
        k_buf, v_buf = pool.k_buffers[layer_id], pool.v_buffers[layer_id]
        out = torch.empty_like(q)  # [T, H, D]
        heads, kv_heads = q.shape[1], k_buf.shape[1]
        for b, (s, e, kv_idx, _q_pos) in enumerate(self._segments):
            kb = k_buf[kv_idx].to(q.dtype).transpose(0, 1)  # [KH, L, D]
            vb = v_buf[kv_idx].to(q.dtype).transpose(0, 1)
            if kv_heads != heads:
                kb = kb.repeat_interleave(heads // kv_heads, dim=0)  # [H, L, D]
                vb = vb.repeat_interleave(heads // kv_heads, dim=0)
            qb = q[s:e].transpose(0, 1)  # [H, n, D]
            o = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=self._mask(b, window), scale=scale)  # [H, n, D]
            out[s:e] = o.transpose(0, 1)
        return out


ATTENTION_BACKENDS = ("auto", "torch", "flashinfer")


def check_attention_backend(name: str) -> None:
    """Raises ``ValueError`` unless ``name`` is one of :data:`ATTENTION_BACKENDS`."""
    if name not in ATTENTION_BACKENDS:
        raise ValueError(f"attention backend {name!r} is not available; available: {', '.join(ATTENTION_BACKENDS)}")


def resolve_attention_backend(name: str, device: torch.device, dtype: torch.dtype) -> str:
    """``"torch"`` or ``"flashinfer"``.  ``"auto"`` takes FlashInfer on CUDA when it imports
    and the model runs in bfloat16 / float16, the torch backend otherwise.  Raises
    ``ValueError`` for an unknown name or an explicit ``"flashinfer"`` it cannot honour."""
    from structgen.runtime.flashinfer_backend import FLASHINFER_DTYPES, flashinfer_available  # imports this module

    check_attention_backend(name)
    usable = device.type == "cuda" and dtype in FLASHINFER_DTYPES and flashinfer_available()
    if name == "auto":
        return "flashinfer" if usable else "torch"
    if name == "flashinfer" and not usable:
        raise ValueError(
            f"attention backend 'flashinfer' needs CUDA, flashinfer installed and a bfloat16/float16 model (device {device}, dtype {dtype})"
        )
    return name
