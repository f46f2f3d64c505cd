"""Constrained sampling on the logits' device: FSM mask rows → temperature → top-k → top-p → draw.

Each constrained row's mask is a row of the device-resident :class:`~.mask_pool.MaskRowPool`
(its cursor's FSM state; EOS only in accepting states; near ``max_tokens``, the state's row
restricted to tokens that can still end accepted in time: budget-aware completion), so a step
sends only ``B`` int32 row indices host → device; one kernel applies masks and temperature in place
(:func:`structgen.kernels.apply_mask_rows`), or masks and takes the greedy argmax when every row
is greedy (:func:`structgen.kernels.masked_argmax`).  Unconstrained rows allow every id the
tokenizer defines.  Random draws use one uniform number per row from the request's own host
generator and inverse-CDF selection on the device, so a seeded request samples the same tokens
whatever else is in the batch.  The only device → host transfer is the sampled ids, and it is
asynchronous (:meth:`Sampler.launch`): the ids also stay on the device (:class:`FutureIds`), so
an overlapped scheduler launches the next forward on them before the host has read them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from structgen.engine.mask_pool import MaskRowPool
from structgen.engine.penalties import apply_penalties
from structgen.engine.request import Req
from structgen.fsm import GrammarCompileError
from structgen.kernels import apply_mask_rows, masked_argmax, resolve_placeholders
from structgen.runtime.staging import to_device

DEAD_END = -1
"""Sampled id of a request whose grammar state allows no token (the scheduler ends it with an error)."""


class FutureIds:
    """The device buffer holding the ids of the last sample launched, so the next forward can
    take them as input before the host has seen them (SGLang's future token map for its
    overlap scheduler).

    ``ids_gpu``: int64 ``[size]`` on ``device``.  A forward's input id ``placeholder(j) = −1 − j``
    (always negative) stands for ``ids_gpu[j]``: the ``j``-th sampled row of the last sample
    launched before that forward (stream order makes the read see it).  :meth:`resolve` replaces
    placeholders on the device; it is captured into the CUDA graphs, so ``ids_gpu`` never moves.
    """

    def __init__(self, size: int, device: torch.device) -> None:
        if size < 1:
            raise ValueError(f"FutureIds needs size ≥ 1, got {size}")
        self.size = size
        self.ids_gpu = torch.zeros(size, dtype=torch.int64, device=device)  # [size]

    @staticmethod
    def placeholder(row: int) -> int:
        """The input id standing for sampled row ``row`` (``−1 − row``)."""
        return -1 - row

    def resolve(self, input_ids: torch.Tensor) -> torch.Tensor:
        """``input_ids`` int64 ``[T]`` on the device with placeholders replaced by the ids they
        stand for (no host sync; one kernel on CUDA)."""
        return resolve_placeholders(input_ids, self.ids_gpu)  # [T]


class SampledIds:
    """The ids of one launched sample, copied to pinned host memory asynchronously.

    :meth:`result` waits for the copy (the only device → host sync of a step) and returns the
    ``n`` ids as a list, ``DEAD_END`` at the rows in ``dead``; computed once, then cached."""

    def __init__(self, ids_cpu: torch.Tensor, event: Any, n: int, dead: list[int]) -> None:
        self._ids_cpu = ids_cpu
        self._event = event
        self._n = n
        self._dead = dead
        self._out: list[int] | None = None

    def result(self) -> list[int]:
        if self._out is None:
            if self._event is not None:
                self._event.synchronize()
            out: list[int] = self._ids_cpu[: self._n].tolist()
            for i in self._dead:
                out[i] = DEAD_END
            self._out = out
        return self._out


class Sampler:
    """Samples one token per row of a logits batch.

    ``vocab_size``: the model's logits width V; ``tokenizer_size``: ids the tokenizer defines
    (≤ V; higher ids are padding and never sampled); ``device``: where logits live (the mask
    pool is kept there, ``pool_rows`` rows); ``mask_backend`` goes to the kernel dispatcher;
    ``future``: the buffer every launch writes its ids into (the model runner's, whose graphs
    read it; default: one of the sampler's own, grown as needed).
    """

    def __init__(
        self,
        vocab_size: int,
        tokenizer_size: int,
        *,
        device: torch.device | None = None,
        mask_backend: str = "auto",
        pool_rows: int = 4096,
        future: FutureIds | None = None,
        eos_ids: Sequence[int] = (),
    ) -> None:
        self.vocab_size = vocab_size
        self._eos_ids = sorted(set(eos_ids))
        self._eos_gpu: torch.Tensor | None = None  # int64 [E] on the logits' device
        self.vocab_limit = min(tokenizer_size, vocab_size)
        self.mask_backend = mask_backend
        self.device = device or torch.device("cpu")
        self.pool = MaskRowPool(pool_rows, vocab_size, self.device)
        self.future = future
        self._own_future = future is None
        self._host: list[torch.Tensor] = []  # two pinned int64 buffers used in turn (CUDA)
        self._events: list[Any] = []  # and their copy events
        self._free_rows: torch.Tensor | None = None  # int32 −1 row indices on the device (all-unconstrained steps)
        self._turn = 0
        self.rows_s = 0.0  # host seconds the last launch spent on mask rows (lookups, first visits, upload)

    def sample(self, logits: torch.Tensor, reqs: Sequence[Req]) -> list[int]:
        """:meth:`launch` every row and wait for the ids."""
        return self.launch(logits, reqs).result()

    def launch(self, logits: torch.Tensor, reqs: Sequence[Req], active: Sequence[bool] | None = None) -> SampledIds:
        """Sample from ``logits`` (float32 ``[S, V]`` on the pool's device, modified in place)
        without waiting for the device: the ids land in ``future.ids_gpu[:S]`` and are copied to
        the host asynchronously; the handle's ``result()`` gives S ids, ``DEAD_END`` (−1) for a
        request whose grammar state allows no token at all, or whose row met its grammar's
        limits (the :class:`GrammarCompileError` is then set as the request's ``error``).  Rows with ``active[i]`` False are
        drawn greedily without mask or random draw, and their ids mean nothing (a request whose
        sample an overlapped step made stale).  ``ValueError`` when ``active`` has not S entries;
        ``RuntimeError`` when S exceeds a given ``future`` buffer.

        The mask rows are looked up (and computed on first visit) here, after the forward was
        launched, so on CUDA that host work overlaps the GPU's forward."""
        n = len(reqs)
        assert logits.shape == (n, self.vocab_size), (tuple(logits.shape), n, self.vocab_size)
        device = logits.device
        on = [True] * n if active is None else list(active)
        if len(on) != n:
            raise ValueError(f"active has {len(on)} entries for {n} sampled rows")
        dead: list[int] = []
        cursors = [r.cursor if a else None for r, a in zip(reqs, on)]
        t0 = time.perf_counter()
        if any(c is not None for c in cursors):
            lefts = [r.tokens_left() if a else None for r, a in zip(reqs, on)]
            narrowed: list[int] = []
            failed: dict[int, GrammarCompileError] = {}
            row_idx = to_device(self.pool.row_indices(cursors, dead, lefts, narrowed, failed), device)  # [S] int32
            for i in narrowed:
                reqs[i].budget_narrowed = True  # its end will be reported as "length", not "stop"
            for i, exc in failed.items():
                reqs[i].error = exc  # drawn as DEAD_END: the scheduler ends it with this error
        else:
            row_idx = self._unconstrained_rows(n, device)  # [S] int32, all −1: no copy
        self.rows_s = time.perf_counter() - t0
        penalized: list[int] = []
        no_eos: list[int] = []
        for i, (r, a) in enumerate(zip(reqs, on)):
            if a and r.penalized():
                penalized.append(i)
            if a and r.suppress_eos():
                no_eos.append(i)
        if penalized:
            apply_penalties(logits, reqs, penalized)
        if no_eos and self._eos_ids:
            self._mask_eos(logits, no_eos)
        future = self._future(n, device)
        self._draw(logits, reqs, on, row_idx, device, future.ids_gpu[:n])  # [S] int64 on the device
        if device.type != "cuda":
            return SampledIds(future.ids_gpu[:n].clone(), None, n, dead)
        if not self._host or self._host[0].numel() < n:
            size = max(n, future.size)
            self._host = [torch.empty(size, dtype=torch.int64, pin_memory=True) for _ in range(2)]
            self._events = [torch.cuda.Event() for _ in range(2)]
        host, event = self._host[self._turn], self._events[self._turn]  # the other pair may belong to an unresolved handle
        self._turn ^= 1
        host[:n].copy_(future.ids_gpu[:n], non_blocking=True)
        event.record(torch.cuda.current_stream(device))
        return SampledIds(host, event, n, dead)

    def _mask_eos(self, logits: torch.Tensor, rows: list[int]) -> None:
        """EOS logits of ``rows`` to −inf, on the device (no sync)."""
        if self._eos_gpu is None or self._eos_gpu.device != logits.device:
            self._eos_gpu = torch.tensor(self._eos_ids, dtype=torch.int64, device=logits.device)  # [E]
        idx = to_device(torch.tensor(rows, dtype=torch.int64), logits.device)  # [R]
        logits[idx[:, None], self._eos_gpu[None, :]] = float("-inf")  # [R, E]

    def _unconstrained_rows(self, n: int, device: torch.device) -> torch.Tensor:
        if self._free_rows is None or self._free_rows.numel() < n:
            self._free_rows = torch.full((max(n, 256),), -1, dtype=torch.int32, device=device)
        return self._free_rows[:n]

    def _future(self, n: int, device: torch.device) -> FutureIds:
        if self.future is None or (self._own_future and self.future.size < n):
            self.future = FutureIds(max(n, 256), device)
        if n > self.future.size:
            raise RuntimeError(f"{n} sampled rows do not fit the future-ids buffer of {self.future.size}")
        return self.future

    def _draw(
        self, logits: torch.Tensor, reqs: Sequence[Req], on: list[bool], row_idx: torch.Tensor, device: torch.device, out: torch.Tensor
    ) -> None:
        """Write the sampled ids into ``out`` (int64 ``[S]`` on ``device``)."""
        pool = self.pool.rows_gpu
        temps = [r.params.temperature if a else 0.0 for r, a in zip(reqs, on)]
        if all(t <= 0 for t in temps):
            masked_argmax(logits, row_idx, pool, vocab_limit=self.vocab_limit, out=out, backend=self.mask_backend)
            return
        temp_gpu = to_device(torch.tensor(temps, dtype=torch.float32), device)  # [S]
        apply_mask_rows(logits, row_idx, pool, temperature=temp_gpu, vocab_limit=self.vocab_limit, backend=self.mask_backend)
        torch.argmax(logits, dim=-1, out=out)  # [S]; greedy rows keep this
        rand_rows = [i for i, t in enumerate(temps) if t > 0]
        dev_idx = to_device(torch.tensor(rand_rows, dtype=torch.int64), device)  # [R]
        sub = logits[dev_idx]  # [R, V], already divided by temperature
        sub = top_k_filter(sub, [reqs[i].params.top_k for i in rand_rows])
        sub = top_p_filter(sub, [reqs[i].params.top_p for i in rand_rows])
        probs = torch.softmax(sub, dim=-1)  # [R, V]
        u = torch.cat([torch.rand(1, generator=reqs[i].generator, dtype=torch.float64) for i in rand_rows])  # [R] host
        cdf = probs.double().cumsum(dim=-1)  # [R, V]
        target = to_device(u, device)[:, None] * cdf[:, -1:]
        picked = torch.searchsorted(cdf, target, right=True).clamp_(max=self.vocab_limit - 1).squeeze(1)  # [R]
        out[dev_idx] = picked


def top_k_filter(logits: torch.Tensor, ks: list[int]) -> torch.Tensor:
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


def top_p_filter(logits: torch.Tensor, ps: list[float]) -> torch.Tensor:
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
