"""``PrefillManager``: the waiting queue and admission of new or retracted requests (KV budget,
cache-aware order with aging, in-batch prefix sharing, chunked prefill)."""

from __future__ import annotations

import bisect
import time
from typing import TYPE_CHECKING

from structgen.engine.cache_manager import CacheManager
from structgen.engine.radix_cache import common_prefix_len
from structgen.engine.request import Req, Status

if TYPE_CHECKING:
    from structgen.engine.scheduler import SchedulerConfig


class PrefillManager:
    """The waiting queue and admission of new (or retracted) requests."""

    def __init__(self, config: SchedulerConfig, cache: CacheManager) -> None:
        self.config = config
        self.cache = cache
        self.waiting: list[Req] = []

    def __len__(self) -> int:
        return len(self.waiting)

    def add(self, req: Req, *, front: bool = False) -> None:
        req.status = Status.WAITING
        if front:
            self.waiting.insert(0, req)
        else:
            self.waiting.append(req)

    def remove(self, rid: int) -> Req | None:
        for i, req in enumerate(self.waiting):
            if req.rid == rid:
                return self.waiting.pop(i)
        return None

    def schedule(self, budget: int, num_running: int, held_room: int) -> list[tuple[Req, int]]:
        """Admit waiting requests into this step within ``budget`` extend tokens and the KV
        budget.  Order: requests whose grammar is ready (or that have none) before those whose
        grammar compiles, then cached prefix length + aging, longest first (SGLang's LPM policy
        with a starvation guard).  Returns ``(req, extend_len)`` with slots assigned; a request
        whose prompt does not fit in ``budget`` gets a first chunk.  Requests whose grammar
        compiles are admitted while ``held_room`` more such prompts may run (their first-token
        logits wait for the grammar: :meth:`Scheduler.gather_samples`)."""
        cfg = self.config
        if not self.waiting or budget <= 0:
            for r in self.waiting:
                r.wait_steps += 1
            return []
        cached_lens = [self.cache.peek_prefix_len(r) for r in self.waiting]
        scored = [
            (not r.grammar_pending, cached + cfg.aging_tokens_per_step * r.wait_steps, -i, cached, r)
            for i, (r, cached) in enumerate(zip(self.waiting, cached_lens))
        ]
        scored.sort(key=lambda x: x[:3], reverse=True)
        admitted: list[tuple[Req, int]] = []
        batch_prompts: list[tuple[int, ...]] = []  # admitted this step, sorted (_longest_shared)
        for _ready, _score, _i, cached, req in scored:
            if budget <= 0:
                break
            if req.grammar_pending and (req.retractions or held_room <= 0):
                continue  # KV ran short for it once, or held prompts fill their share
            seq = tuple(req.token_at(0, req.seq_len))
            if cached < req.seq_len - 1 and _longest_shared(batch_prompts, seq) - cached >= cfg.in_batch_prefix_min:
                continue  # shares an uncached prefix with a request admitted now: reuse it next step
            if not self.cache.admit(req):
                break  # every req-to-token row is taken: max_running_requests are running
            n = min(req.pending, budget)
            alone = num_running + len(admitted) == 0  # an idle engine always admits (no reserve needed)
            reserve = 0 if n < req.pending or alone else min(cfg.decode_reserve_tokens, req.max_tokens - len(req.output_ids))
            if self.cache.available_tokens() < n + reserve or self.cache.assign(req, n) is None:
                self.cache.unadmit(req)
                break
            if req.retractions == 0:
                req.cached_tokens = req.kv_len
            admitted.append((req, n))
            if req.grammar_pending:
                held_room -= 1
            bisect.insort(batch_prompts, seq)
            budget -= n
        taken = {id(r) for r, _n in admitted}
        self.waiting = [r for r in self.waiting if id(r) not in taken]
        for r in self.waiting:
            r.wait_steps += 1
        now = time.perf_counter()
        for r, _n in admitted:
            r.status = Status.RUNNING
            if r.scheduled_s is None:
                r.scheduled_s = now
        return admitted


def _longest_shared(prompts: list[tuple[int, ...]], seq: tuple[int, ...]) -> int:
    """The longest common prefix of ``seq`` with any of ``prompts`` (sorted): in sorted order
    it is with one of the two neighbours of ``seq``'s place, so two comparisons replace one
    per prompt."""
    i = bisect.bisect_left(prompts, seq)
    return max((common_prefix_len(prompts[j], seq) for j in (i - 1, i) if 0 <= j < len(prompts)), default=0)
