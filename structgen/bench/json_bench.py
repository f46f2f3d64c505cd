"""``structgen bench json``: JSON-decoding benchmark of the engine across workloads
(:mod:`.workloads`), modes and concurrency levels, written as ``results.jsonl``, ``results.md``
and PNG plots (:mod:`.report`).

Modes (each a fresh engine, so no cache carries over): ``default`` (jump-forward, radix cache,
constrained, CUDA graphs), ``no-jump-forward``, ``no-radix``, ``unconstrained`` (same prompts and
``max_tokens``, no grammar; validity still checked), ``no-cuda-graph`` (CUDA only),
``no-prefill-while-compiling`` (a request waits for its grammar before its prompt prefills),
``defer-late-rows`` (a request whose mask row a row worker still computes once the forward is done
samples a step later instead of holding up the batch), ``prefill-auto`` (extend batches on
FlashInfer's own choice of paged prefill kernel, FA3 on Hopper, instead of the engine's FA2) and
``no-extend-as-decode`` (small extend batches on the paged prefill kernel instead of replayed
through the decode graphs, one row per token); modes joined by ``+`` combine.

Metrics per (workload, mode, concurrency): requests/s, output tokens/s, TTFT, grammar wait and
TPOT p50/p99, forwards per request, forced-token share, cache hit rate, validity rate, peak GPU
memory.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import json
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from structgen.bench.common import run_meta
from structgen.bench.report import Record, summarize, valid_output, write_reports
from structgen.bench.step_profile import StepProfiler, profile_markdown
from structgen.bench.workloads import WORKLOADS, BenchRequest, bound_max_tokens, build_workload, distinct_schemas, save_requests
from structgen.engine.engine import Engine, EngineConfig
from structgen.engine.model_runner import ModelRunner
from structgen.engine.request import GenerateRequest, RequestError, SamplingParams
from structgen.fsm import CompilerConfig, Constraint, GrammarCompiler, TokenFSM, Vocabulary
from structgen.fsm.errors import GrammarCompileError
from structgen.schemas import ConstraintError

MODES = (
    "default",
    "no-jump-forward",
    "no-radix",
    "unconstrained",
    "no-cuda-graph",
    "no-prefill-while-compiling",
    "defer-late-rows",
    "prefill-auto",
    "no-extend-as-decode",
)


def mode_config(base: EngineConfig, mode: str) -> tuple[EngineConfig, bool]:
    """(engine config, constrained?) of ``mode``; modes joined by ``+`` combine (``prefill-auto+no-extend-as-decode``).
    Raises ``ValueError`` for an unknown mode, or ``default`` in a combination."""
    parts = mode.split("+")
    for part in parts:
        if part not in MODES or (part == "default" and len(parts) > 1):
            raise ValueError(f"unknown mode {part!r} in {mode!r}; choose from {', '.join(MODES)}, joined by '+' to combine")
    cfg, constrained = base, True
    for part in parts:
        cfg, on = _apply_mode(cfg, part)
        constrained = constrained and on
    return cfg, constrained


def _apply_mode(cfg: EngineConfig, mode: str) -> tuple[EngineConfig, bool]:
    sched = cfg.scheduler
    if mode == "no-jump-forward":
        sched = dataclasses.replace(sched, jump_forward=False)
    if mode == "no-radix":
        sched = dataclasses.replace(sched, radix_cache=False)
    if mode == "no-prefill-while-compiling":
        sched = dataclasses.replace(sched, prefill_while_compiling=False)
    if mode == "defer-late-rows":
        sched = dataclasses.replace(sched, defer_late_rows=True)
    cfg = dataclasses.replace(cfg, scheduler=sched, cuda_graph=cfg.cuda_graph and mode != "no-cuda-graph")
    if mode == "prefill-auto":
        cfg = dataclasses.replace(cfg, prefill_kernel="auto")
    if mode == "no-extend-as-decode":
        cfg = dataclasses.replace(cfg, extend_as_decode=False)
    return cfg, mode != "unconstrained"


def run(
    engine: Engine, requests: Sequence[BenchRequest], concurrency: int, constrained: bool, on_done: Callable[[], None] | None = None
) -> tuple[list[Record], float]:
    """Keep at most ``concurrency`` requests in the engine until all finish (greedy); returns
    the records (input order) and the wall time in seconds."""
    queue = deque(enumerate(requests))
    inflight: dict[int, int] = {}
    records: list[Record | None] = [None] * len(requests)
    t0 = time.perf_counter()
    while queue or inflight:
        while queue and len(inflight) < concurrency:
            i, r = queue.popleft()
            try:
                rid = engine.submit(
                    GenerateRequest(r.prompt, SamplingParams(max_tokens=r.max_tokens), r.constraint if constrained else None)
                )
            except RequestError:
                records[i] = Record(0, 0, 0, 0, 0, 0.0, 0.0, "error", False)
                continue
            inflight[rid] = i
        for chunk in engine.step():
            if chunk.finished and chunk.rid in inflight:
                i = inflight.pop(chunk.rid)
                out = engine.output(chunk.rid)
                engine.forget(chunk.rid)
                u = out.usage
                records[i] = Record(
                    u.prompt_tokens, u.cached_tokens, u.completion_tokens, u.forced_tokens, u.forwards, u.ttft_s, u.latency_s,
                    out.finish_reason, out.finish_reason in ("stop", "length") and valid_output(requests[i].constraint, out.text),
                    u.grammar_s,
                )  # fmt: skip
                if on_done is not None:
                    on_done()
    wall = time.perf_counter() - t0
    return [r for r in records if r is not None], wall


def requests_at(num_requests: int, concurrency: int, waves: int) -> int:
    """Requests run at one concurrency level: ``num_requests``, or with ``waves`` > 0
    min(``num_requests``, max(4, ``waves`` × ``concurrency``)), so low levels stay short."""
    return num_requests if waves <= 0 else min(num_requests, max(4, waves * concurrency))


@dataclass(frozen=True)
class BenchConfig:
    """What one ``structgen bench json`` invocation runs (validated on construction; raises
    ``ValueError`` for an unknown workload, mode or baseline, a concurrency < 1,
    ``num_requests`` < 1, ``shots`` < 1, ``waves`` < 0 or a ``maskbench_dir`` that is not a
    folder).

    ``workloads`` × ``modes`` × ``concurrency`` engine runs, then ``baselines`` × workloads ×
    concurrency (:mod:`structgen.bench.baselines`, same weights); ``num_requests`` per run (see
    :func:`requests_at` for ``waves``); ``shots``: worked examples of the shared-prefix
    workload; ``out_dir``: where ``results.jsonl``, ``results.md`` and the plots go
    (``append``: add a part to ``results.jsonl``; the reports cover all parts);
    ``warm_grammars``: compile every distinct constraint of a run before its clock starts, for
    the engine and the baselines alike (a server's steady state; the compile seconds are
    recorded as ``compile_s``): the engine side compiles each workload's constraints once, with
    every token-reachable state's mask row precomputed (:func:`precompile_grammars`), and seeds
    each run's fresh compiler with them; the baselines compile theirs before each run.
    Otherwise every run starts with empty grammar caches on both sides and compiles count in
    TTFT (cold start).  ``profile``: time each engine step's phases
    (:class:`~structgen.bench.step_profile.StepProfiler`; it synchronises the device after every
    forward, so profiled runs are a little slower) into ``profile.md``.  ``model_label``: what
    the results call the model (default: its folder, relative to the checkout when inside it).
    ``distinct_schemas``: every object schema made unique per request
    (:func:`~structgen.bench.workloads.distinct_schemas`, as ``structgen bench peers`` sends them),
    so no request hits a grammar compiled for another.  ``save_requests``: write each
    workload's requests to ``requests-<workload>.jsonl`` (prompt, constraint kind and text,
    ``max_tokens``), so another engine can run exactly them."""

    workloads: tuple[str, ...] = ("character", "extraction")
    modes: tuple[str, ...] = ("default",)
    concurrency: tuple[int, ...] = (1, 16, 64)
    num_requests: int = 64
    out_dir: str = "benchmarks/results/bench-json-cpu"
    tokenizer: str | None = None
    seed: int = 0
    baselines: tuple[str, ...] = ()
    waves: int = 0
    shots: int = 4
    append: bool = False
    maskbench_dir: str | None = None
    command: str = ""
    progress: bool = True
    warm_grammars: bool = False
    profile: bool = False
    model_label: str | None = None
    distinct_schemas: bool = False
    save_requests: bool = False

    def __post_init__(self) -> None:
        from structgen.bench.baselines import BASELINES

        for w in self.workloads:
            if w not in WORKLOADS:
                raise ValueError(f"unknown workload {w!r}; choose from {', '.join(WORKLOADS)}")
        for m in self.modes:
            mode_config(EngineConfig(), m)
        for b in self.baselines:
            if b not in BASELINES:
                raise ValueError(f"unknown baseline {b!r}; choose from {', '.join(BASELINES)}")
        if not self.concurrency or min(self.concurrency) < 1:
            raise ValueError(f"concurrency levels must be ≥ 1, got {list(self.concurrency)}")
        if self.num_requests < 1:
            raise ValueError(f"num_requests must be ≥ 1, got {self.num_requests}")
        if self.shots < 1:
            raise ValueError(f"shots must be ≥ 1, got {self.shots}")
        if self.waves < 0:
            raise ValueError(f"waves must be ≥ 0 (0: num_requests at every level), got {self.waves}")
        if self.maskbench_dir is not None and not Path(self.maskbench_dir).is_dir():
            raise ValueError(f"maskbench_dir {self.maskbench_dir!r} is not a folder")


class _Workloads:
    """Each workload's requests, built once per invocation with the first compiler at hand (the
    check compiles on its own compiler, so engines stay cold) and ``max_tokens`` covering every
    finite constraint's longest output."""

    def __init__(self, config: BenchConfig) -> None:
        self.config = config
        self.reqs: dict[str, list[BenchRequest]] = {}
        self.check: _CompileCheck | None = None

    def get(self, w: str, vocab: Vocabulary, compiler: CompilerConfig) -> list[BenchRequest]:
        if w not in self.reqs:
            cfg = self.config
            self.check = check = _CompileCheck(vocab, compiler)
            reqs = build_workload(w, cfg.num_requests, cfg.seed, check, shots=cfg.shots, maskbench_dir=cfg.maskbench_dir)
            if cfg.distinct_schemas:
                reqs = distinct_schemas(reqs, str(cfg.seed))
            self.reqs[w] = bound_max_tokens(reqs, check.max_length, min_length=check.min_length)
            if cfg.save_requests:
                save_requests(Path(cfg.out_dir) / f"requests-{w}.jsonl", self.reqs[w])
        return self.reqs[w]

    def why_empty(self) -> str:
        refused = self.check.refusals if self.check is not None else []
        return f"all {len(refused)} refused, first: {refused[0][:300]}" if refused else "data absent"


class _Log:
    """The summary rows and ``results.jsonl`` (one line per run, with its TPOTs)."""

    def __init__(self, f: Any, warm_grammars: bool) -> None:
        self.f = f
        self.warm_grammars = warm_grammars
        self.rows: list[dict[str, Any]] = []

    def record(
        self, w: str, mode: str, conc: int, records: list[Record], wall: float, peak: int, compile_s: float, compile_ms: float | None = None
    ) -> None:
        """One run's row: its records summarized, ``compile_s`` (untimed compiles before it) and,
        for the engine's runs, ``compile_ms`` (mean milliseconds a compile of the run took where
        it ran, a compile process's shipping included; 0 when nothing compiled)."""
        row = {"workload": w, "mode": mode, "concurrency": conc, "warm_grammars": self.warm_grammars, "compile_s": compile_s,
               **summarize(records, wall, peak)}  # fmt: skip
        if compile_ms is not None:
            row["compile_mean_ms"] = compile_ms
        self.rows.append(row)
        tpot = [round((r.latency_s - r.ttft_s) / (r.completion_tokens - 1) * 1e3, 3) for r in records if r.completion_tokens > 1]
        self.f.write(json.dumps({**row, "tpots_ms": tpot}) + "\n")
        self.f.flush()


def bench_json(model: str, config: BenchConfig, base: EngineConfig | None = None) -> list[dict[str, Any]]:
    """Run ``config`` on ``model`` (engine settings ``base``), write the results under
    ``config.out_dir`` and return the summary rows."""
    import jsonschema  # noqa: F401  # before any clock: output validation imports it, and its first import is slow
    import torch

    base = base or EngineConfig()
    cuda = torch.cuda.is_available() and base.device in ("auto", "cuda")
    out = Path(config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if config.profile and not config.append:
        (out / "profile.md").write_text(f"# Engine step profile\n\n- command: `{config.command}`\n\n")
    workloads = _Workloads(config)
    skipped: list[str] = []
    with open(out / "results.jsonl", "a" if config.append else "w") as f:
        log = _Log(f, config.warm_grammars)
        f.write(json.dumps({"meta": _meta(model, config, base)}) + "\n")
        if config.modes:
            _run_engines(model, config, base, workloads, log, skipped, cuda)
        if config.baselines:
            _run_baselines(model, base, config, workloads, log)
        f.write(json.dumps({"meta": {"skipped": skipped}}) + "\n")
    write_reports(out)
    return log.rows


def _meta(model: str, config: BenchConfig, base: EngineConfig | None = None) -> dict[str, Any]:
    from structgen.bench.baselines import DESCRIPTIONS

    comp = (base or EngineConfig()).compiler
    workers = f"{comp.workers} compile threads"
    if comp.processes:
        workers = f"{comp.processes} compile processes, {comp.row_processes} row processes"
    return {
        **run_meta(config.command),
        "model": config.model_label or _shown_path(model),
        "grammar workers": workers,
        **{f"baseline {b}": DESCRIPTIONS[b] for b in config.baselines},
    }


def _shown_path(path: str) -> str:
    """``path`` relative to the checkout when it lies inside it (the embedded model), so results
    name no folder of the machine they ran on."""
    root = Path(__file__).resolve().parents[2]
    try:
        return str(Path(path).resolve().relative_to(root))
    except ValueError:
        return path


def _run_engines(
    model: str, config: BenchConfig, base: EngineConfig, workloads: _Workloads, log: _Log, skipped: list[str], cuda: bool
) -> None:
    """Every (workload, mode, concurrency) on a shared model runner (weights, KV pool, CUDA
    graphs): each run gets a fresh engine (scheduler, radix cache, compiler, mask pool) on its
    pools.  Modes that change the runner's own settings (:meth:`EngineConfig.runner_settings`:
    a kernel, graphs captured differently) run on a runner built for them, group by group, the
    previous one released first."""
    groups: dict[tuple[tuple[str, object], ...], list[str]] = {}  # runner settings -> its modes, in order
    for mode in config.modes:
        groups.setdefault(tuple(mode_config(base, mode)[0].runner_settings().items()), []).append(mode)
    warm_sets: dict[str, tuple[dict[str, TokenFSM], float]] = {}  # workload -> (key -> precomputed FSM, seconds)
    for modes in groups.values():  # each group's runner (and its engines) is dropped before the next is built
        built = dataclasses.replace(mode_config(base, modes[0])[0], cuda_graph=base.cuda_graph)  # no-cuda-graph only turns replays off
        runner = _warm_runner(model, built, config.tokenizer, cuda)
        _run_group(model, config, base, modes, runner, workloads, log, skipped, cuda, warm_sets)
        del runner


def _run_group(
    model: str,
    config: BenchConfig,
    base: EngineConfig,
    modes: list[str],
    runner: ModelRunner,
    workloads: _Workloads,
    log: _Log,
    skipped: list[str],
    cuda: bool,
    warm_sets: dict[str, tuple[dict[str, TokenFSM], float]],
) -> None:
    """The runs of ``modes`` (one runner's settings) on ``runner``, workload by workload."""
    for w in config.workloads:
        for mode in modes:
            if "no-cuda-graph" in mode.split("+") and not cuda:
                skipped.append(f"{w}/{mode}: CUDA graphs exist only on CUDA")
                continue
            cfg, constrained = mode_config(base, mode)
            for conc in config.concurrency:
                engine = Engine(model, cfg, tokenizer_path=config.tokenizer, runner=runner)
                try:
                    reqs = workloads.get(w, engine.vocab, engine.compiler.config)[: requests_at(config.num_requests, conc, config.waves)]
                    if not reqs:
                        skipped.append(f"{w}: no requests ({workloads.why_empty()})")
                        break
                    compile_s = 0.0
                    if config.warm_grammars and constrained:
                        compile_s = _seed_compiler(engine, w, workloads.reqs[w], reqs, warm_sets)
                    before = engine.compiler.stats()
                    records, wall, peak = _timed_run(engine, reqs, conc, constrained, config, f"{w} · {mode} · c={conc}", cuda)
                    after = engine.compiler.stats()
                finally:
                    engine.close()
                misses = after.misses - before.misses
                compile_ms = (after.compile_s - before.compile_s) / misses * 1e3 if misses else 0.0
                log.record(w, mode, conc, records, wall, peak, compile_s, compile_ms)


def _warm_runner(model: str, cfg: EngineConfig, tokenizer: str | None, cuda: bool) -> ModelRunner:
    """A model runner built with ``cfg``, after one untimed request (kernel JIT, FlashInfer's on a
    fresh machine, stays out of the runs); the CUDA caching allocator is emptied first, so the
    memory of a runner dropped before is free for this one."""
    if cuda:
        import torch

        gc.collect()
        torch.cuda.empty_cache()
    first = Engine(model, cfg, tokenizer_path=tokenizer)
    first.generate([GenerateRequest("Warm-up: ", SamplingParams(max_tokens=8), Constraint.regex(r"[a-z ]{1,12}"))])
    first.close()
    return first.runner


def _seed_compiler(
    engine: Engine, w: str, all_reqs: list[BenchRequest], reqs: list[BenchRequest], warm_sets: dict[str, tuple[dict[str, TokenFSM], float]]
) -> float:
    """Put the workload's precompiled grammars into ``engine``'s compiler; their compile seconds."""
    if w not in warm_sets:
        warm_sets[w] = precompile_grammars(engine.vocab, engine.compiler.config, all_reqs)
    fsms, seconds = warm_sets[w]
    for r in reqs:
        got = fsms.get(r.constraint.key)
        if got is not None:
            engine.compiler.put(r.constraint, got)
    return seconds


def _timed_run(
    engine: Engine, reqs: list[BenchRequest], conc: int, constrained: bool, config: BenchConfig, title: str, cuda: bool
) -> tuple[list[Record], float, int]:
    """One run of ``reqs`` (profiled when asked): records, wall seconds, peak device bytes."""
    import torch
    from tqdm import tqdm

    if cuda:
        torch.cuda.reset_peak_memory_stats()
    bar = tqdm(total=len(reqs), desc=title, disable=not config.progress, leave=False)
    profiler = StepProfiler() if config.profile else None
    if profiler is not None:
        profiler.attach(engine)
    try:
        records, wall = run(engine, reqs, conc, constrained, on_done=functools.partial(bar.update, 1))
    finally:
        if profiler is not None:
            profiler.detach()
        bar.close()
    if profiler is not None:
        with open(Path(config.out_dir) / "profile.md", "a") as f:
            f.write(profile_markdown(f"{title} · {len(reqs)} requests", profiler.summary(wall)) + "\n")
    return records, wall, torch.cuda.max_memory_allocated() if cuda else 0


def _run_baselines(model: str, base: EngineConfig, config: BenchConfig, workloads: _Workloads, log: _Log) -> None:
    """Every (workload, baseline, concurrency) on the transformers twin of ``model`` (loaded
    once, after every engine is closed, so the engine runs had the device to themselves)."""
    import gc

    import torch
    from tqdm import tqdm
    from transformers import AutoTokenizer

    from structgen.bench.baselines import HFBaseline, load_hf_twin
    from structgen.engine.engine import eos_token_ids
    from structgen.models.loader import load_hf_config

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    tok = AutoTokenizer.from_pretrained(config.tokenizer or model, local_files_only=True)
    eos = eos_token_ids(model, load_hf_config(model), tok)
    vocab = Vocabulary.from_tokenizer(tok, eos_token_ids=eos)
    device = base.torch_device()
    hf_model, _ = load_hf_twin(model, device=device, dtype=base.dtype, random_weights_seed=base.random_weights_seed)
    cuda = device.type == "cuda"
    for name in config.baselines:
        runner = HFBaseline(name, hf_model, tok, vocab, eos)
        for w in config.workloads:
            all_reqs = workloads.get(w, vocab, base.compiler)
            for conc in config.concurrency:
                reqs = all_reqs[: requests_at(config.num_requests, conc, config.waves)]
                if not reqs:
                    break
                runner.grammars.cache.clear()  # like a fresh engine: no grammar carried over from the last run
                warm = config.warm_grammars
                compile_s = warm_up_grammars(functools.partial(_baseline_compile, runner), reqs) if warm else 0.0
                if cuda:
                    torch.cuda.reset_peak_memory_stats()
                bar = tqdm(total=len(reqs), desc=f"{w} {name} c={conc}", disable=not config.progress, leave=False)
                records, wall = runner.run(reqs, conc, on_done=functools.partial(bar.update, 1))
                bar.close()
                log.record(w, name, conc, records, wall, torch.cuda.max_memory_allocated() if cuda else 0, compile_s)


def _baseline_compile(runner: Any, c: Constraint) -> None:
    try:
        runner.grammars.get(c, runner.compile_timeout_s)
    except Exception:  # a refusal is cached and makes the request an error record in the run
        pass


def precompile_grammars(
    vocab: Vocabulary, config: CompilerConfig, reqs: Sequence[BenchRequest], processes: int | None = None
) -> tuple[dict[str, TokenFSM], float]:
    """The warm start of the engine side: every distinct constraint of ``reqs`` compiled with
    the mask rows of all its token-reachable states precomputed (``precompute_states`` up to
    the state cap; our compile-time counterpart of xgrammar's precomputed token-mask cache), on
    ``processes`` worker processes (default: the CPU count, at most 16).  Returns ``({key:
    TokenFSM}, seconds)``; refused constraints are left out (the engine refuses them again)."""
    procs = processes or min(16, os.cpu_count() or 1)
    compiler = GrammarCompiler(vocab, dataclasses.replace(config, precompute_states=config.max_states, cache_dir=None))
    t0 = time.perf_counter()
    got = compiler.precompile([r.constraint for r in reqs], processes=procs)
    return {k: v for k, v in got.items() if isinstance(v, TokenFSM)}, time.perf_counter() - t0


def warm_up_grammars(compile_fn: Callable[[Constraint], Any], reqs: Sequence[BenchRequest]) -> float:
    """Compile each distinct constraint of ``reqs`` once with ``compile_fn`` (results land in
    the caller's grammar cache); returns the seconds it took."""
    t0 = time.perf_counter()
    seen: set[str] = set()
    for r in reqs:
        if r.constraint.key not in seen:
            seen.add(r.constraint.key)
            compile_fn(r.constraint)
    return time.perf_counter() - t0


class _CompileCheck:
    """Compiles on a separate compiler, so the engine's own cache stays cold (compile time is
    part of every workload's TTFT alike).  Calling it says whether a constraint compiles (the
    refusal messages collect in ``refusals``); :meth:`max_length` gives an upper bound on the
    bytes of its longest accepted output, None when unbounded or refused; :meth:`min_length`
    its shortest."""

    def __init__(self, vocab: Vocabulary, config: CompilerConfig) -> None:
        self.compiler = GrammarCompiler(vocab, config)
        self.refusals: list[str] = []

    def __call__(self, c: Constraint) -> bool:
        try:
            self.compiler.compile(c)
        except (ConstraintError, GrammarCompileError) as e:
            self.refusals.append(f"{type(e).__name__}: {e}")
            return False
        return True

    def max_length(self, c: Constraint) -> int | None:
        """The automaton's ``length_bound``: an upper bound the compile derives from the regex
        IR (a little above the exact longest output where objects have members: a separator
        is counted after each), so no state is expanded here; the exact longest path expands
        every state of the automaton (minutes for a few hundred MaskBench schemas).  None
        when unbounded or refused."""
        try:
            return self.compiler.compile(c).dfa.length_bound
        except (ConstraintError, GrammarCompileError):
            return None

    def min_length(self, c: Constraint) -> int | None:
        """Bytes of the shortest accepted output; None when refused."""
        try:
            fsm = self.compiler.compile(c)
        except (ConstraintError, GrammarCompileError):
            return None
        return fsm.distance(fsm.initial)
