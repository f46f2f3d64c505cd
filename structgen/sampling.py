"""Constrained sampling: token bitmask → temperature → top-k → top-p → draw.

The bitmask of each constrained row comes from its cursor's FSM state (EOS only in accepting
states); unconstrained rows allow every id the tokenizer defines.  Draws use one uniform number
per row from the request's own host generator and inverse-CDF selection on the device, so a
seeded request samples the same tokens whatever else is in the batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from structgen.kernels import apply_token_bitmask_inplace

from .memory import to_device
from .request import Req


class Sampler:
    """Samples one token per row of a logits batch.

    ``vocab_size``: the model's logits width V; ``tokenizer_size``: ids the tokenizer defines
    (≤ V; higher ids are padding and never sampled).  ``mask_backend`` goes to the kernel
    dispatcher.
    """

    def __init__(self, vocab_size: int, tokenizer_size: int, *, mask_backend: str = "auto") -> None:
        self.vocab_size = vocab_size
        self.tokenizer_size = tokenizer_size
        self.words = (vocab_size + 31) // 32
        self.mask_backend = mask_backend
        allowed = np.zeros(self.words * 32, dtype=bool)
        allowed[: min(tokenizer_size, vocab_size)] = True
        self._open_row = np.packbits(allowed, bitorder="little").view("<i4")  # [W]

    def bitmask(self, reqs: Sequence[Req]) -> np.ndarray | None:
        """``int32 [S, W]`` host bitmask for ``reqs`` or None when nothing is masked."""
        if self.tokenizer_size >= self.words * 32 and all(r.cursor is None for r in reqs):
            return None
        out = np.empty((len(reqs), self.words), dtype=np.int32)
        for i, r in enumerate(reqs):
            if r.cursor is None:
                out[i] = self._open_row
            else:
                row = r.cursor.fsm.mask_row(r.cursor.state)  # [W_tok]
                n = min(row.shape[0], self.words)
                out[i, :n] = row[:n]
                out[i, n:] = 0
                out[i] &= self._open_row
        return out

    def sample(self, logits: torch.Tensor, reqs: Sequence[Req]) -> list[int]:
        """``logits``: float32 ``[S, V]`` (modified in place); returns S token ids."""
        assert logits.shape == (len(reqs), self.vocab_size), (tuple(logits.shape), len(reqs), self.vocab_size)
        mask = self.bitmask(reqs)
        if mask is not None:
            apply_token_bitmask_inplace(logits, to_device(torch.from_numpy(mask), logits.device), backend=self.mask_backend)
        out = logits.argmax(dim=-1)  # [S]
        rand_rows = [i for i, r in enumerate(reqs) if r.params.temperature > 0]
        if rand_rows:
            idx = torch.tensor(rand_rows, dtype=torch.int64)
            dev_idx = to_device(idx, logits.device)
            sub = logits[dev_idx]  # [R, V]
            temps = torch.tensor([reqs[i].params.temperature for i in rand_rows], dtype=torch.float32)
            sub = sub / to_device(temps, logits.device)[:, None]
            sub = _top_k(sub, [reqs[i].params.top_k for i in rand_rows])
            sub = _top_p(sub, [reqs[i].params.top_p for i in rand_rows])
            probs = torch.softmax(sub, dim=-1)  # [R, V]
            u = torch.cat([torch.rand(1, generator=reqs[i].generator, dtype=torch.float64) for i in rand_rows])  # [R] host
            cdf = probs.double().cumsum(dim=-1)  # [R, V]
            target = to_device(u, logits.device)[:, None] * cdf[:, -1:]
            picked = torch.searchsorted(cdf, target, right=True).clamp_(max=self.vocab_size - 1).squeeze(1)  # [R]
            out[dev_idx] = picked
        return out.tolist()


def _top_k(logits: torch.Tensor, ks: list[int]) -> torch.Tensor:
    if not any(ks):
        return logits
    vocab = logits.shape[-1]
    k_max = min(max(ks), vocab)
    top = logits.topk(k_max, dim=-1).values  # [R, k_max]
    kk = torch.tensor([min(k, vocab) if k > 0 else k_max for k in ks], device=logits.device) - 1
    thresh = top.gather(1, kk[:, None])  # [R, 1]
    off = torch.tensor([k == 0 for k in ks], device=logits.device)[:, None]
    return logits.masked_fill((logits < thresh) & ~off, float("-inf"))


def _top_p(logits: torch.Tensor, ps: list[float]) -> torch.Tensor:
    if all(p >= 1.0 for p in ps):
        return logits
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # [R, V]
    probs = torch.softmax(sorted_logits, dim=-1)
    before = probs.cumsum(dim=-1) - probs  # mass strictly above each token
    p = torch.tensor(ps, device=logits.device, dtype=probs.dtype)[:, None]
    drop = before >= p  # keeps the smallest prefix reaching p (always the top token)
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.empty_like(logits).scatter_(1, order, sorted_logits)
