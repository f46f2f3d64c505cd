"""Constrained sampling on the logits' device: FSM mask rows → temperature → top-k → top-p → draw.

Each constrained row's mask is a row of the device-resident :class:`~.mask_pool.MaskRowPool`
(its cursor's FSM state; EOS only in accepting states; near ``max_tokens``, the state's row
restricted to tokens that can still end accepted in time: budget-aware completion), so a step
sends only ``B`` int32 row indices host → device; one kernel applies masks and temperature in place
(:func:`structgen.kernels.apply_mask_rows`), or masks and takes the greedy argmax when every row
is greedy (:func:`structgen.kernels.masked_argmax`).  Unconstrained rows allow every id the
tokenizer defines.  Random draws use one uniform number per row from the request's own host
generator and inverse-CDF selection on the device, so a seeded request samples the same tokens
whatever else is in the batch.  The only device → host transfer is the sampled ids.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from structgen.kernels import apply_mask_rows, masked_argmax

from .mask_pool import MaskRowPool
from .memory import to_device
from .request import Req

DEAD_END = -1
"""Sampled id of a request whose grammar state allows no token (the scheduler ends it with an error)."""


class Sampler:
    """Samples one token per row of a logits batch.

    ``vocab_size``: the model's logits width V; ``tokenizer_size``: ids the tokenizer defines
    (≤ V; higher ids are padding and never sampled); ``device``: where logits live (the mask
    pool is kept there, ``pool_rows`` rows); ``mask_backend`` goes to the kernel dispatcher.
    """

    def __init__(
        self, vocab_size: int, tokenizer_size: int, *, device: torch.device | None = None, mask_backend: str = "auto", pool_rows: int = 4096
    ) -> None:
        self.vocab_size = vocab_size
        self.vocab_limit = min(tokenizer_size, vocab_size)
        self.mask_backend = mask_backend
        self.pool = MaskRowPool(pool_rows, vocab_size, device or torch.device("cpu"))

    def sample(self, logits: torch.Tensor, reqs: Sequence[Req]) -> list[int]:
        """``logits``: float32 ``[S, V]`` on the pool's device (modified in place); returns S ids,
        ``DEAD_END`` (−1) for a request whose grammar state allows no token at all.

        The mask rows are looked up (and computed on first visit) here, after the forward was
        launched, so on CUDA that host work overlaps the GPU's forward."""
        assert logits.shape == (len(reqs), self.vocab_size), (tuple(logits.shape), len(reqs), self.vocab_size)
        device = logits.device
        dead: list[int] = []
        row_idx = to_device(self.pool.row_indices([r.cursor for r in reqs], dead, [r.tokens_left() for r in reqs]), device)  # [S] int32
        out = self._draw(logits, reqs, row_idx, device)
        for i in dead:
            out[i] = DEAD_END
        return out

    def _draw(self, logits: torch.Tensor, reqs: Sequence[Req], row_idx: torch.Tensor, device: torch.device) -> list[int]:
        pool = self.pool.rows_gpu
        temps = [r.params.temperature for r in reqs]
        if all(t <= 0 for t in temps):
            out = masked_argmax(logits, row_idx, pool, vocab_limit=self.vocab_limit, backend=self.mask_backend)  # [S]
            return out.tolist()  # type: ignore[no-any-return]
        temp_gpu = to_device(torch.tensor(temps, dtype=torch.float32), device)  # [S]
        apply_mask_rows(logits, row_idx, pool, temperature=temp_gpu, vocab_limit=self.vocab_limit, backend=self.mask_backend)
        out = logits.argmax(dim=-1)  # [S]; greedy rows keep this
        rand_rows = [i for i, t in enumerate(temps) if t > 0]
        dev_idx = to_device(torch.tensor(rand_rows, dtype=torch.int64), device)  # [R]
        sub = logits[dev_idx]  # [R, V], already divided by temperature
        sub = _top_k(sub, [reqs[i].params.top_k for i in rand_rows])
        sub = _top_p(sub, [reqs[i].params.top_p for i in rand_rows])
        probs = torch.softmax(sub, dim=-1)  # [R, V]
        u = torch.cat([torch.rand(1, generator=reqs[i].generator, dtype=torch.float64) for i in rand_rows])  # [R] host
        cdf = probs.double().cumsum(dim=-1)  # [R, V]
        target = to_device(u, device)[:, None] * cdf[:, -1:]
        picked = torch.searchsorted(cdf, target, right=True).clamp_(max=self.vocab_limit - 1).squeeze(1)  # [R]
        out[dev_idx] = picked
        return out.tolist()  # type: ignore[no-any-return]


def _top_k(logits: torch.Tensor, ks: list[int]) -> torch.Tensor:
    """Keep each row's ``k`` largest logits (``k = 0``: all); ``logits`` ``[R, V]``."""
    if not any(ks):
        return logits
    vocab = logits.shape[-1]
    k_max = min(max(ks), vocab)
    top = logits.topk(k_max, dim=-1).values  # [R, k_max]
    kk = to_device(torch.tensor([min(k, vocab) if k > 0 else k_max for k in ks]) - 1, logits.device)  # [R]
    thresh = top.gather(1, kk[:, None])  # [R, 1]
    off = to_device(torch.tensor([k == 0 for k in ks]), logits.device)[:, None]
    return logits.masked_fill((logits < thresh) & ~off, float("-inf"))


def _top_p(logits: torch.Tensor, ps: list[float]) -> torch.Tensor:
    """Keep the smallest set of top logits whose probability reaches ``p`` per row (nucleus
    sampling, Holtzman et al. 2020); ``p ≥ 1`` keeps all.  ``logits`` ``[R, V]``."""
    if all(p >= 1.0 for p in ps):
        return logits
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # [R, V]
    probs = torch.softmax(sorted_logits, dim=-1)
    before = probs.cumsum(dim=-1) - probs  # mass strictly above each token
    p = to_device(torch.tensor(ps, dtype=torch.float32), logits.device).to(probs.dtype)[:, None]
    drop = before >= p  # keeps the smallest prefix reaching p (always the top token)
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.empty_like(logits).scatter_(1, order, sorted_logits)
