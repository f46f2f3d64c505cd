"""The engine: tokenizer + model runner + scheduler + sampler, stepped as schedule → forward →
sample → process results (nano-vllm's and mini-sglang's loop, with SGLang's overlap
scheduler)."""

from __future__ import annotations

import gc
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import torch

from structgen.engine.cache_manager import CacheManager
from structgen.engine.config import EngineConfig, cpu_threads_for
from structgen.engine.gc_pauses import GCPauses, freeze_heap
from structgen.engine.grammar_manager import GrammarManager
from structgen.engine.model_runner import ModelRunner
from structgen.engine.observer import StepObserver, StepPhases
from structgen.engine.prompt_format import load_prompt_format
from structgen.engine.prompt_tokenizer import PromptTokenizer, fit_context, load_tokenizer
from structgen.engine.radix_cache import RadixCache
from structgen.engine.request import GenerateRequest, Req, RequestError, RequestOutput, SamplingParams, Status, StreamChunk, Usage
from structgen.engine.sampling import SampledIds, Sampler
from structgen.engine.scheduler import ScheduledBatch, Scheduler
from structgen.fsm import Constraint, GrammarCompiler, Vocabulary
from structgen.models.loader import resolve_model_path


def eos_token_ids(model_path: str, hf_config: Any, tokenizer: Any) -> list[int]:
    """The ids that end generation: generation_config.json's ``eos_token_id``, else
    config.json's, plus the tokenizer's EOS.  Raises ``ValueError`` when none is named."""
    ids: list[int] = []
    gen_cfg = os.path.join(model_path, "generation_config.json")
    if os.path.isfile(gen_cfg):
        import json

        with open(gen_cfg, encoding="utf-8") as f:
            eos = json.load(f).get("eos_token_id")
        ids = [eos] if isinstance(eos, int) else list(eos or [])
    if not ids:
        eos = getattr(hf_config, "eos_token_id", None)
        ids = [eos] if isinstance(eos, int) else list(eos or [])
    tok_eos = tokenizer.eos_token_id
    if tok_eos is not None and tok_eos not in ids:
        ids.append(tok_eos)
    ids = [i for i in ids if 0 <= i < len(tokenizer)]
    if not ids:
        raise ValueError(f"{model_path!r}: neither generation_config.json, config.json nor the tokenizer names an EOS token")
    return ids


class EngineStats(NamedTuple):
    """Engine-wide counters: forwards run, prompt tokens computed by prefill (retracted
    requests count again), radix-cache hit / evicted tokens, retractions, requests finished."""

    forwards: int
    prefill_tokens_computed: int
    cache_hit_tokens: int
    cache_evicted_tokens: int
    retractions: int
    finished: int


class Engine:
    """A loaded model serving requests with continuous batching (a context manager).

    ``model_path``: a local Hugging Face folder (config.json, safetensors, tokenizer files);
    ``tokenizer_path``: another folder for the tokenizer (default: ``model_path``);
    ``runner``: the :class:`ModelRunner` of an earlier, closed engine of the same model (its
    weights, pools and CUDA graphs are reused, so benchmarks compare scheduler settings without
    reloading; ``config.cuda_graph`` switches its replays on or off; its other settings,
    :meth:`EngineConfig.runner_settings`, must equal the runner's).  Raises
    ``ModelLoadError`` / ``UnsupportedModelError`` for a bad folder and ``ValueError`` for a
    runner whose pools are not empty or that was built with other runner settings.  ``chat_template``: a Jinja
    chat template used instead of the tokenizer's (``ValueError`` when it cannot render a user
    message).
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        config: EngineConfig | None = None,
        *,
        tokenizer_path: str | os.PathLike[str] | None = None,
        runner: ModelRunner | None = None,
        chat_template: str | None = None,
    ) -> None:
        self.config = cfg = config or EngineConfig()
        self.model_path = resolve_model_path(model_path)  # a folder, or a hub id found in the local HF cache
        if runner is not None:
            if not runner.pools_empty():
                raise ValueError("the reused ModelRunner still holds KV slots or req-to-token rows: close its engine first")
            want = cfg.runner_settings()
            differ = [k for k, v in want.items() if runner.settings[k] != v]
            if differ:
                got = ", ".join(f"{k}={runner.settings[k]!r} (config: {want[k]!r})" for k in differ)
                raise ValueError(f"the reused ModelRunner was built with other settings: {got}; build a new runner for them")
            runner.use_cuda_graph = cfg.cuda_graph
        else:
            runner = ModelRunner(self.model_path, cfg)
        self.runner = runner
        if runner.device.type == "cpu":
            threads = cpu_threads_for(cfg.cpu_threads, sum(p.numel() for p in runner.model.parameters()))
            if threads is not None:
                torch.set_num_threads(threads)
        self._switch_interval = sys.getswitchinterval()  # restored by close()
        if cfg.switch_interval_s is not None:
            sys.setswitchinterval(cfg.switch_interval_s)
        self.tokenizer = load_tokenizer(tokenizer_path or model_path, chat_template)
        self.prompts = PromptTokenizer(self.tokenizer, runner.vocab_size, self.model_path)
        self.prompt_format = load_prompt_format(self.model_path)  # applied by the API and server to text prompts
        self.eos_token_ids = eos_token_ids(self.model_path, self.runner.hf_config, self.tokenizer)
        self.vocab = Vocabulary.from_tokenizer(self.tokenizer, eos_token_ids=self.eos_token_ids)
        self.vocab.prepare()  # trie tables and the sorted order: built at start-up, not in a request's step
        self.compiler = GrammarCompiler(self.vocab, cfg.compiler)
        self.compiler.start_workers()  # compile processes, if configured, are up before traffic
        radix = RadixCache(self.runner.allocator) if cfg.scheduler.radix_cache else None
        self.cache = CacheManager(self.runner.req_to_token, self.runner.allocator, radix)
        self.sampler = Sampler(
            self.runner.vocab_size,
            self.vocab.size,
            device=runner.device,
            mask_backend=cfg.mask_backend,
            pool_rows=cfg.mask_pool_rows,
            future=self.runner.future_ids,
            eos_ids=self.eos_token_ids,
        )
        self.scheduler = Scheduler(
            cfg.scheduler,
            self.cache,
            GrammarManager(self.compiler, gc_freeze=cfg.gc_freeze),
            self.vocab.token_bytes,
            frozenset(self.eos_token_ids),
        )
        self.observer: StepObserver | None = None
        self._rids = itertools.count()
        self._generator = torch.Generator().manual_seed(cfg.seed)
        self._reqs: dict[int, Req] = {}
        self._closed = False
        self.gc_pauses = GCPauses()  # this process's collector pauses (the server's /metrics)
        if cfg.gc_freeze:
            freeze_heap()

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop compile workers, abort what is still running and empty the radix cache, so the
        runner's pools are all free again (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            for rid in list(self._reqs):
                self.abort(rid)
            while self.scheduler.has_work():
                self.step()
            radix = self.cache.radix
            if radix is not None:
                radix.evict(radix.total_size)
        finally:
            self.compiler.close()
            self.gc_pauses.close()
            if self.config.gc_freeze:
                gc.unfreeze()  # what this engine held may now be collected
            if self.config.switch_interval_s is not None:
                sys.setswitchinterval(self._switch_interval)

    # ------------------------------------------------------------------ requests

    def tokenize(self, prompt: Any, chat_template_kwargs: dict[str, Any] | None = None) -> list[int]:
        """:meth:`PromptTokenizer.tokenize` with this engine's tokenizer.  Raises ``RequestError``."""
        return self.prompts.tokenize(prompt, chat_template_kwargs)

    @property
    def context(self) -> int:
        """Tokens one sequence may hold: the model's context (``max_context``) or the KV pool's
        capacity, whichever is smaller."""
        return min(self.runner.max_context, self.runner.allocator.capacity)

    def check_context(self, num_prompt_tokens: int, params: SamplingParams, *, clip: bool = False) -> SamplingParams:
        """``params`` with ``max_tokens`` resolved for a prompt of ``num_prompt_tokens`` in
        :attr:`context` (:func:`fit_context`; None: the room left; beyond the room: clipped to it
        with ``clip``, as :meth:`submit` does).  Raises ``RequestError`` (code ``context_length_exceeded``) when the prompt
        leaves no room, or without ``clip`` when ``max_tokens`` exceeds the room left (the
        server's answer is then a 400)."""
        return fit_context(self.context, num_prompt_tokens, params, clip=clip)

    def submit(self, request: GenerateRequest) -> int:
        """Queue ``request``; returns its id.  ``max_tokens`` beyond the room the context leaves
        is clipped to it (:meth:`check_context`).  Raises ``RequestError`` (bad prompt or
        parameter) without touching other requests."""
        if self._closed:
            raise RuntimeError("engine is closed")
        if not isinstance(request.params, SamplingParams):
            raise RequestError("params must be a SamplingParams", param="params")
        if request.constraint is not None and not isinstance(request.constraint, Constraint):
            raise RequestError("constraint must be a structgen.Constraint", param="constraint")
        if request.constraint is not None and (request.params.ignore_eos or request.params.min_tokens):
            field = "ignore_eos" if request.params.ignore_eos else "min_tokens"
            raise RequestError(f"{field}: not with a constraint (its grammar decides where the output ends)", param=field)
        ids = self.tokenize(request.prompt)
        params = self.check_context(len(ids), request.params, clip=True)
        rid = next(self._rids)
        gen = torch.Generator().manual_seed(params.seed) if params.seed is not None else self._generator
        jf = self.config.scheduler.jump_forward if params.jump_forward is None else params.jump_forward
        req = Req(
            rid=rid,
            prompt_ids=ids,
            params=params,
            jump_forward=jf,
            constraint=request.constraint,
            generator=gen,
            arrival_s=time.perf_counter(),
        )
        self._reqs[rid] = req
        self.scheduler.add(req)
        return rid

    def abort(self, rid: int) -> bool:
        """Cancel request ``rid``; True if it was still unfinished."""
        return self.scheduler.abort(rid) is not None

    # ------------------------------------------------------------------ the loop

    @torch.inference_mode()
    def step(self, emit: Callable[[list[StreamChunk]], None] | None = None) -> list[StreamChunk]:
        """One engine step: schedule → forward → sample → process results.  With the overlap
        scheduler the forward is launched on placeholder ids before the previous step's tokens
        are processed (host work overlaps the GPU), and this step's tokens are processed in the
        next step.  Returns the stream chunks of the requests processed; with ``emit``, the
        chunks of the previous step's tokens go to ``emit`` as soon as they are processed,
        before this step's sample is launched (a server sends them without waiting for the
        rest of the step), and only the rest is returned.  Raises ``TypeError`` for an ``emit``
        that is not callable, before the step changes anything."""
        if emit is not None and not callable(emit):
            raise TypeError(f"emit must be a callable taking a list of StreamChunk, got {type(emit).__name__}")
        t0 = time.perf_counter()
        batch = self.scheduler.schedule()  # schedule
        if batch is None and self.scheduler.inflight is None and len(self.scheduler.grammar):
            self.scheduler.grammar.wait(0.05)  # nothing to run until a compile finishes
        t1 = time.perf_counter()
        logits = self.runner.forward(batch.forward) if batch is not None and batch.forward is not None else None  # forward: [S, V]
        forward_done = _done_probe(logits) if self.scheduler.config.defer_late_rows else None  # when the late rows stop being waited for
        if self.observer is not None and self.observer.synchronize:
            self.runner.synchronize()
        t2 = time.perf_counter()
        chunks = self.scheduler.process_launched(batch)  # overlap: the previous step's tokens
        if emit is not None and chunks:
            emit(chunks)
            chunks = []
        t3 = time.perf_counter()
        forward_kind = self.runner.last_forward_kind if batch is not None else None
        batch, logits = self.scheduler.gather_samples(batch, logits, forward_done)  # + held logits; late rows held
        t3p = time.perf_counter()
        sampled = self.sample(batch, logits)  # sample
        t4 = time.perf_counter()
        chunks += self.scheduler.process_results(batch, sampled)  # process results
        if self.observer is not None:
            rows_s = self.sampler.rows_s if sampled is not None else 0.0
            phases = StepPhases(t1 - t0, t2 - t1, t4 - t3, t3 - t2 + time.perf_counter() - t4, t3p - t3, rows_s)
            self.observer.on_step(batch, forward_kind, phases)
        return chunks

    def sample(self, batch: ScheduledBatch | None, logits: torch.Tensor | None) -> SampledIds | None:
        """Launch the sample of ``batch``'s live samplers from ``logits`` (float32 ``[S, V]``):
        mask rows of their cursors, temperature, top-k / top-p, draw; None when nothing is
        sampled.  With a synchronizing observer it waits for the ids."""
        if batch is None or not batch.samplers:
            return None
        assert logits is not None
        sampled = self.sampler.launch(logits, batch.samplers, batch.live())
        if self.observer is not None and self.observer.synchronize:
            sampled.result()  # cached: the scheduler reads the same ids
        return sampled

    def observe(self, observer: StepObserver | None) -> None:
        """Attach ``observer`` (told every step's phases) or, with None, detach the current one.
        A synchronizing observer turns the overlap scheduler off while attached.  Raises
        ``RuntimeError`` when one is already attached."""
        if observer is not None and self.observer is not None:
            raise RuntimeError("an observer is already attached to this engine")
        self.observer = observer
        sync = observer is not None and observer.synchronize
        self.scheduler.overlap = self.config.scheduler.overlap_schedule and not sync

    def has_unfinished(self) -> bool:
        return self.scheduler.has_work()

    def output(self, rid: int) -> RequestOutput:
        """The result of a finished request (``KeyError`` if unknown, ``RuntimeError`` if running)."""
        req = self._reqs[rid]
        if req.status is not Status.FINISHED:
            raise RuntimeError(f"request {rid} is still {req.status.value}")
        text = self.scheduler.text_bytes(req).decode("utf-8", errors="replace")
        return RequestOutput(rid, text, list(req.output_ids), req.finish_reason or "error", req.usage(), req.error, req.matched_stop)

    def _prepare(self, requests: Iterable[GenerateRequest]) -> tuple[list[int | None], list[RequestOutput | None]]:
        rids: list[int | None] = []
        errors: list[RequestOutput | None] = []
        for r in requests:
            try:
                rids.append(self.submit(r))
                errors.append(None)
            except RequestError as exc:
                rids.append(None)
                errors.append(RequestOutput(-1, "", [], "error", _empty_usage(), exc))
        return rids, errors

    def generate(self, requests: Sequence[GenerateRequest]) -> list[RequestOutput]:
        """Run ``requests`` concurrently to completion; outputs in input order.  A request that
        cannot be served gets ``finish_reason="error"`` with its ``error``; the others run."""
        rids, outs = self._prepare(requests)
        pending = {r for r in rids if r is not None}
        while pending:
            for chunk in self.step():
                if chunk.finished:
                    pending.discard(chunk.rid)
        return [o if o is not None else self.output(r) for r, o in zip(rids, outs)]  # type: ignore[arg-type]

    def stream(self, requests: Sequence[GenerateRequest]) -> Iterator[tuple[int, StreamChunk]]:
        """Run ``requests``, yielding ``(index, chunk)`` as text arrives; each request's last
        chunk has ``finished`` set.  Rejected requests yield one finished error chunk."""
        rids, outs = self._prepare(requests)
        index = {r: i for i, r in enumerate(rids) if r is not None}
        for i, o in enumerate(outs):
            if o is not None:
                yield i, StreamChunk(-1, "", True, "error", o.usage, o.error)
        pending = set(index)
        while pending:
            for chunk in self.step():
                if chunk.rid in index:
                    if chunk.finished:
                        pending.discard(chunk.rid)
                    yield index[chunk.rid], chunk

    def stats(self) -> EngineStats:
        radix = self.cache.radix
        finished = sum(1 for r in self._reqs.values() if r.status is Status.FINISHED)
        return EngineStats(
            forwards=self.scheduler.num_forwards,
            prefill_tokens_computed=self.cache.prefill_tokens_computed,
            cache_hit_tokens=radix.hit_tokens if radix else 0,
            cache_evicted_tokens=radix.evicted_tokens if radix else 0,
            retractions=sum(r.retractions for r in self._reqs.values()),
            finished=finished,
        )

    def forget(self, rid: int) -> None:
        """Drop a finished request's record (long-running servers)."""
        req = self._reqs.get(rid)
        if req is not None and req.status is Status.FINISHED:
            del self._reqs[rid]


def _empty_usage() -> Usage:
    return Usage(0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0)


def _done_probe(logits: torch.Tensor | None) -> Callable[[], bool]:
    """Whether the work queued so far on ``logits``' CUDA stream has run (an event recorded
    now, queried later); always true elsewhere (the forward ran synchronously)."""
    if logits is None or logits.device.type != "cuda":
        return lambda: True
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(logits.device))
    return event.query
