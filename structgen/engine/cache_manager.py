"""``CacheManager``: req-to-token rows, KV slots and the radix cache (match_prefix, insert,
lock_ref, evict) for the scheduler's requests."""

from __future__ import annotations

import torch

from structgen.engine.radix_cache import RadixCache
from structgen.engine.request import Req
from structgen.runtime.memory import KVAllocator, ReqToTokenPool


class CacheManager:
    """Owns the req-to-token pool, the KV slot allocator and (optionally) the radix cache."""

    def __init__(self, req_to_token: ReqToTokenPool, allocator: KVAllocator, radix: RadixCache | None) -> None:
        self.req_to_token = req_to_token
        self.allocator = allocator
        self.radix = radix
        self.prefill_tokens_computed = 0

    def available_tokens(self) -> int:
        return self.allocator.available + (self.radix.evictable_size if self.radix is not None else 0)

    def alloc_slots(self, n: int) -> torch.Tensor | None:
        """``int64 [n]`` host slots, evicting unlocked cache leaves first if needed; None if
        the pool cannot provide ``n``."""
        short = n - self.allocator.available
        if short > 0 and self.radix is not None:
            self.radix.evict(short)
        return self.allocator.alloc(n)

    def peek_prefix_len(self, req: Req) -> int:
        if self.radix is None:
            return 0
        return min(self.radix.peek_prefix_len(req.token_at(0, req.seq_len)), req.seq_len - 1)

    def admit(self, req: Req) -> bool:
        """Give ``req`` a req-to-token row and its cached prefix (locked).  False if no row."""
        row = self.req_to_token.alloc()
        if row is None:
            return False
        req.req_pool_idx = row
        req.kv_len = req.cache_protected_len = 0
        if self.radix is not None:
            key = req.token_at(0, req.seq_len - 1)  # at least one token is computed
            slots, node = self.radix.match_prefix(key)
            n = int(slots.numel())
            self.req_to_token.req_to_token_cpu[row, :n] = slots
            self.radix.inc_lock_ref(node)
            req.last_node = node
            req.kv_len = req.cache_protected_len = n
        return True

    def unadmit(self, req: Req) -> None:
        """Undo :meth:`admit` (nothing computed yet)."""
        if self.radix is not None and req.last_node is not None:
            self.radix.dec_lock_ref(req.last_node)
        req.last_node = None
        assert req.req_pool_idx is not None
        self.req_to_token.free(req.req_pool_idx)
        req.req_pool_idx = None
        req.kv_len = req.cache_protected_len = 0

    def assign(self, req: Req, n: int) -> torch.Tensor | None:
        """Allocate slots for the next ``n`` pending tokens of ``req`` and record them in its
        row; returns them (``int64 [n]`` host) or None when KV is exhausted."""
        slots = self.alloc_slots(n)
        if slots is None:
            return None
        assert req.req_pool_idx is not None
        self.req_to_token.req_to_token_cpu[req.req_pool_idx, req.kv_len : req.kv_len + n] = slots
        return slots

    def free_tail(self, req: Req, new_len: int) -> None:
        """Drop KV of positions ``[new_len, kv_len)`` (jump-forward rollback)."""
        assert req.cache_protected_len <= new_len <= req.kv_len and req.req_pool_idx is not None
        if new_len < req.kv_len:
            self.allocator.free(self.req_to_token.req_to_token_cpu[req.req_pool_idx, new_len : req.kv_len].clone())
            req.kv_len = new_len

    def _insert(self, req: Req) -> None:
        """Insert the computed tokens of ``req`` into the radix cache, freeing the slots of the
        ones another request cached first (the tree keeps its own copy)."""
        assert self.radix is not None and req.req_pool_idx is not None
        slots = self.req_to_token.req_to_token_cpu[req.req_pool_idx, : req.kv_len].clone()
        present = self.radix.insert(req.token_at(0, req.kv_len), slots)
        if present > req.cache_protected_len:
            self.allocator.free(slots[req.cache_protected_len : present].clone())

    def cache_prefix(self, req: Req) -> None:
        """Insert the computed tokens of a running request into the radix cache and re-pin
        (shares a prompt as soon as it is prefilled; chunk by chunk for chunked prompts)."""
        if self.radix is None:
            return
        assert req.req_pool_idx is not None and req.last_node is not None
        self._insert(req)
        tree_slots, node = self.radix.match_prefix(req.token_at(0, req.kv_len))
        self.radix.hit_tokens -= int(tree_slots.numel())  # internal re-match, not a hit
        self.req_to_token.req_to_token_cpu[req.req_pool_idx, : req.kv_len] = tree_slots
        self.radix.dec_lock_ref(req.last_node)
        self.radix.inc_lock_ref(node)
        req.last_node = node
        req.cache_protected_len = req.kv_len

    def release(self, req: Req) -> None:
        """Give back everything ``req`` holds: its computed tokens go to the radix cache
        (unpinned) or, without one, their slots to the allocator; its row is freed."""
        if req.req_pool_idx is None:
            return
        if req.kv_len > req.seq_len:  # a launched token the host dropped (EOS, stale sample): its KV is freed
            self.free_tail(req, req.seq_len)
        if self.radix is not None:
            assert req.last_node is not None
            self._insert(req)
            self.radix.dec_lock_ref(req.last_node)
            req.last_node = None
        else:
            self.allocator.free(self.req_to_token.req_to_token_cpu[req.req_pool_idx, : req.kv_len].clone())
        self.req_to_token.free(req.req_pool_idx)
        req.req_pool_idx = None
        req.kv_len = req.cache_protected_len = 0
