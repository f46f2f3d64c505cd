"""KV memory: the req-to-token pool, the token-to-KV pool (page size 1) and its slot allocator.

Layout after SGLang / mini-sglang: a request owns one row of the req-to-token pool mapping its
token positions to KV slots; slots index per-layer K and V buffers ``[num_slots, kv_heads,
head_dim]``.  Slot 0 is reserved as a padding target (never allocated), so padded batches can
write there harmlessly.  The allocator is a free list on the host.
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
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


@dataclass(frozen=True)
class MemoryConfig:
    """How large the pools are.

    ``max_total_tokens``: KV slots (tokens) to allocate; 0 means derive it from
    ``mem_fraction`` of the free device memory (CUDA) or of the available host memory (CPU).
    ``max_running_requests``: rows of the req-to-token pool.  ``max_context``: its columns.
    """

    max_total_tokens: int = 0
    mem_fraction: float = 0.5
    max_running_requests: int = 256
    max_context: int = 4096

    def __post_init__(self) -> None:
        if self.max_total_tokens < 0:
            raise ValueError(f"max_total_tokens must be ≥ 0, got {self.max_total_tokens}")
        if not 0.0 < self.mem_fraction <= 0.95:
            raise ValueError(f"mem_fraction must be in (0, 0.95], got {self.mem_fraction}")
        if self.max_running_requests < 1:
            raise ValueError(f"max_running_requests must be ≥ 1, got {self.max_running_requests}")
        if self.max_context < 2:
            raise ValueError(f"max_context must be ≥ 2, got {self.max_context}")


def kv_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype) -> int:
    """Bytes of K and V for one token across all layers."""
    return 2 * num_layers * num_kv_heads * head_dim * torch.empty((), dtype=dtype).element_size()


def capacity_from_memory(cfg: MemoryConfig, per_token_bytes: int, device: torch.device) -> int:
    """KV slots that fit in ``cfg.mem_fraction`` of the free memory of ``device``, at most
    ``max_running_requests × max_context`` (every row full)."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
    else:
        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            free = 4 << 30
    return max(16, min(int(free * cfg.mem_fraction) // per_token_bytes, cfg.max_running_requests * cfg.max_context))


class ReqToTokenPool:
    """``int64 [max_reqs, max_context]`` host table: request row × position → KV slot.

    Kept on the host (``req_to_token_cpu``): the scheduler reads and writes it every step, and
    the attention plan copies the needed slots to the device once per forward.
    """

    def __init__(self, max_reqs: int, max_context: int) -> None:
        self.max_context = max_context
        self.req_to_token_cpu = torch.zeros((max_reqs, max_context), dtype=torch.int64)
        self._free = list(range(max_reqs - 1, -1, -1))

    @property
    def available(self) -> int:
        return len(self._free)

    def alloc(self) -> int | None:
        """A free row index, or None when all rows are in use."""
        return self._free.pop() if self._free else None

    def free(self, row: int) -> None:
        self._free.append(row)


class KVAllocator:
    """Free list of KV slots ``1..capacity`` (slot 0 is padding).  ``alloc`` is all-or-nothing."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"KV capacity must be ≥ 1 slot, got {capacity}")
        self.capacity = capacity
        self._free_slots_cpu = torch.arange(1, capacity + 1, dtype=torch.int64)
        self._num_free = capacity

    @property
    def available(self) -> int:
        return self._num_free

    def alloc(self, n: int) -> torch.Tensor | None:
        """``int64 [n]`` host tensor of slots, or None when fewer than ``n`` are free."""
        if n > self._num_free:
            return None
        start = self._num_free - n
        out = self._free_slots_cpu[start : self._num_free].clone()
        self._num_free = start
        return out

    def free(self, slots_cpu: torch.Tensor) -> None:
        """Return ``slots_cpu`` (``int64 [n]`` host tensor) to the free list."""
        assert slots_cpu.is_cpu
        n = int(slots_cpu.numel())
        if n == 0:
            return
        if self._num_free + n > self.capacity:
            raise RuntimeError(f"KV double free: {self._num_free} free + {n} returned > capacity {self.capacity}")
        self._free_slots_cpu[self._num_free : self._num_free + n] = slots_cpu
        self._num_free += n


class KVPool:
    """Per-layer K and V buffers ``[capacity + 1, kv_heads, head_dim]`` on the model device."""

    def __init__(self, capacity: int, num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device) -> None:
        self.capacity = capacity
        self.dtype = dtype
        self.device = device
        shape = (capacity + 1, num_kv_heads, head_dim)
        # uninitialized: a slot is always written before it is read
        self.k_buffers = [torch.empty(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.v_buffers = [torch.empty(shape, dtype=dtype, device=device) for _ in range(num_layers)]

    def store(self, layer_id: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write ``k``, ``v`` (``[T, kv_heads, head_dim]``) at ``slots`` (``int64 [T]`` on device)."""
        self.k_buffers[layer_id][slots] = k.to(self.dtype)
        self.v_buffers[layer_id][slots] = v.to(self.dtype)
