"""``DecodeManager``: running requests (continuous batching: they join and leave between
steps), their pending extends (decode tokens, jump-forward chains, prefill chunks) and
retraction when the KV pool runs out (prompts whose grammar still compiles first, then the
newest)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from structgen.engine.cache_manager import CacheManager
from structgen.engine.request import Req

if TYPE_CHECKING:
    from structgen.engine.scheduler import SchedulerConfig


class DecodeManager:
    """Running requests and their pending extends; when KV runs out retracts those whose grammar
    still compiles, then the newest."""

    def __init__(self, config: SchedulerConfig, cache: CacheManager, requeue: Callable[[Req], None]) -> None:
        self.config = config
        self.cache = cache
        self.running: list[Req] = []
        self._requeue = requeue

    def __len__(self) -> int:
        return len(self.running)

    def add(self, reqs: list[Req]) -> None:
        self.running.extend(reqs)

    def remove(self, req: Req) -> None:
        self.running.remove(req)

    def num_held(self) -> int:
        """Running requests whose grammar still compiles (prompts prefilled while they wait)."""
        return sum(1 for r in self.running if r.grammar_pending)

    def schedule(self, budget: int) -> tuple[list[tuple[Req, int]], int]:
        """Slots for every running request's pending tokens: whole decode / jump-forward extends
        (one token each outside ``budget``, the rest of a chain inside it) and prefill chunks
        within ``budget``.  When the KV pool (free + evictable) cannot hold them, requests are
        retracted: those whose grammar still compiles, then the newest.  Returns the items and
        the budget left."""
        while True:
            plan: list[tuple[Req, int]] = []
            left = budget
            for req in self.running:
                n = req.pending if req.prefill_done else min(req.pending, max(left, 0))
                left -= n - 1 if req.prefill_done else n
                if n:
                    plan.append((req, n))
            need = sum(n for _r, n in plan)
            if need <= self.cache.available_tokens() or len(self.running) <= 1:
                break
            # a prompt prefilled while its grammar compiles goes first (it has produced nothing), then the newest
            self.retract(next((r for r in reversed(self.running) if r.grammar_pending), self.running[-1]))
        for req, n in plan:
            if self.cache.assign(req, n) is None:  # submit caps prompt + max_tokens at the pool capacity
                raise RuntimeError(f"KV pool of {self.cache.allocator.capacity} slots cannot hold request {req.rid}")
        return plan, left

    def retract(self, req: Req) -> None:
        """Free ``req``'s KV (its tokens stay in the radix cache, unpinned, so re-admission may
        reuse them) and requeue it at the front of the waiting queue; output and cursor are kept."""
        req.sample_ref = None  # a sampled token still on the device is dropped (re-sampled after re-prefill)
        req.held_logits = None  # so are first-token logits kept for the grammar (recomputed by the re-prefill)
        req.version += 1
        self.cache.release(req)
        self.running.remove(req)
        req.retractions += 1
        req.prefill_done = False
        self._requeue(req)
