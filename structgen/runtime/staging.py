"""Host → device copies: the one pinned, non-blocking path (``to_device``) through a pinned
staging ring per device (``PinnedStaging``), reused once the copies that read a region are done."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Any

import torch


class PinnedStaging:
    """A ring of pinned host memory that stages host→device copies without allocating.

    ``torch.Tensor.pin_memory()`` draws on PyTorch's caching host allocator, which calls
    ``cudaHostAlloc`` whenever a new size class appears or every cached block of a size is
    still in flight: a host-blocking driver call in the middle of a decode step.  Here one
    ``nbytes`` pinned buffer is carved into 256-byte aligned regions in ring order
    (:meth:`alloc`); :meth:`commit` records one CUDA event on ``stream`` covering the regions
    handed out since the last commit, and a region is reused only after its event completed.
    Events on one stream complete in order, so the ring waits (``cudaEventSynchronize``) only
    when the GPU lags a whole ring behind the host.  A request larger than half the ring is
    answered with a fresh pinned tensor.  Not thread-safe: the engine loop owns it.  After
    mini-sglang's pinned host→device helper and SGLang's pinned staging buffers.
    """

    ALIGN = 256

    def __init__(self, nbytes: int, device: torch.device, *, pin: bool = True, event_factory: Callable[[], Any] | None = None) -> None:
        """``nbytes``: ring size; ``device``: copy target.  ``pin`` / ``event_factory`` exist
        for CPU tests of the ring logic (a fake event with ``record``, ``query``,
        ``synchronize``).  Raises ``ValueError`` for a ring under 512 bytes."""
        if nbytes < self.ALIGN * 2:
            raise ValueError(f"PinnedStaging needs at least {self.ALIGN * 2} bytes, got {nbytes}")
        self.device = device
        self.pin = pin
        self.buf_cpu = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pin)  # [nbytes]
        self.event_factory = event_factory or torch.cuda.Event
        self.head = 0
        self.pending: deque[tuple[int, int, Any]] = deque()  # committed (start, end, event), oldest first
        self.uncommitted: list[tuple[int, int]] = []
        self.free_events: list[Any] = []
        self.waits = 0  # times the ring had to wait for the GPU

    def alloc(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """A pinned host tensor of ``shape``/``dtype`` (contents undefined) that stays untouched
        until the copies issued before the next :meth:`commit` have run."""
        n = math.prod(shape) * dtype.itemsize
        size = max(self.ALIGN, -(-n // self.ALIGN) * self.ALIGN)
        cap = self.buf_cpu.numel()
        if size > cap // 2:
            return torch.empty(shape, dtype=dtype, pin_memory=self.pin)
        start = self.head if self.head + size <= cap else 0
        end = start + size
        self._reclaim(start, end)
        self.head = end
        self.uncommitted.append((start, end))
        return self.buf_cpu[start:end][:n].view(dtype).view(shape)

    def _reclaim(self, start: int, end: int) -> None:
        while self.pending and self.pending[0][2].query():
            self.free_events.append(self.pending.popleft()[2])
        last = -1
        for i, (s, e, _ev) in enumerate(self.pending):
            if s < end and start < e:
                last = i
        if last >= 0:  # the GPU has not yet read a region we need: wait for it (and all before it)
            self.waits += 1
            self.pending[last][2].synchronize()
            for _ in range(last + 1):
                self.free_events.append(self.pending.popleft()[2])
        assert not any(s < end and start < e for s, e in self.uncommitted), "staging ring overrun within one commit"

    def commit(self) -> None:
        """Record one event on the current stream after the copies reading the regions handed
        out since the last commit."""
        if not self.uncommitted:
            return
        start, end = self.uncommitted[0][0], self.uncommitted[-1][1]
        if end <= start:  # wrapped inside this commit: two spans, one event each
            self.pending.append((start, self.buf_cpu.numel(), self._record()))
            start = 0
        self.pending.append((start, end, self._record()))
        self.uncommitted.clear()

    def _record(self) -> Any:
        ev = self.free_events.pop() if self.free_events else self.event_factory()
        ev.record(torch.cuda.current_stream(self.device) if self.device.type == "cuda" else None)
        return ev

    def to_device(self, t_cpu: torch.Tensor) -> torch.Tensor:
        """Copy ``t_cpu`` through the ring to ``self.device`` (non-blocking) and commit."""
        assert t_cpu.is_cpu, "to_device copies host tensors"
        staged = self.alloc(tuple(t_cpu.shape), t_cpu.dtype)
        staged.copy_(t_cpu)
        out = staged.to(self.device, non_blocking=True)
        self.commit()
        return out


def pinned_staging(device: torch.device, nbytes: int = 64 << 20) -> PinnedStaging:
    """The process's staging ring for CUDA ``device`` (created on first use; a cache of a
    device resource, like PyTorch's caching host allocator, not configuration).  Raises
    ``ValueError`` for a device that is not CUDA (host tensors need no staging there)."""
    if device.type != "cuda":
        raise ValueError(f"pinned staging is for CUDA devices, got {device}")
    index = device.index if device.index is not None else torch.cuda.current_device()
    ring = _STAGING.get(index)
    if ring is None:
        ring = _STAGING[index] = PinnedStaging(nbytes, torch.device("cuda", index))
    return ring


_STAGING: dict[int, PinnedStaging] = {}


def to_device(t_cpu: torch.Tensor, device: torch.device) -> torch.Tensor:
    """The one host→device copy helper: through the device's pinned staging ring,
    non-blocking, on CUDA (no pinned allocation per call); identity on CPU."""
    assert t_cpu.is_cpu, "to_device copies host tensors"
    if device.type == "cpu":
        return t_cpu
    return pinned_staging(device).to_device(t_cpu)
