"""KV memory: the req-to-token pool, the token-to-KV pool (page size 1) and its slot allocator.

Layout after SGLang / mini-sglang: a request owns one row of the req-to-token pool mapping its
token positions to KV slots; slots index per-layer K and V buffers ``[num_slots, kv_heads,
head_dim]``.  Slot 0 is reserved as a padding target (never allocated), so padded batches can
write there harmlessly.  The allocator is a free list on the host.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class MemoryConfig:
    """How large the pools are.

    ``max_total_tokens``: KV slots (tokens) to allocate; 0 means derive it from
    ``mem_fraction`` of the free device memory (CUDA) or of the available host memory (CPU).
    ``max_context``: the req-to-token pool's columns (its rows: the scheduler's
    ``max_running_requests``).
    """

    max_total_tokens: int = 0
    mem_fraction: float = 0.5
    max_context: int = 4096

    def __post_init__(self) -> None:
        if self.max_total_tokens < 0:
            raise ValueError(f"max_total_tokens must be ≥ 0, got {self.max_total_tokens}")
        if not 0.0 < self.mem_fraction <= 0.95:
            raise ValueError(f"mem_fraction must be in (0, 0.95], got {self.mem_fraction}")
        if self.max_context < 2:
            raise ValueError(f"max_context must be ≥ 2, got {self.max_context}")


def kv_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype) -> int:
    """Bytes of K and V for one token across all layers."""
    return 2 * num_layers * num_kv_heads * head_dim * torch.empty((), dtype=dtype).element_size()


def capacity_from_memory(cfg: MemoryConfig, per_token_bytes: int, device: torch.device, max_running_requests: int) -> int:
    """KV slots that fit in ``cfg.mem_fraction`` of the free memory of ``device``, at most
    ``max_running_requests × max_context`` (every row full)."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
    else:
        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            free = 4 << 30
    return max(16, min(int(free * cfg.mem_fraction) // per_token_bytes, max_running_requests * cfg.max_context))


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
