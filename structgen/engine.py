"""The engine: tokenizer + model runner + scheduler, stepped as schedule → run batch →
process results (nano-vllm's loop)."""

from __future__ import annotations

import gc
import itertools
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from structgen.fsm import CompilerConfig, Constraint, GrammarCompiler, Vocabulary
from structgen.kernels import BACKENDS as KERNEL_BACKENDS

from .flashinfer_backend import check_decode_kernel
from .memory import MemoryConfig
from .model_runner import ModelRunner, check_attention_backend
from .radix_cache import RadixCache
from .request import GenerateRequest, Req, RequestError, RequestOutput, SamplingParams, Status, StreamChunk, Usage
from .sampling import Sampler
from .scheduler import CacheManager, GrammarManager, Scheduler, SchedulerConfig


@dataclass(frozen=True)
class EngineConfig:
    """Engine settings: ``device`` ("auto": CUDA when available, else CPU), ``dtype`` ("auto",
    "float32", "bfloat16", "float16"), ``seed`` (generator of unseeded sampled requests),
    ``mask_backend`` ("auto" | "torch" | "triton") and ``attention_backend`` ("auto" |
    "torch" | "flashinfer") kernel choices, ``decode_kernel`` (the decode graphs' attention:
    "auto" | "flashinfer" | "triton"), ``cuda_graph`` / ``cuda_graph_max_bs`` /
    ``cuda_graph_max_extend_tokens`` (decode and small-extend graphs with FlashInfer on CUDA; 0
    extend tokens: decode graphs only), ``mask_pool_rows`` (device-resident FSM mask rows),
    ``random_weights_seed`` (draw weights on the device instead of reading a checkpoint: for
    benchmarks of large configurations), ``gc_freeze`` (move the heap into the garbage
    collector's permanent generation after start-up and whenever a newly compiled grammar
    starts serving, so full collections never walk model, tokenizer and automaton objects:
    such a pass walks every cached automaton while all running requests wait; vLLM freezes
    its start-up heap the same way; :meth:`Engine.close` unfreezes),
    and the layer configs.  Raises ``ValueError`` for values out of range."""

    device: str = "auto"
    dtype: str = "auto"
    seed: int = 0
    mask_backend: str = "auto"
    attention_backend: str = "auto"
    decode_kernel: str = "auto"
    cuda_graph: bool = True
    cuda_graph_max_bs: int = 256
    cuda_graph_max_extend_tokens: int = 1024
    mask_pool_rows: int = 4096
    random_weights_seed: int | None = None
    gc_freeze: bool = True
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    compiler: CompilerConfig = field(default_factory=CompilerConfig)

    def __post_init__(self) -> None:
        if self.device != "auto":
            torch.device(self.device)  # raises RuntimeError for a malformed device string
        if self.mask_backend not in KERNEL_BACKENDS:
            raise ValueError(f"mask_backend must be one of {', '.join(KERNEL_BACKENDS)}; got {self.mask_backend!r}")
        check_attention_backend(self.attention_backend)
        check_decode_kernel(self.decode_kernel)
        if self.cuda_graph_max_bs < 1:
            raise ValueError(f"cuda_graph_max_bs must be ≥ 1, got {self.cuda_graph_max_bs}")
        if self.cuda_graph_max_extend_tokens < 0:
            raise ValueError(f"cuda_graph_max_extend_tokens must be ≥ 0, got {self.cuda_graph_max_extend_tokens}")
        if self.mask_pool_rows < 1:
            raise ValueError(f"mask_pool_rows must be ≥ 1, got {self.mask_pool_rows}")
        if not isinstance(self.gc_freeze, bool):
            raise ValueError(f"gc_freeze must be a bool, got {self.gc_freeze!r}")


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
    reloading; ``config.cuda_graph`` switches its replays on or off; memory and kernel settings
    stay the runner's).  Raises ``ModelLoadError`` / ``UnsupportedModelError`` for a bad
    folder and ``ValueError`` for a runner whose pools are not empty.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        config: EngineConfig | None = None,
        *,
        tokenizer_path: str | os.PathLike[str] | None = None,
        runner: ModelRunner | None = None,
    ) -> None:
        self.config = cfg = config or EngineConfig()
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else torch.device(cfg.device)
        self.model_path = os.fspath(model_path)
        if runner is not None:
            if not runner.pools_empty():
                raise ValueError("the reused ModelRunner still holds KV slots or req-to-token rows: close its engine first")
            runner.use_cuda_graph = cfg.cuda_graph
            device = runner.device
        else:
            runner = ModelRunner(
                self.model_path,
                cfg.memory,
                device=device,
                dtype=cfg.dtype,
                attention_backend=cfg.attention_backend,
                cuda_graph=cfg.cuda_graph,
                cuda_graph_max_bs=cfg.cuda_graph_max_bs,
                cuda_graph_max_extend_tokens=cfg.cuda_graph_max_extend_tokens,
                random_weights_seed=cfg.random_weights_seed,
                decode_kernel=cfg.decode_kernel,
            )
        self.runner = runner
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(os.fspath(tokenizer_path or model_path), local_files_only=True)
        self.eos_token_ids = eos_token_ids(self.model_path, self.runner.hf_config, self.tokenizer)
        self.vocab = Vocabulary.from_tokenizer(self.tokenizer, eos_token_ids=self.eos_token_ids)
        self.vocab.prepare()  # trie tables and the sorted order: built at start-up, not in a request's step
        self.compiler = GrammarCompiler(self.vocab, cfg.compiler)
        radix = RadixCache(self.runner.allocator) if cfg.scheduler.radix_cache else None
        self.cache = CacheManager(self.runner.req_to_token, self.runner.allocator, radix)
        sampler = Sampler(
            self.runner.vocab_size,
            self.vocab.size,
            device=device,
            mask_backend=cfg.mask_backend,
            pool_rows=cfg.mask_pool_rows,
            future=self.runner.future_ids,
        )
        self.scheduler = Scheduler(
            cfg.scheduler,
            self.cache,
            GrammarManager(self.compiler, gc_freeze=cfg.gc_freeze),
            sampler,
            self.vocab.token_bytes,
            frozenset(self.eos_token_ids),
        )
        self._rids = itertools.count()
        self._generator = torch.Generator().manual_seed(cfg.seed)
        self._reqs: dict[int, Req] = {}
        self._closed = False
        if cfg.gc_freeze:
            gc.collect()
            gc.freeze()

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
            if self.config.gc_freeze:
                gc.unfreeze()  # what this engine held may now be collected

    # ------------------------------------------------------------------ requests

    def tokenize(self, prompt: Any) -> list[int]:
        """Prompt → ids: text (the tokenizer's special tokens added), chat messages (the
        tokenizer's chat template with the generation prompt) or a list of ids.  Raises
        ``RequestError``."""
        tok = self.tokenizer
        if isinstance(prompt, str):
            ids = list(tok(prompt)["input_ids"])
        elif isinstance(prompt, Sequence) and prompt and all(isinstance(m, dict) for m in prompt):
            if not getattr(tok, "chat_template", None):
                raise RequestError(
                    f"prompt: chat messages need a chat template, and the tokenizer of {self.model_path!r} has none; pass text",
                    param="prompt",
                )
            try:
                text = tok.apply_chat_template(list(prompt), add_generation_prompt=True, tokenize=False)
            except Exception as exc:  # jinja errors, bad roles
                raise RequestError(f"prompt: the chat template rejected the messages: {exc}", param="prompt") from None
            ids = list(tok(text, add_special_tokens=False)["input_ids"])
        elif isinstance(prompt, Sequence) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            bad = [t for t in prompt if not 0 <= t < self.runner.vocab_size]
            if bad:
                raise RequestError(f"prompt: token ids {bad[:5]} outside the vocabulary [0, {self.runner.vocab_size})", param="prompt")
            ids = list(prompt)
        else:
            raise RequestError("prompt must be a non-empty string, a list of chat messages (dicts) or a list of token ids", param="prompt")
        if not ids:
            raise RequestError("prompt is empty after tokenization", param="prompt")
        return ids

    def submit(self, request: GenerateRequest) -> int:
        """Queue ``request``; returns its id.  Raises ``RequestError`` (bad prompt or
        parameter) without touching other requests."""
        if self._closed:
            raise RuntimeError("engine is closed")
        if not isinstance(request.params, SamplingParams):
            raise RequestError("params must be a SamplingParams", param="params")
        if request.constraint is not None and not isinstance(request.constraint, Constraint):
            raise RequestError("constraint must be a structgen.Constraint", param="constraint")
        ids = self.tokenize(request.prompt)
        ctx = self.runner.max_context
        if len(ids) >= ctx:
            raise RequestError(
                f"prompt has {len(ids)} tokens; the context is {ctx} tokens (room for at least one generated token is needed)",
                param="prompt",
            )
        cap = self.runner.allocator.capacity
        if len(ids) >= cap:
            raise RequestError(f"prompt has {len(ids)} tokens; the KV pool holds {cap}", param="prompt")
        params = request.params
        room = min(ctx, cap) - len(ids)
        if params.max_tokens > room:
            params = SamplingParams(**{**params.__dict__, "max_tokens": room})
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
    def step(self) -> list[StreamChunk]:
        """One engine step: schedule → run batch → process results (with the overlap
        scheduler, the results processed are the previous step's, while this one runs)."""
        batch = self.scheduler.schedule()
        if batch is None and self.scheduler.inflight is None and len(self.scheduler.grammar):
            self.scheduler.grammar.wait(0.05)  # nothing to run until a compile finishes
        logits = self.runner.forward(batch.forward) if batch is not None else None
        return self.scheduler.process_results(batch, logits)

    def has_unfinished(self) -> bool:
        return self.scheduler.has_work()

    def output(self, rid: int) -> RequestOutput:
        """The result of a finished request (``KeyError`` if unknown, ``RuntimeError`` if running)."""
        req = self._reqs[rid]
        if req.status is not Status.FINISHED:
            raise RuntimeError(f"request {rid} is still {req.status.value}")
        text = self.scheduler.text_bytes(req).decode("utf-8", errors="replace")
        return RequestOutput(rid, text, list(req.output_ids), req.finish_reason or "error", req.usage(), req.error)

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
