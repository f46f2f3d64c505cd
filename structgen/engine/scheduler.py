"""The scheduler: small managers composed into one schedule → process-results loop.

* :class:`~.grammar_manager.GrammarManager`: asynchronous grammar compiles.  A request whose
  grammar compiles is queued for prefill at once (``prefill_while_compiling``): its whole prompt
  prefills, and its first token is sampled in the same step when the grammar is ready by the
  sample; otherwise its first-token logits stay on the device until the grammar is
  (:meth:`Scheduler.gather_samples`).
* :class:`~.cache_manager.CacheManager`: req-to-token rows, KV slots, the radix cache (match,
  insert, evict).
* :class:`~.prefill_manager.PrefillManager`: the waiting queue and admission (KV budget,
  cache-aware order with aging, in-batch prefix sharing, chunked prefill).
* :class:`~.decode_manager.DecodeManager`: running requests (continuous batching: join and
  leave between steps), their pending extends (decode tokens, jump-forward chains, prefill
  chunks), and retraction when KV runs out.

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

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch

from structgen.engine.cache_manager import CacheManager
from structgen.engine.decode_manager import DecodeManager
from structgen.engine.grammar_manager import GrammarManager
from structgen.engine.prefill_manager import PrefillManager
from structgen.engine.request import Req, Status, StreamChunk
from structgen.engine.sampling import DEAD_END, FutureIds, SampledIds
from structgen.fsm import GrammarCompileError
from structgen.fsm.cursor import Cursor, JumpForward, utf8_complete_prefix
from structgen.fsm.row_workers import RowWant, request_rows, rows_outstanding
from structgen.runtime.attention import ForwardBatch


@dataclass(frozen=True)
class SchedulerConfig:
    """Scheduling policy.

    ``max_batch_tokens``: extend tokens per forward beyond one per decoding request (prompts
    longer than this are chunked); ``max_running_requests``: requests running at once (the rows of
    the req-to-token pool); ``decode_reserve_tokens``: KV kept free
    per admitted request for its next tokens; ``radix_cache``, ``jump_forward``: engine-wide
    switches; ``max_rollback``: tokens jump-forward may re-tokenize; ``in_batch_prefix_min``:
    a waiting request sharing at least this many uncached tokens with one admitted in the same
    step waits one step so it can reuse that prefix; ``aging_tokens_per_step``: priority a
    waiting request gains per step (starvation guard for the longest-prefix-first order);
    ``prefill_while_compiling``: a request whose grammar is still compiling prefills its whole
    prompt meanwhile (its first token is sampled once the grammar is ready, in the prefill's own
    step when the compile ends during its forward, else from logits kept on the device; requests
    whose grammar is ready are admitted first, and such held prompts take at most half of
    ``max_running_requests``), so prefill and compile overlap instead of adding up in the time
    to first token (off: it waits for its grammar before it is queued, as SGLang's grammar queue
    and vLLM's ``WAITING_FOR_FSM`` do);
    ``overlap_schedule``: launch each step's forward before processing the previous step's
    sampled tokens (hides the host's scheduling and result processing behind the GPU; every
    token is reported one step later; a request that finishes wastes the one decode launched
    for it meanwhile, and a jump-forward costs one more forward: the decode launched meanwhile
    is for a position the forced tokens take, so they extend in the step after);
    ``defer_late_rows`` (off by default until measured on a GPU): a request whose next mask row
    a row worker is still computing when the step's forward has finished keeps its logits on
    the device and samples in a later step, once the row is in, instead of the whole batch
    waiting for it (the others sample now; never when no other request would).
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
    prefill_while_compiling: bool = True
    defer_late_rows: bool = False

    def __post_init__(self) -> None:
        for name in ("overlap_schedule", "prefill_while_compiling", "radix_cache", "jump_forward", "defer_late_rows"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.max_batch_tokens < 1:
            raise ValueError(f"max_batch_tokens must be ≥ 1, got {self.max_batch_tokens}")
        if self.max_running_requests < 1:
            raise ValueError(f"max_running_requests must be ≥ 1, got {self.max_running_requests}")
        if self.decode_reserve_tokens < 0 or self.max_rollback < 0 or self.in_batch_prefix_min < 1 or self.aging_tokens_per_step < 0:
            raise ValueError("decode_reserve_tokens, max_rollback, aging_tokens_per_step must be ≥ 0 and in_batch_prefix_min ≥ 1")


class ScheduledBatch(NamedTuple):
    """One step's work: ``forward`` and the requests in it with their token counts
    (``items[b] = (req, extend_len)``), in the forward's order; ``samplers``: the requests whose
    next token is sampled from this forward (same order as ``forward.sample_rows``), then those
    sampled from logits held while their grammar compiled (:meth:`Scheduler.gather_samples`;
    ``forward`` is None when only they sample); ``versions``: each sampler's
    :attr:`Req.version` when the batch was built (its sample is used only while the version
    is unchanged)."""

    forward: ForwardBatch | None
    items: list[tuple[Req, int]]
    samplers: list[Req]
    versions: list[int]

    def live(self) -> list[bool]:
        """Per sampler: its sample is still wanted (no finish, jump-forward or retraction since
        the batch was built)."""
        return [r.version == v for r, v in zip(self.samplers, self.versions)]


class Scheduler:
    """Composes the managers: :meth:`schedule` builds one forward; :meth:`process_launched` and
    :meth:`process_results` take the sampled tokens: they advance cursors, apply jump-forward
    and finish requests.  The engine runs the forward and the sample between them."""

    def __init__(
        self,
        config: SchedulerConfig,
        cache: CacheManager,
        grammar: GrammarManager,
        vocab_bytes: list[bytes],
        eos_ids: frozenset[int],
    ) -> None:
        self.config = config
        self.cache = cache
        self.grammar = grammar
        self.prefill = PrefillManager(config, cache)
        self.decode = DecodeManager(config, cache, lambda r: self.prefill.add(r, front=True))
        self.vocab_bytes = vocab_bytes
        self.eos_ids = eos_ids
        self.finished: list[Req] = []
        self.num_forwards = 0
        self.num_deferred = 0  # samples put off a step because their mask row was still at a row worker
        self.overlap = config.overlap_schedule  # the step profiler turns it off while attached
        self.inflight: tuple[ScheduledBatch, SampledIds] | None = None  # launched, sampled ids not yet read (overlap)
        self._reported: set[int] = set()  # rids whose chunk this step already produced

    # ------------------------------------------------------------------ queue management

    def add(self, req: Req) -> None:
        if req.grammar_pending:
            self.grammar.add(req)
            if not self.config.prefill_while_compiling:
                return  # queued for prefill once its grammar is ready
        self.prefill.add(req)

    def has_work(self) -> bool:
        """True while a request is queued, running, or finished but not yet reported."""
        return bool(len(self.grammar) or len(self.prefill) or len(self.decode) or self.finished or self.inflight)

    def abort(self, rid: int) -> Req | None:
        """Remove request ``rid`` wherever it is; returns it finished with reason "abort"."""
        compiling = self.grammar.remove(rid)
        queued = self.prefill.remove(rid)  # a request may prefill while its grammar compiles
        req = compiling or queued
        if req is None:
            req = next((r for r in self.decode.running if r.rid == rid), None)
        if req is not None:
            self._finish(req, "abort")
        return req

    # ------------------------------------------------------------------ schedule

    def schedule(self) -> ScheduledBatch | None:
        self._poll_grammars()
        items, budget = self.decode.schedule(self.config.max_batch_tokens)
        held_room = self.config.max_running_requests // 2 - self.decode.num_held() if self.prefill.waiting else 0
        new = self.prefill.schedule(budget, len(self.decode), held_room)
        self.decode.add([r for r, _n in new])
        items += new
        if not items:
            return None
        return self._build(items)

    def _poll_grammars(self) -> None:
        """Attach the cursors of compiled grammars; end the requests whose compile failed."""
        ready, failed = self.grammar.poll()
        if ready or failed:
            now = time.perf_counter()
            for r in ready + failed:
                r.grammar_s = now - r.arrival_s
        if not self.config.prefill_while_compiling:
            for r in ready:
                self.prefill.add(r)
        for r in failed:
            self.prefill.remove(r.rid)  # queued while compiling (running ones are released by _finish)
            self._finish(r, "error")

    def gather_samples(
        self, batch: ScheduledBatch | None, logits: torch.Tensor | None, forward_done: Callable[[], bool] | None = None
    ) -> tuple[ScheduledBatch | None, torch.Tensor | None]:
        """What this step samples, decided after its forward is launched: the grammars are
        polled again, so a prompt whose grammar compiled during its prefill samples its first
        token now.  A sampler of ``batch`` whose grammar still compiles keeps its logits row
        (``Req.held_logits``, float32 ``[V]`` on the device; its sample in this step goes
        stale); requests holding logits whose grammar is now ready join the sample with
        them.  With ``defer_late_rows``, samplers whose mask row a row worker has not sent by
        the time ``forward_done()`` is true (None: now) are then taken out and keep their logits
        the same way (:meth:`_defer_late_rows`).
        ``logits``: float32 ``[S, V]`` of ``batch``'s samplers (None without a forward).
        Returns the batch to sample (its samplers changed; a batch with no forward when only
        held requests sample; None when nothing does) and its logits ``[S', V]``."""
        batch, logits = self._gather_held(batch, logits)
        if self.config.defer_late_rows and batch is not None and logits is not None:
            return self._defer_late_rows(batch, logits, forward_done)
        return batch, logits

    def _defer_late_rows(
        self, batch: ScheduledBatch, logits: torch.Tensor, forward_done: Callable[[], bool] | None
    ) -> tuple[ScheduledBatch, torch.Tensor]:
        """``batch`` without its live samplers whose next mask row (or budget rows) a row
        worker is still computing once ``forward_done()`` is true (rows that come in while the
        forward runs cost nothing; :func:`~structgen.fsm.rows_outstanding`): each keeps its
        logits row (``held_logits``) and joins a later step's sample once the row is in.
        Unchanged when none is late, or when no other live sampler would remain (then the sample
        waits for the rows, as without deferral).  ``logits``: ``[S, V]``; returns the batch and
        its logits ``[S', V]``."""
        live = batch.live()
        cold: list[tuple[int, Cursor]] = []  # live samplers whose grammar's rows come from row workers
        pending = False
        for i, (req, on) in enumerate(zip(batch.samplers, live)):
            cur = req.cursor
            if on and cur is not None and (src := cur.fsm.row_source) is not None:
                cold.append((i, cur))
                pending = pending or src.workers.has_pending()
        if not pending:
            return batch, logits  # every row asked for is in (one not asked for yet is computed at the sample)
        wanted: list[RowWant] = [(cur.fsm, cur.state, batch.samplers[i].tokens_left()) for i, cur in cold]
        late = {i for (i, _c), out in zip(cold, rows_outstanding(wanted, forward_done)) if out}
        keep = [i for i in range(len(batch.samplers)) if i not in late]
        if not late or not any(live[i] for i in keep):
            return batch, logits
        for i in late:
            batch.samplers[i].held_logits = logits[i].clone()  # [V]; sampled in a later step
        self.num_deferred += len(late)
        rows = logits.index_select(0, torch.tensor(keep, dtype=torch.int64, device=logits.device))  # [S', V]
        return ScheduledBatch(batch.forward, batch.items, [batch.samplers[i] for i in keep], [batch.versions[i] for i in keep]), rows

    def _gather_held(self, batch: ScheduledBatch | None, logits: torch.Tensor | None) -> tuple[ScheduledBatch | None, torch.Tensor | None]:
        """:meth:`gather_samples` without the deferral of late rows."""
        samplers = batch.samplers if batch is not None else []
        compiling = [i for i, r in enumerate(samplers) if r.grammar_pending]
        if not compiling and not any(r.held_logits is not None for r in self.decode.running):
            return batch, logits  # the common step: nothing waits for a grammar
        self._poll_grammars()
        for i in compiling:
            req = samplers[i]
            if req.grammar_pending and batch is not None and logits is not None and req.version == batch.versions[i]:
                req.held_logits = logits[i].clone()  # [V]; the forward's buffer is reused
                req.version += 1  # this step's draw for it is dropped
        held = [r for r in self.decode.running if r.held_logits is not None and not r.grammar_pending]
        if not held:
            return batch, logits
        rows = torch.stack([r.held_logits for r in held if r.held_logits is not None])  # [H, V]
        for r in held:
            r.held_logits = None
        versions = [r.version for r in held]
        if batch is None or logits is None:
            return ScheduledBatch(None, [], held, versions), rows
        merged = ScheduledBatch(batch.forward, batch.items, batch.samplers + held, batch.versions + versions)
        return merged, torch.cat([logits, rows])  # [S + H, V]

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

    def process_launched(self, batch: ScheduledBatch | None) -> list[StreamChunk]:
        """``batch``'s forward is launched (None: a step with nothing to run): its tokens count
        as computed, and with the overlap scheduler the previous step's sampled tokens are
        processed now, while the forward runs, so that every cursor is current before this
        step's sample reads its mask row.  Returns the chunks of the requests processed."""
        self._reported = set()
        if batch is not None:
            self._on_launch(batch)
        if self.inflight is None:
            return []
        launched, sampled = self.inflight
        self.inflight = None
        return [c for c in self._process_sampled(launched, sampled) if c is not None]

    def process_results(self, batch: ScheduledBatch | None, sampled: SampledIds | None) -> list[StreamChunk]:
        """``sampled``: the ids sampled from ``batch``'s logits (None when nothing was sampled).
        Each live sampler's next input becomes a placeholder for its id on the device; with
        the overlap scheduler the ids are processed in the next step (:meth:`process_launched`),
        without it now: a token advances its cursor, then jump-forward and the stop rules apply.
        Returns the stream chunks of the requests processed and of those finished meanwhile
        (aborts, grammar failures)."""
        out: list[StreamChunk | None] = []
        if sampled is not None:
            assert batch is not None
            for i, (req, live) in enumerate(zip(batch.samplers, batch.live())):
                if live:
                    req.sample_ref = FutureIds.placeholder(i)
            if self.overlap:
                self.inflight = (batch, sampled)
            else:
                out += self._process_sampled(batch, sampled)
        out.extend(self._stream_chunk(r) for r in self.finished if r.rid not in self._reported)
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

    def _process_sampled(self, batch: ScheduledBatch, handle: SampledIds) -> list[StreamChunk | None]:
        """Wait for ``batch``'s sampled ids and process those still current (their rids join
        ``_reported``); stale ones are dropped."""
        tokens = handle.result()
        now = time.perf_counter()
        out: list[StreamChunk | None] = []
        wanted: list[RowWant] = []  # each request's next row, asked of the row workers in one message per worker
        for req, tok, version in zip(batch.samplers, tokens, batch.versions):
            if req.version != version:
                continue  # finished, jumped forward or retracted since the launch
            req.sample_ref = None
            if req.first_token_s is None:
                req.first_token_s = now
            if tok == DEAD_END:
                assert req.cursor is not None
                if isinstance(req.error, GrammarCompileError):  # the sampler could not compute its row
                    req.error = _limit_met(req, req.error)
                else:
                    req.error = RuntimeError(f"grammar dead end: no token of the vocabulary continues FSM state {req.cursor.state}")
                self._finish(req, "error")
            else:
                try:
                    self._on_token(req, tok)
                except GrammarCompileError as exc:  # the grammar's limits met mid-output (advance, jump-forward)
                    req.error = _limit_met(req, exc)
                    self._finish(req, "error")
                cur = req.cursor
                if req.status is not Status.FINISHED and cur is not None and cur.fsm.row_source is not None and not cur.finished:
                    wanted.append((cur.fsm, cur.state, req.tokens_left()))
            out.append(self._stream_chunk(req))
            self._reported.add(req.rid)
        if wanted:
            request_rows(wanted)  # started now on the row workers, collected at the next sample
        return out

    def _on_token(self, req: Req, tok: int) -> None:
        req.sampled_tokens += 1
        cur = req.cursor
        if tok in self.eos_ids and (cur is None or cur.is_accepting()):
            req.eos_sampled = True
            self._finish(req, self._complete_reason(req))
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
                room = req.max_tokens - len(req.output_ids)
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
        return fsm.within_distance(cur.state, left + max(max_rollback, 0) - 1 + len(forced))

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
        return after >= 0 and req.cursor is not None and req.cursor.fsm.within_distance(plan.state, after)

    def _check_stop(self, req: Req) -> bool:
        """Finish ``req`` if a stop rule fires after new tokens; returns True when finished."""
        if req.params.stop and req.find_stop(self.vocab_bytes):
            self._finish(req, "stop")
            return True
        cur = req.cursor
        if cur is not None and cur.is_accepting() and not cur.fsm.can_continue(cur.state):
            self._finish(req, self._complete_reason(req))  # complete: only EOS could follow
            return True
        if len(req.output_ids) >= req.max_tokens:
            self._finish(req, "length")
            return True
        return False

    @staticmethod
    def _complete_reason(req: Req) -> str:
        """Finish reason of an output the grammar accepts: "length" when budget-aware completion
        ever withheld tokens to end it within ``max_tokens`` (its values may be cut short, so it
        must not read as a complete answer), else "stop"."""
        return "length" if req.budget_narrowed else "stop"

    def _finish(self, req: Req, reason: str) -> None:
        req.sample_ref = None
        req.held_logits = None
        req.version += 1  # a sample still in flight is dropped
        if req.status is Status.RUNNING:
            self.cache.release(req)
            if req in self.decode.running:
                self.decode.remove(req)
        req.status = Status.FINISHED
        req.finish_reason = reason
        req.finished_s = time.perf_counter()
        self.finished.append(req)
        self.grammar.finished(req)

    def text_bytes(self, req: Req) -> bytes:
        """The output text's bytes, cut at the stop string that finished it (if any)."""
        return bytes(req.visible_bytes(self.vocab_bytes))

    def _stream_chunk(self, req: Req) -> StreamChunk | None:
        data = req.visible_bytes(self.vocab_bytes)
        done = req.status is Status.FINISHED
        end = len(data) if done else utf8_complete_prefix(data)
        if req.params.stop and not done:
            end = max(req.sent_bytes, end - max(len(s.encode()) for s in req.params.stop) + 1)
            end = utf8_complete_prefix(data[:end])
        delta = data[req.sent_bytes : end].decode("utf-8", errors="replace") if end > req.sent_bytes else ""
        req.sent_bytes = max(req.sent_bytes, end)
        if not delta and not done:
            return None
        if done:
            return StreamChunk(req.rid, delta, True, req.finish_reason, req.usage(), req.error, req.matched_stop)
        return StreamChunk(req.rid, delta, False)


def _limit_met(req: Req, exc: GrammarCompileError) -> GrammarCompileError:
    """``exc`` (a lazily built automaton past its state cap or time-out while ``req`` was being
    generated) with where it happened; the same type, so callers map it as a compile limit."""
    return type(exc)(f"{exc} (reached while generating, after {len(req.output_ids)} output tokens; the output so far is incomplete)")
