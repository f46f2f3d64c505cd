"""The scheduler: small managers composed into one schedule → process-results loop.

* :class:`GrammarManager`: asynchronous grammar compiles; requests wait in a grammar queue.
* :class:`CacheManager`: req-to-token rows, KV slots, the radix cache (match, insert, evict).
* :class:`PrefillManager`: the waiting queue and admission (KV budget, cache-aware order with
  aging, in-batch prefix sharing, chunked prefill).
* :class:`DecodeManager`: running requests (continuous batching: join and leave between
  steps), their pending extends (decode tokens, jump-forward chains, prefill chunks), and
  retraction when KV runs out.

Every forward is one mixed extend batch: each scheduled request contributes the tokens of its
sequence that have no KV yet (1 for a decode, n for a forced chain or a prefill chunk).

With ``overlap_schedule`` (SGLang's overlap scheduler, vLLM's async scheduling) a step
launches its forward before the host has read the previous step's sampled ids: a decode's
input is a placeholder the device resolves from the ids it sampled (:class:`~.sampling.FutureIds`),
and the previous step's tokens are processed (cursors, jump-forward, stop rules) while the new
forward runs.  A launched sample goes stale when its request's sequence changes before the host
sees it (a jump-forward, a finish, a retraction: :attr:`Req.version`); its id is dropped and the
KV it computed is freed.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from typing import NamedTuple

import torch

from structgen.fsm import GrammarCompiler, TokenFSM
from structgen.fsm.token_fsm import JumpForward
from structgen.fsm.token_fsm import _utf8_complete_prefix as _utf8_complete

from .attention import ForwardBatch
from .memory import KVAllocator, ReqToTokenPool
from .radix_cache import RadixCache
from .request import Req, Status, StreamChunk
from .sampling import DEAD_END, FutureIds, SampledIds, Sampler


@dataclass(frozen=True)
class SchedulerConfig:
    """Scheduling policy.

    ``max_batch_tokens``: extend tokens per forward beyond one per decoding request (prompts
    longer than this are chunked); ``max_running_requests``; ``decode_reserve_tokens``: KV kept free
    per admitted request for its next tokens; ``radix_cache``, ``jump_forward``: engine-wide
    switches; ``max_rollback``: tokens jump-forward may re-tokenize; ``in_batch_prefix_min``:
    a waiting request sharing at least this many uncached tokens with one admitted in the same
    step waits one step so it can reuse that prefix; ``aging_tokens_per_step``: priority a
    waiting request gains per step (starvation guard for the longest-prefix-first order);
    ``overlap_schedule``: launch each step's forward before processing the previous step's
    sampled tokens (hides the host's scheduling and result processing behind the GPU; every
    token is reported one step later; a request that finishes wastes the one decode launched
    for it meanwhile, and a jump-forward costs one more forward: the decode launched meanwhile
    is for a position the forced tokens take, so they extend in the step after).
    """

    max_batch_tokens: int = 4096
    max_running_requests: int = 256
    decode_reserve_tokens: int = 16
    radix_cache: bool = True
    jump_forward: bool = True
    max_rollback: int = 3
    in_batch_prefix_min: int = 32
    aging_tokens_per_step: int = 16
    overlap_schedule: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.overlap_schedule, bool):
            raise ValueError(f"overlap_schedule must be a bool, got {self.overlap_schedule!r}")
        if self.max_batch_tokens < 1:
            raise ValueError(f"max_batch_tokens must be ≥ 1, got {self.max_batch_tokens}")
        if self.max_running_requests < 1:
            raise ValueError(f"max_running_requests must be ≥ 1, got {self.max_running_requests}")
        if self.decode_reserve_tokens < 0 or self.max_rollback < 0 or self.in_batch_prefix_min < 1 or self.aging_tokens_per_step < 0:
            raise ValueError("decode_reserve_tokens, max_rollback, aging_tokens_per_step must be ≥ 0 and in_batch_prefix_min ≥ 1")


class ScheduledBatch(NamedTuple):
    """One step's work: ``forward`` and the requests in it with their token counts
    (``items[b] = (req, extend_len)``), in the forward's order; ``samplers``: the requests whose
    next token is sampled from this forward (same order as ``forward.sample_rows``);
    ``versions``: each sampler's :attr:`Req.version` when the batch was built (its sample is
    used only while the version is unchanged)."""

    forward: ForwardBatch
    items: list[tuple[Req, int]]
    samplers: list[Req]
    versions: list[int]


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


class GrammarManager:
    """Requests whose grammar is compiling.  ``poll`` returns those ready (cursor attached) and
    those whose compile failed (error attached); the rest of the batch never waits for them.
    With ``gc_freeze``, a grammar serving its first request is frozen out of the garbage
    collector's passes (``gc.freeze``: it is long-lived, cached by the compiler)."""

    def __init__(self, compiler: GrammarCompiler | None, *, gc_freeze: bool = False) -> None:
        self.compiler = compiler
        self.gc_freeze = gc_freeze
        self._pending: list[tuple[Req, Future[TokenFSM]]] = []
        self._serving: set[int] = set()  # uids of grammars that served a request (frozen with gc_freeze)

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, req: Req) -> None:
        assert req.constraint is not None
        if self.compiler is None:
            raise RuntimeError("constrained request but the engine has no grammar compiler")
        req.status = Status.GRAMMAR
        self._pending.append((req, self.compiler.submit(req.constraint)))

    def poll(self) -> tuple[list[Req], list[Req]]:
        ready: list[Req] = []
        failed: list[Req] = []
        keep: list[tuple[Req, Future[TokenFSM]]] = []
        fresh = False
        for req, fut in self._pending:
            if not fut.done():
                keep.append((req, fut))
                continue
            exc = fut.exception()
            if exc is not None:
                req.error = exc
                failed.append(req)
            else:
                fsm = fut.result()
                req.cursor = fsm.cursor()
                ready.append(req)
                if fsm.uid not in self._serving:
                    if len(self._serving) >= 1 << 16:
                        self._serving.clear()  # bounded; a grammar seen again is frozen again (harmless)
                    self._serving.add(fsm.uid)
                    fresh = True
        self._pending = keep
        if fresh and self.gc_freeze:
            gc.freeze()
        return ready, failed

    def remove(self, rid: int) -> Req | None:
        for i, (req, _f) in enumerate(self._pending):
            if req.rid == rid:
                del self._pending[i]
                return req
        return None

    def wait(self, timeout_s: float) -> None:
        """Block until some pending compile finishes (used when nothing else can run)."""
        if self._pending:
            wait_futures([f for _r, f in self._pending], timeout=timeout_s, return_when=FIRST_COMPLETED)


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

    def schedule(self, budget: int, num_running: int) -> list[tuple[Req, int]]:
        """Admit waiting requests into this step within ``budget`` extend tokens and the KV
        budget.  Order: cached prefix length + aging, longest first (SGLang's LPM policy with a
        starvation guard).  Returns ``(req, extend_len)`` with slots assigned; a request whose
        prompt does not fit in ``budget`` gets a first chunk."""
        cfg = self.config
        if not self.waiting or budget <= 0:
            for r in self.waiting:
                r.wait_steps += 1
            return []
        scored = [(self.cache.peek_prefix_len(r) + cfg.aging_tokens_per_step * r.wait_steps, -i, r) for i, r in enumerate(self.waiting)]
        scored.sort(key=lambda x: (x[0], x[1]), reverse=True)
        admitted: list[tuple[Req, int]] = []
        batch_prompts: list[list[int]] = []
        for _score, _i, req in scored:
            if budget <= 0 or num_running + len(admitted) >= cfg.max_running_requests:
                break
            seq = req.token_at(0, req.seq_len)
            cached = self.cache.peek_prefix_len(req)
            if cached < req.seq_len - 1 and any(_lcp(seq, p) - cached >= cfg.in_batch_prefix_min for p in batch_prompts):
                continue  # shares an uncached prefix with a request admitted now: reuse it next step
            if not self.cache.admit(req):
                break
            n = min(req.pending, budget)
            alone = num_running + len(admitted) == 0  # an idle engine always admits (no reserve needed)
            reserve = 0 if n < req.pending or alone else min(cfg.decode_reserve_tokens, req.params.max_tokens - len(req.output_ids))
            if self.cache.available_tokens() < n + reserve or self.cache.assign(req, n) is None:
                self.cache.unadmit(req)
                break
            if req.retractions == 0:
                req.cached_tokens = req.kv_len
            admitted.append((req, n))
            batch_prompts.append(seq)
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


class DecodeManager:
    """Running requests and their pending extends; retracts the newest when KV runs out."""

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

    def schedule(self, budget: int) -> tuple[list[tuple[Req, int]], int]:
        """Slots for every running request's pending tokens: whole decode / jump-forward extends
        (one token each outside ``budget``, the rest of a chain inside it) and prefill chunks
        within ``budget``.  When the KV pool (free + evictable) cannot hold them, the newest
        requests are retracted first.  Returns the items and the budget left."""
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
            self.retract(self.running[-1])
        for req, n in plan:
            if self.cache.assign(req, n) is None:  # submit caps prompt + max_tokens at the pool capacity
                raise RuntimeError(f"KV pool of {self.cache.allocator.capacity} slots cannot hold request {req.rid}")
        return plan, left

    def retract(self, req: Req) -> None:
        """Free ``req``'s KV (its tokens stay in the radix cache, unpinned, so re-admission may
        reuse them) and requeue it at the front of the waiting queue; output and cursor are kept."""
        req.sample_ref = None  # a sampled token still on the device is dropped (re-sampled after re-prefill)
        req.version += 1
        self.cache.release(req)
        self.running.remove(req)
        req.retractions += 1
        req.prefill_done = False
        self._requeue(req)


def _lcp(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class Scheduler:
    """Composes the managers: :meth:`schedule` builds one forward, :meth:`process_results`
    samples, advances cursors, applies jump-forward and finishes requests."""

    def __init__(
        self,
        config: SchedulerConfig,
        cache: CacheManager,
        grammar: GrammarManager,
        sampler: Sampler,
        vocab_bytes: list[bytes],
        eos_ids: frozenset[int],
    ) -> None:
        self.config = config
        self.cache = cache
        self.grammar = grammar
        self.sampler = sampler
        self.prefill = PrefillManager(config, cache)
        self.decode = DecodeManager(config, cache, lambda r: self.prefill.add(r, front=True))
        self.vocab_bytes = vocab_bytes
        self.eos_ids = eos_ids
        self.finished: list[Req] = []
        self.num_forwards = 0
        self.overlap = config.overlap_schedule  # the step profiler turns it off while attached
        self.inflight: tuple[ScheduledBatch, SampledIds] | None = None  # launched, sampled ids not yet read (overlap)

    # ------------------------------------------------------------------ queue management

    def add(self, req: Req) -> None:
        if req.constraint is not None and req.cursor is None:
            self.grammar.add(req)
        else:
            self.prefill.add(req)

    def has_work(self) -> bool:
        """True while a request is queued, running, or finished but not yet reported."""
        return bool(len(self.grammar) or len(self.prefill) or len(self.decode) or self.finished or self.inflight)

    def abort(self, rid: int) -> Req | None:
        """Remove request ``rid`` wherever it is; returns it finished with reason "abort"."""
        req = self.grammar.remove(rid) or self.prefill.remove(rid)
        if req is None:
            req = next((r for r in self.decode.running if r.rid == rid), None)
        if req is not None:
            self._finish(req, "abort")
        return req

    # ------------------------------------------------------------------ schedule

    def schedule(self) -> ScheduledBatch | None:
        ready, failed = self.grammar.poll()
        for r in ready:
            self.prefill.add(r)
        for r in failed:
            self._finish(r, "error")
        items, budget = self.decode.schedule(self.config.max_batch_tokens)
        new = self.prefill.schedule(budget, len(self.decode))
        self.decode.add([r for r, _n in new])
        items += new
        if not items:
            return None
        return self._build(items)

    def _build(self, items: list[tuple[Req, int]]) -> ScheduledBatch:
        ids: list[int] = []
        positions: list[int] = []
        locs: list[torch.Tensor] = []
        sample_rows: list[int] = []
        samplers: list[Req] = []
        table = self.cache.req_to_token.req_to_token_cpu
        for req, n in items:
            start, known = req.kv_len, req.seq_len
            ids.extend(req.token_at(start, min(start + n, known)))
            if start + n > known:  # the sampled token the host has not seen: the device fills it in
                assert req.sample_ref is not None and start + n == known + 1, (req.rid, start, n, known)
                ids.append(req.sample_ref)
            positions.extend(range(start, start + n))
            assert req.req_pool_idx is not None
            locs.append(table[req.req_pool_idx, start : start + n])
            if start + n == known + (req.sample_ref is not None):
                sample_rows.append(len(ids) - 1)
                samplers.append(req)
        fb = ForwardBatch(
            input_ids_cpu=torch.tensor(ids, dtype=torch.int64),
            positions_cpu=torch.tensor(positions, dtype=torch.int64),
            out_cache_loc_cpu=torch.cat(locs),
            req_pool_indices=[r.req_pool_idx for r, _n in items],  # type: ignore[misc]
            prefix_lens=[r.kv_len for r, _n in items],
            extend_lens=[n for _r, n in items],
            sample_rows=sample_rows,
        )
        return ScheduledBatch(fb, items, samplers, [r.version for r in samplers])

    # ------------------------------------------------------------------ results

    def process_results(self, batch: ScheduledBatch | None, logits: torch.Tensor | None) -> list[StreamChunk]:
        """After ``batch``'s forward was launched (``logits`` its output; both None for a step
        with nothing to run, which drains the overlap and reports requests finished outside a
        forward): advance KV lengths, then process the previous step's
        sampled tokens if they are in flight (overlap), launch ``batch``'s sample, and without
        overlap process it at once.  Processing a token advances its cursor and applies
        jump-forward and the stop rules.  Returns the stream chunks of the processed requests
        and of those finished meanwhile (aborts, grammar failures)."""
        out: list[StreamChunk | None] = []
        reported: set[int] = set()
        if batch is not None:
            self._on_launch(batch)
        if self.inflight is not None:
            out += self._process_sampled(*self.inflight, reported)
            self.inflight = None
        if batch is not None and batch.samplers:
            assert logits is not None
            active = [r.version == v for r, v in zip(batch.samplers, batch.versions)]
            handle = self.sampler.launch(logits, batch.samplers, active)
            for i, (req, on) in enumerate(zip(batch.samplers, active)):
                if on:
                    req.sample_ref = FutureIds.placeholder(i)
            if self.overlap:
                self.inflight = (batch, handle)
            else:
                out += self._process_sampled(batch, handle, reported)
        out.extend(self._stream_chunk(r) for r in self.finished if r.rid not in reported)
        self.finished = []
        return [c for c in out if c is not None]

    def _on_launch(self, batch: ScheduledBatch) -> None:
        """The forward of ``batch`` is launched: its tokens count as computed (later launches
        read their KV in stream order), prompts are shared through the radix cache, and its
        samplers have finished prefill."""
        self.num_forwards += 1
        for req, n in batch.items:
            was_prefill = not req.prefill_done
            req.kv_len += n
            req.forwards += 1
            if was_prefill:
                self.cache.prefill_tokens_computed += n
                self.cache.cache_prefix(req)
        for req in batch.samplers:
            req.prefill_done = True

    def _process_sampled(self, batch: ScheduledBatch, handle: SampledIds, reported: set[int]) -> list[StreamChunk | None]:
        """Wait for ``batch``'s sampled ids and process those still current (``reported`` gets
        their rids); stale ones are dropped."""
        tokens = handle.result()
        now = time.perf_counter()
        out: list[StreamChunk | None] = []
        for req, tok, version in zip(batch.samplers, tokens, batch.versions):
            if req.version != version:
                continue  # finished, jumped forward or retracted since the launch
            req.sample_ref = None
            if req.first_token_s is None:
                req.first_token_s = now
            if tok == DEAD_END:
                assert req.cursor is not None
                req.error = RuntimeError(f"grammar dead end: no token of the vocabulary continues FSM state {req.cursor.state}")
                self._finish(req, "error")
            else:
                self._on_token(req, tok)
            out.append(self._stream_chunk(req))
            reported.add(req.rid)
        return out

    def _on_token(self, req: Req, tok: int) -> None:
        req.sampled_tokens += 1
        cur = req.cursor
        if tok in self.eos_ids and (cur is None or cur.is_accepting()):
            req.eos_sampled = True
            self._finish(req, "stop")
            return
        if cur is not None:
            cur.advance(tok)  # the mask guarantees the token is allowed
        req.output_ids.append(tok)
        if self._check_stop(req):
            return
        if cur is not None and req.jump_forward and self.config.jump_forward:
            rollbackable = req.seq_len - max(req.cache_protected_len, len(req.prompt_ids))
            max_rollback = min(self.config.max_rollback, rollbackable)
            if not self._jump_may_fit(req, max_rollback):
                return
            plan = cur.peek_jump_forward(max_rollback=max_rollback)
            if plan is not None and self._jump_fits(req, plan):
                cur.apply_jump_forward(plan)
                req.version += 1  # a sample launched after this token (overlap) is for a position the forced tokens take
                if plan.rollback:
                    req.rollback(plan.rollback, self.vocab_bytes)
                    if req.kv_len > req.seq_len:
                        self.cache.free_tail(req, req.seq_len)
                room = req.params.max_tokens - len(req.output_ids)
                forced = plan.token_ids[:room]
                req.output_ids.extend(forced)
                req.forced_tokens += len(forced)
                if self._check_stop(req):
                    return

    @staticmethod
    def _jump_may_fit(req: Req, max_rollback: int) -> bool:
        """A cheap necessary condition for :meth:`_jump_fits`, checked before a plan is made
        (a plan re-tokenizes; refused ones cost ~0.1 ms per step in a budget-bound run).  Along
        a forced chain every continuation starts with the forced bytes, so the distance at the
        chain's end is ``distance(state) − len(forced)``, and any plan's end state is at least
        that far from acceptance; a plan emits ≥ 1 token and rolls back ≤ ``max_rollback``."""
        left = req.tokens_left()
        cur = req.cursor
        if left is None or cur is None:
            return True
        fsm = cur.fsm
        forced = fsm.forced_bytes(cur.state)
        if not forced:
            return False  # no plan exists
        return fsm.distance(cur.state) - len(forced) <= left + max(max_rollback, 0) - 1

    @staticmethod
    def _jump_fits(req: Req, plan: JumpForward) -> bool:
        """Whether a jump-forward keeps a budget-tracked request completable: the output after
        it must still reach acceptance within ``max_tokens`` (one token per byte at worst).
        Otherwise the forced bytes are decoded one masked step at a time instead, where the
        budget-restricted rows keep that promise."""
        left = req.tokens_left()
        if left is None:
            return True
        after = left + plan.rollback - len(plan.token_ids)
        return after >= 0 and req.cursor is not None and req.cursor.fsm.distance(plan.state) <= after

    def _check_stop(self, req: Req) -> bool:
        """Finish ``req`` if a stop rule fires after new tokens; returns True when finished."""
        if req.params.stop and req.find_stop(self.vocab_bytes):
            self._finish(req, "stop")
            return True
        cur = req.cursor
        if cur is not None and cur.is_accepting() and not cur.fsm.can_continue(cur.state):
            self._finish(req, "stop")  # complete: only EOS could follow
            return True
        if len(req.output_ids) >= req.params.max_tokens:
            self._finish(req, "length")
            return True
        return False

    def _finish(self, req: Req, reason: str) -> None:
        req.sample_ref = None
        req.version += 1  # a sample still in flight is dropped
        if req.status is Status.RUNNING:
            self.cache.release(req)
            if req in self.decode.running:
                self.decode.remove(req)
        req.status = Status.FINISHED
        req.finish_reason = reason
        req.finished_s = time.perf_counter()
        self.finished.append(req)

    def text_bytes(self, req: Req) -> bytes:
        """The output text's bytes, cut at the stop string that finished it (if any)."""
        return bytes(req.visible_bytes(self.vocab_bytes))

    def _stream_chunk(self, req: Req) -> StreamChunk | None:
        data = req.visible_bytes(self.vocab_bytes)
        done = req.status is Status.FINISHED
        end = len(data) if done else _utf8_complete(data)
        if req.params.stop and not done:
            end = max(req.sent_bytes, end - max(len(s.encode()) for s in req.params.stop) + 1)
            end = _utf8_complete(data[:end])
        delta = data[req.sent_bytes : end].decode("utf-8", errors="replace") if end > req.sent_bytes else ""
        req.sent_bytes = max(req.sent_bytes, end)
        if not delta and not done:
            return None
        if done:
            return StreamChunk(req.rid, delta, True, req.finish_reason, req.usage(), req.error)
        return StreamChunk(req.rid, delta, False)
