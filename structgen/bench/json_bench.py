"""``structgen bench json``: JSON-decoding benchmark of the engine across workloads
(:mod:`.workloads`), modes and concurrency levels, written as ``results.jsonl``, ``results.md``
and PNG plots (:mod:`.report`).

Modes (each a fresh engine, so no cache carries over): ``default`` (jump-forward, radix cache,
constrained, CUDA graphs), ``no-jump-forward``, ``no-radix``, ``unconstrained`` (same prompts and
``max_tokens``, no grammar; validity still checked) and ``no-cuda-graph`` (CUDA only).

Metrics per (workload, mode, concurrency): requests/s, output tokens/s, TTFT and TPOT p50/p99,
forwards per request, forced-token share, cache hit rate, validity rate, peak GPU memory.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from structgen.bench.common import git_commit
from structgen.bench.report import Record, summarize, valid_output, write_reports
from structgen.bench.step_profile import StepProfiler, profile_markdown
from structgen.bench.workloads import WORKLOADS, BenchRequest, bound_max_tokens, build_workload
from structgen.engine.engine import Engine, EngineConfig
from structgen.engine.request import GenerateRequest, RequestError, SamplingParams
from structgen.fsm import CompilerConfig, Constraint, GrammarCompiler, TokenFSM, Vocabulary
from structgen.fsm.errors import GrammarCompileError
from structgen.schemas import ConstraintError

MODES = ("default", "no-jump-forward", "no-radix", "unconstrained", "no-cuda-graph")


def mode_config(base: EngineConfig, mode: str) -> tuple[EngineConfig, bool]:
    """(engine config, constrained?) of ``mode``.  Raises ``ValueError`` for an unknown mode."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    sched = base.scheduler
    if mode == "no-jump-forward":
        sched = dataclasses.replace(sched, jump_forward=False)
    if mode == "no-radix":
        sched = dataclasses.replace(sched, radix_cache=False)
    cfg = dataclasses.replace(base, scheduler=sched, cuda_graph=base.cuda_graph and mode != "no-cuda-graph")
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
                )  # fmt: skip
                if on_done is not None:
                    on_done()
    wall = time.perf_counter() - t0
    return [r for r in records if r is not None], wall


def requests_at(num_requests: int, concurrency: int, waves: int) -> int:
    """Requests run at one concurrency level: ``num_requests``, or with ``waves`` > 0
    min(``num_requests``, max(4, ``waves`` × ``concurrency``)), so low levels stay short."""
    return num_requests if waves <= 0 else min(num_requests, max(4, waves * concurrency))


def bench_json(
    model: str,
    *,
    workloads: Sequence[str],
    modes: Sequence[str],
    concurrency: Sequence[int],
    num_requests: int,
    out_dir: str,
    base: EngineConfig | None = None,
    tokenizer: str | None = None,
    seed: int = 0,
    baselines: Sequence[str] = (),
    waves: int = 0,
    shots: int = 4,
    append: bool = False,
    maskbench_dir: str | None = None,
    command: str = "",
    progress: bool = True,
    warm_grammars: bool = False,
    profile: bool = False,
) -> list[dict[str, Any]]:
    """Run every (workload, mode, concurrency) on ``model``, then every (workload, baseline,
    concurrency) (:mod:`structgen.bench.baselines`, same weights); write ``results.jsonl``,
    ``results.md`` and the plots under ``out_dir``; return the summary rows.  ``waves``: see
    :func:`requests_at`; ``shots``: worked examples of the shared-prefix workload; ``append``:
    add to ``out_dir/results.jsonl`` (a new part; the reports cover all parts);
    ``warm_grammars``: compile every distinct constraint of a run before its clock starts, for
    the engine and the baselines alike (a server's steady state; the compile seconds are
    recorded as ``compile_s``).  The engine side compiles each workload's constraints once,
    with every token-reachable state's mask row precomputed (:func:`precompile_grammars`),
    and seeds each run's fresh compiler with them; the baselines compile theirs (xgrammar
    precomputes its token-mask cache) before each run.  ``profile``: time each engine step's
    phases (:class:`~structgen.bench.step_profile.StepProfiler`; it synchronises the device after
    every forward, so profiled runs are a little slower) and add a section per run to
    ``profile.md``.  Otherwise every run starts with empty grammar caches on both
    sides and compiles count in TTFT (cold start).  Raises
    ``ValueError`` for an unknown workload, mode or baseline, a concurrency < 1,
    ``num_requests`` < 1, ``shots`` < 1, ``waves`` < 0 or a ``maskbench_dir`` that is not a
    folder."""
    import platform

    import jsonschema  # noqa: F401  # before any clock: output validation imports it, and its first import is slow
    import torch
    from tqdm import tqdm

    from structgen.bench.baselines import BASELINES, DESCRIPTIONS

    for w in workloads:
        if w not in WORKLOADS:
            raise ValueError(f"unknown workload {w!r}; choose from {', '.join(WORKLOADS)}")
    for m in modes:
        mode_config(EngineConfig(), m)
    for b in baselines:
        if b not in BASELINES:
            raise ValueError(f"unknown baseline {b!r}; choose from {', '.join(BASELINES)}")
    if not concurrency or min(concurrency) < 1:
        raise ValueError(f"concurrency levels must be ≥ 1, got {list(concurrency)}")
    if num_requests < 1:
        raise ValueError(f"num_requests must be ≥ 1, got {num_requests}")
    if shots < 1:
        raise ValueError(f"shots must be ≥ 1, got {shots}")
    if waves < 0:
        raise ValueError(f"waves must be ≥ 0 (0: num_requests at every level), got {waves}")
    if maskbench_dir is not None and not Path(maskbench_dir).is_dir():
        raise ValueError(f"maskbench_dir {maskbench_dir!r} is not a folder")
    base = base or EngineConfig()
    cuda = torch.cuda.is_available() and base.device in ("auto", "cuda")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if profile and not append:
        (out / "profile.md").write_text(f"# Engine step profile\n\n- command: `{command}`\n\n")
    meta = {
        "command": command,
        "machine": f"{torch.cuda.get_device_name(0) if cuda else 'CPU only'}; {os.cpu_count()} CPU cores; {platform.platform()}",
        "commit": os.environ.get("STRUCTGEN_COMMIT") or git_commit(),
        "model": model,
        "date": time.strftime("%Y-%m-%d"),
        **{f"baseline {b}": DESCRIPTIONS[b] for b in baselines},
    }
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    workload_reqs: dict[str, list[BenchRequest]] = {}
    warm_sets: dict[str, tuple[dict[str, TokenFSM], float]] = {}  # workload -> (key -> precomputed FSM, seconds)
    check: _CompileCheck | None = None

    def build(w: str, check: _CompileCheck) -> list[BenchRequest]:
        reqs = build_workload(w, num_requests, seed, check, shots=shots, maskbench_dir=maskbench_dir)
        return bound_max_tokens(reqs, check.max_length, min_length=check.min_length)

    def record(log: Any, w: str, mode: str, conc: int, records: list[Record], wall: float, peak: int, compile_s: float) -> None:
        row = {"workload": w, "mode": mode, "concurrency": conc, "warm_grammars": warm_grammars, "compile_s": compile_s,
               **summarize(records, wall, peak)}  # fmt: skip
        rows.append(row)
        tpot = [round((r.latency_s - r.ttft_s) / (r.completion_tokens - 1) * 1e3, 3) for r in records if r.completion_tokens > 1]
        log.write(json.dumps({**row, "tpots_ms": tpot}) + "\n")
        log.flush()

    # One model runner (weights, KV pool, CUDA graphs) serves every engine run: each mode
    # gets a fresh engine (scheduler, radix cache, compiler, mask pool) on the same pools.
    runner = None
    if modes:
        first = Engine(model, base, tokenizer_path=tokenizer)
        # One untimed request, so kernel JIT (FlashInfer on a fresh machine) stays out of the runs.
        first.generate([GenerateRequest("Warm-up: ", SamplingParams(max_tokens=8), Constraint.regex(r"[a-z ]{1,12}"))])
        first.close()
        runner = first.runner
        del first
    with open(out / "results.jsonl", "a" if append else "w") as log:
        log.write(json.dumps({"meta": meta}) + "\n")
        for w in workloads:
            for mode in modes:
                if mode == "no-cuda-graph" and not cuda:
                    skipped.append(f"{w}/{mode}: CUDA graphs exist only on CUDA")
                    continue
                cfg, constrained = mode_config(base, mode)
                for conc in concurrency:
                    engine = Engine(model, cfg, tokenizer_path=tokenizer, runner=runner)
                    try:
                        if w not in workload_reqs:
                            check = _CompileCheck(engine.vocab, engine.compiler.config)
                            workload_reqs[w] = build(w, check)
                        reqs = workload_reqs[w][: requests_at(num_requests, conc, waves)]
                        if not reqs:
                            refused = check.refusals if check is not None else []
                            why = f"all {len(refused)} refused, first: {refused[0][:300]}" if refused else "data absent"
                            skipped.append(f"{w}: no requests ({why})")
                            break
                        compile_s = 0.0
                        if warm_grammars and constrained:
                            if w not in warm_sets:
                                warm_sets[w] = precompile_grammars(engine.vocab, engine.compiler.config, workload_reqs[w])
                            compile_s = warm_sets[w][1]
                            for r in reqs:
                                got = warm_sets[w][0].get(r.constraint.key)
                                if got is not None:
                                    engine.compiler.put(r.constraint, got)
                        if cuda:
                            torch.cuda.reset_peak_memory_stats()
                        bar = tqdm(total=len(reqs), desc=f"{w} {mode} c={conc}", disable=not progress, leave=False)
                        profiler = StepProfiler() if profile else None
                        if profiler is not None:
                            profiler.attach(engine)
                        try:
                            records, wall = run(engine, reqs, conc, constrained, on_done=functools.partial(bar.update, 1))
                        finally:
                            if profiler is not None:
                                profiler.detach()
                        bar.close()
                        if profiler is not None:
                            with open(out / "profile.md", "a") as f:
                                f.write(profile_markdown(f"{w} · {mode} · c={conc} · {len(reqs)} requests", profiler.summary(wall)) + "\n")
                        peak = torch.cuda.max_memory_allocated() if cuda else 0
                    finally:
                        engine.close()
                    record(log, w, mode, conc, records, wall, peak, compile_s)
        runner = None
        if baselines:
            _run_baselines(model, base, tokenizer, workloads, workload_reqs, build, baselines, concurrency, num_requests, waves,
                           progress, warm_grammars, lambda *a: record(log, *a))  # fmt: skip
        log.write(json.dumps({"meta": {"skipped": skipped}}) + "\n")
    write_reports(out)
    return rows


def _run_baselines(
    model: str,
    base: EngineConfig,
    tokenizer: str | None,
    workloads: Sequence[str],
    workload_reqs: dict[str, list[BenchRequest]],
    build: Callable[[str, _CompileCheck], list[BenchRequest]],
    baselines: Sequence[str],
    concurrency: Sequence[int],
    num_requests: int,
    waves: int,
    progress: bool,
    warm_grammars: bool,
    record: Callable[[str, str, int, list[Record], float, int, float], None],
) -> None:
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
    tok = AutoTokenizer.from_pretrained(tokenizer or model, local_files_only=True)
    eos = eos_token_ids(model, load_hf_config(model), tok)
    vocab = Vocabulary.from_tokenizer(tok, eos_token_ids=eos)
    check = _CompileCheck(vocab, base.compiler)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu") if base.device == "auto" else torch.device(base.device)
    hf_model, _ = load_hf_twin(model, device=device, dtype=base.dtype, random_weights_seed=base.random_weights_seed)
    cuda = device.type == "cuda"
    for name in baselines:
        runner = HFBaseline(name, hf_model, tok, vocab, eos)
        for w in workloads:
            if w not in workload_reqs:
                workload_reqs[w] = build(w, check)
            for conc in concurrency:
                reqs = workload_reqs[w][: requests_at(num_requests, conc, waves)]
                if not reqs:
                    break
                runner.grammars.cache.clear()  # like a fresh engine: no grammar carried over from the last run
                compile_s = warm_up_grammars(functools.partial(_baseline_compile, runner), reqs) if warm_grammars else 0.0
                if cuda:
                    torch.cuda.reset_peak_memory_stats()
                bar = tqdm(total=len(reqs), desc=f"{w} {name} c={conc}", disable=not progress, leave=False)
                records, wall = runner.run(reqs, conc, on_done=functools.partial(bar.update, 1))
                bar.close()
                record(w, name, conc, records, wall, torch.cuda.max_memory_allocated() if cuda else 0, compile_s)


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
    refusal messages collect in ``refusals``); :meth:`max_length` gives the bytes of its
    longest accepted output, None when unbounded or refused; :meth:`min_length` its shortest."""

    def __init__(self, vocab: Vocabulary, config: CompilerConfig) -> None:
        self.compiler = GrammarCompiler(vocab, config)
        self.refusals: list[str] = []
        self._lengths: dict[str, int | None] = {}

    def __call__(self, c: Constraint) -> bool:
        try:
            self.compiler.compile(c)
        except (ConstraintError, GrammarCompileError) as e:
            self.refusals.append(f"{type(e).__name__}: {e}")
            return False
        return True

    def max_length(self, c: Constraint) -> int | None:
        if c.key not in self._lengths:
            try:
                self._lengths[c.key] = self.compiler.compile(c).dfa.max_length()
            except (ConstraintError, GrammarCompileError):
                self._lengths[c.key] = None
        return self._lengths[c.key]

    def min_length(self, c: Constraint) -> int | None:
        """Bytes of the shortest accepted output; None when refused."""
        try:
            fsm = self.compiler.compile(c)
        except (ConstraintError, GrammarCompileError):
            return None
        return fsm.distance(fsm.initial)
