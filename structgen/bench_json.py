"""``structgen bench json``: JSON-decoding benchmark of the engine across workloads, modes and
concurrency levels, written as ``results.jsonl``, ``results.md`` and PNG plots.

Workloads (each request: a prompt, a constraint, ``max_tokens``; ``max_tokens`` is raised to
cover the longest output a finite constraint accepts, :func:`bound_max_tokens`, so only
unbounded languages can be cut):

- ``character``: SGLang's ``json_jump_forward`` character regex over its 50 Harry Potter names
  (``structgen/assets/bench``, Apache-2.0, sgl-project/sglang).
- ``extraction``: schemas and texts of the demo-model generator's held-out split.
- ``maskbench``: JSONSchemaBench schemas sampled with a fixed seed from
  ``../shared/fixtures/maskbench/data`` (skipped when absent; schemas the compiler refuses are
  left out and counted), with an instruction prompt; unbounded strings, arrays and numbers get
  bounds (:func:`bound_schema`) so that random-weight models finish.
- ``shared-prefix``: extraction queries behind one long few-shot prefix (radix-cache reuse).

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
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from structgen.fsm import CompilerConfig, Constraint, GrammarCompiler, TokenFSM, Vocabulary
from structgen.fsm.compiler import OutputValidationError
from structgen.fsm.errors import GrammarCompileError
from structgen.schemas import ConstraintError

from .engine import Engine, EngineConfig
from .request import GenerateRequest, RequestError, SamplingParams
from .step_profile import StepProfiler, profile_markdown

ASSETS = Path(__file__).resolve().parent / "assets" / "bench"
MASKBENCH_DIR = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "maskbench" / "data"

CHARACTER_REGEX = (
    r"""\{\n"""
    + r"""    "name": "[\w\d\s]{1,16}",\n"""
    + r"""    "house": "(Gryffindor|Slytherin|Ravenclaw|Hufflepuff)",\n"""
    + r"""    "blood status": "(Pure-blood|Half-blood|Muggle-born)",\n"""
    + r"""    "occupation": "(student|teacher|auror|ministry of magic|death eater|order of the phoenix)",\n"""
    + r"""    "wand": \{\n"""
    + r"""        "wood": "[\w\d\s]{1,16}",\n"""
    + r"""        "core": "[\w\d\s]{1,16}",\n"""
    + r"""        "length": [0-9]{1,2}\.[0-9]{0,2}\n"""
    + r"""    \},\n"""
    + r"""    "alive": "(Alive|Deceased)",\n"""
    + r"""    "patronus": "[\w\d\s]{1,16}",\n"""
    + r"""    "bogart": "[\w\d\s]{1,16}"\n"""
    + r"""\}"""
)  # sgl-project/sglang benchmark/json_jump_forward (Apache-2.0)

WORKLOADS = ("character", "extraction", "maskbench", "shared-prefix")
MODES = ("default", "no-jump-forward", "no-radix", "unconstrained", "no-cuda-graph")


class BenchRequest(NamedTuple):
    prompt: str
    constraint: Constraint
    max_tokens: int


class Record(NamedTuple):
    """One finished request: token counts, seconds from submission, validity (None: rejected)."""

    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    forced_tokens: int
    forwards: int
    ttft_s: float
    latency_s: float
    finish_reason: str
    valid: bool


def character_requests(n: int) -> list[BenchRequest]:
    names = [x.strip() for x in (ASSETS / "harry_potter_names.txt").read_text().splitlines() if x.strip()]
    c = Constraint.regex(CHARACTER_REGEX)
    prompt = "{} is a character in Harry Potter. Please fill in the following information about this character.\n"
    return [BenchRequest(prompt.format(names[i % len(names)]), c, 256) for i in range(n)]


def extraction_requests(n: int, seed: int) -> list[BenchRequest]:
    from .demo.data import generate_examples

    return [BenchRequest(e.prompt, Constraint.json_schema(e.schema), 200) for e in generate_examples(n, "heldout", seed)]


def shared_prefix_requests(n: int, seed: int, shots: int = 4) -> list[BenchRequest]:
    """Extraction queries behind ``shots`` worked examples (~120 tokens each with the demo
    model's tokenizer), so the prefix fits a 1,024-token context."""
    from .demo.data import generate_examples

    prefix = "".join(e.prompt + e.target + "\n\n" for e in generate_examples(shots, "train", seed + 1))
    return [BenchRequest(prefix + e.prompt, Constraint.json_schema(e.schema), 200) for e in generate_examples(n, "heldout", seed)]


def bound_schema(schema: Any, max_length: int = 32, max_items: int = 8, magnitude: int = 10**9) -> Any:
    """A copy of ``schema`` whose unbounded values get bounds, so that random-weight models
    give bounded outputs under every system alike: strings without ``maxLength`` (and without
    ``enum``/``const``) get ``maxLength`` = max(``minLength``, ``max_length``), arrays without
    ``maxItems`` get max(``minItems``, ``max_items``), integers and numbers without
    ``minimum``/``maximum`` get ±``magnitude``.  Fraction digits stay unbounded (JSON Schema
    cannot bound them)."""
    if isinstance(schema, list):
        return [bound_schema(x, max_length, max_items, magnitude) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: bound_schema(v, max_length, max_items, magnitude) for k, v in schema.items()}
    t = schema.get("type")
    types = set(t) if isinstance(t, list) else {t} if isinstance(t, str) else set()
    if "enum" in schema or "const" in schema:
        return out
    if "string" in types and "maxLength" not in schema:
        out["maxLength"] = max(int(schema.get("minLength", 0) or 0), max_length)
    if "array" in types and "maxItems" not in schema:
        out["maxItems"] = max(int(schema.get("minItems", 0) or 0), max_items)
    if types & {"integer", "number"}:
        if "minimum" not in schema and "exclusiveMinimum" not in schema:
            out["minimum"] = -magnitude
        if "maximum" not in schema and "exclusiveMaximum" not in schema:
            out["maximum"] = magnitude
    return out


def maskbench_requests(
    n: int, seed: int, root: Path = MASKBENCH_DIR, check: Callable[[Constraint], bool] | None = None
) -> list[BenchRequest]:
    """``n`` schemas sampled with ``seed`` (those ``check`` rejects are skipped); [] when the
    data folder is absent."""
    if not root.is_dir():
        return []
    files = sorted(root.glob("*.json"))
    random.Random(seed).shuffle(files)
    out: list[BenchRequest] = []
    for f in files:
        if len(out) >= n:
            break
        schema = bound_schema(json.loads(f.read_text())["schema"])
        c = Constraint.json_schema(schema)
        if check is not None and not check(c):
            continue
        text = json.dumps(schema)[:1500]
        out.append(BenchRequest(f"Write one JSON value that satisfies this JSON Schema:\n{text}\nJSON: ", c, 256))
    return out


MAX_TOKENS_CAP = 2048


def bound_max_tokens(
    reqs: Sequence[BenchRequest],
    max_length: Callable[[Constraint], int | None],
    cap: int = MAX_TOKENS_CAP,
    min_length: Callable[[Constraint], int | None] | None = None,
) -> list[BenchRequest]:
    """``reqs`` with ``max_tokens`` raised to 1 + the longest output their constraint accepts
    (in bytes, an upper bound on tokens: a token emits at least one byte; + 1 for EOS), at most
    ``cap``, so that a finite language is never cut by ``max_tokens``.  ``max_length``: bytes
    of the longest accepted string, None when unbounded; then ``min_length`` (bytes of the
    shortest, if given) raises it to cover the shortest output, so that every request can end
    valid.  Raises ``ValueError`` for ``cap`` < 1."""
    if cap < 1:
        raise ValueError(f"cap must be >= 1, got {cap}")
    out = []
    for r in reqs:
        n = max_length(r.constraint)
        if n is None and min_length is not None:
            n = min_length(r.constraint)
        out.append(r if n is None else r._replace(max_tokens=max(r.max_tokens, min(cap, n + 1))))
    return out


def build_workload(
    name: str,
    n: int,
    seed: int,
    check: Callable[[Constraint], bool] | None = None,
    *,
    shots: int = 4,
    maskbench_dir: str | os.PathLike[str] | None = None,
) -> list[BenchRequest]:
    """The requests of workload ``name`` (``shots``: worked examples in the shared prefix;
    ``maskbench_dir``: default :data:`MASKBENCH_DIR`).  Raises ``ValueError`` for an unknown
    name."""
    if name == "character":
        return character_requests(n)
    if name == "extraction":
        return extraction_requests(n, seed)
    if name == "shared-prefix":
        return shared_prefix_requests(n, seed, shots)
    if name == "maskbench":
        return maskbench_requests(n, seed, Path(maskbench_dir) if maskbench_dir else MASKBENCH_DIR, check=check)
    raise ValueError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")


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
                    out.finish_reason, out.finish_reason in ("stop", "length") and _valid(requests[i].constraint, out.text),
                )  # fmt: skip
                if on_done is not None:
                    on_done()
    wall = time.perf_counter() - t0
    return [r for r in records if r is not None], wall


def _valid(constraint: Constraint, text: str) -> bool:
    try:
        constraint.validate(text)
    except (OutputValidationError, ValueError):
        return False
    return True


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in [0, 1]) of ``values``; NaN when empty."""
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, max(0, round(q * (len(v) - 1))))]


def summarize(records: Sequence[Record], wall_s: float, peak_mem_bytes: int = 0) -> dict[str, float]:
    """Throughput and latency metrics of one run (times in ms).  ``validity`` counts every
    request: rejected ones are invalid, the others are valid when their text validates, whether
    they stopped or reached ``max_tokens`` (budget completion ends many of those valid);
    ``length_share``: served requests that reached ``max_tokens``; ``stopped_invalid``: requests
    that ended on their own with an invalid output (0 under a grammar)."""
    done = [r for r in records if r.finish_reason != "error"]
    tokens = sum(r.completion_tokens for r in done)
    prompt = sum(r.prompt_tokens for r in done)
    tpot = [(r.latency_s - r.ttft_s) / (r.completion_tokens - 1) * 1e3 for r in done if r.completion_tokens > 1]
    n = max(1, len(done))
    return {
        "requests": len(records),
        "req_per_s": len(done) / wall_s if wall_s > 0 else 0.0,
        "out_tok_per_s": tokens / wall_s if wall_s > 0 else 0.0,
        "ttft_p50_ms": percentile([r.ttft_s * 1e3 for r in done], 0.5),
        "ttft_p99_ms": percentile([r.ttft_s * 1e3 for r in done], 0.99),
        "tpot_p50_ms": percentile(tpot, 0.5),
        "tpot_p99_ms": percentile(tpot, 0.99),
        "forwards_per_req": sum(r.forwards for r in done) / n,
        "forced_share": sum(r.forced_tokens for r in done) / tokens if tokens else 0.0,
        "cache_hit_rate": sum(r.cached_tokens for r in done) / prompt if prompt else 0.0,
        "validity": sum(1 for r in records if r.valid) / len(records) if records else 0.0,
        "length_share": sum(1 for r in done if r.finish_reason == "length") / n if done else 0.0,
        "stopped_invalid": sum(1 for r in done if r.finish_reason == "stop" and not r.valid),
        "peak_gpu_mem_mb": peak_mem_bytes / 2**20,
        "wall_s": wall_s,
    }


COLUMNS = [
    ("workload", "workload"), ("mode", "mode"), ("concurrency", "conc"), ("requests", "requests"), ("req_per_s", "req/s"),
    ("out_tok_per_s", "out tok/s"), ("ttft_p50_ms", "TTFT p50 ms"), ("ttft_p99_ms", "TTFT p99 ms"), ("tpot_p50_ms", "TPOT p50 ms"),
    ("tpot_p99_ms", "TPOT p99 ms"), ("forwards_per_req", "forwards/req"), ("forced_share", "forced share"),
    ("cache_hit_rate", "cache hit"), ("validity", "valid"), ("length_share", "hit max_tokens"),
    ("stopped_invalid", "stopped invalid"), ("peak_gpu_mem_mb", "peak GPU MB"), ("compile_s", "untimed compile s"),
]  # fmt: skip


def markdown(rows: list[dict[str, Any]], metas: Sequence[dict[str, Any]]) -> str:
    """The results table, after one bullet list per part (``--append`` runs add parts)."""
    lines = ["# JSON-decoding benchmark", ""]
    for i, meta in enumerate(metas):
        if len(metas) > 1:
            lines.append(f"Part {i + 1}:")
        lines += [f"- {k}: `{v}`" if k == "command" else f"- {k}: {v}" for k, v in meta.items() if k != "skipped"]
        lines += [f"- skipped {x}" for x in meta.get("skipped", [])]
        lines.append("")
    lines += ["| " + " | ".join(h for _k, h in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        cells = [f"{r[k]:.3g}" if isinstance(r.get(k), float) else str(r.get(k, "–")) for k, _h in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], tpots: dict[str, list[float]], out: Path) -> list[Path]:
    """throughput.png (req/s vs concurrency, a line per mode, a panel per workload),
    tpot.png (TPOT distribution per mode), forced_share.png (per workload, default mode)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    workloads = sorted({r["workload"] for r in rows})
    fig, axes = plt.subplots(1, len(workloads), figsize=(4.5 * len(workloads), 3.6), squeeze=False)
    for ax, w in zip(axes[0], workloads):
        for mode in sorted({r["mode"] for r in rows if r["workload"] == w}):
            pts = sorted((r["concurrency"], r["req_per_s"]) for r in rows if r["workload"] == w and r["mode"] == mode)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=mode)
        ax.set_xscale("log", base=2)
        ax.set_title(w)
        ax.set_xlabel("concurrency")
        ax.set_ylabel("requests/s")
        ax.legend(fontsize=7)
    paths.append(_save(fig, out / "throughput.png"))

    fig, ax = plt.subplots(figsize=(6, 3.6))
    modes = sorted(m for m in tpots if tpots[m])
    ax.boxplot([tpots[m] for m in modes], showfliers=False)
    ax.set_xticks(range(1, len(modes) + 1), modes, rotation=20, fontsize=8)
    ax.set_ylabel("TPOT (ms)")
    ax.set_title("TPOT per request, all workloads and concurrencies")
    paths.append(_save(fig, out / "tpot.png"))

    fig, ax = plt.subplots(figsize=(5, 3.2))
    shares = {w: max((r["forced_share"] for r in rows if r["workload"] == w and r["mode"] == "default"), default=0.0) for w in workloads}
    ax.bar(list(shares), [100 * v for v in shares.values()])
    ax.set_ylabel("forced tokens (%)")
    ax.set_title("jump-forward: forced-token share (default mode)")
    paths.append(_save(fig, out / "forced_share.png"))
    return paths


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


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
    concurrency) (:mod:`structgen.baselines`, same weights); write ``results.jsonl``,
    ``results.md`` and the plots under ``out_dir``; return the summary rows.  ``waves``: see
    :func:`requests_at`; ``shots``: worked examples of the shared-prefix workload; ``append``:
    add to ``out_dir/results.jsonl`` (a new part; the reports cover all parts);
    ``warm_grammars``: compile every distinct constraint of a run before its clock starts, for
    the engine and the baselines alike (a server's steady state; the compile seconds are
    recorded as ``compile_s``).  The engine side compiles each workload's constraints once,
    with every token-reachable state's mask row precomputed (:func:`precompile_grammars`),
    and seeds each run's fresh compiler with them; the baselines compile theirs (xgrammar
    precomputes its token-mask cache) before each run.  ``profile``: time each engine step's
    phases (:class:`~structgen.step_profile.StepProfiler`; it synchronises the device after
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

    from .baselines import BASELINES, DESCRIPTIONS

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
        "commit": os.environ.get("STRUCTGEN_COMMIT") or _git_commit(),
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


def write_reports(out: Path) -> None:
    """``results.md`` and the plots from every part of ``out/results.jsonl``."""
    metas: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for line in (out / "results.jsonl").read_text().splitlines():
        item = json.loads(line)
        if "meta" in item:
            if set(item["meta"]) == {"skipped"} and metas:
                metas[-1]["skipped"] = item["meta"]["skipped"]
            else:
                metas.append(item["meta"])
        else:
            rows.append(item)
    (out / "results.md").write_text(markdown(rows, metas) + "\n")
    tpots: dict[str, list[float]] = {}
    for r in rows:
        tpots.setdefault(r["mode"], []).extend(r.get("tpots_ms", []))
    if rows:
        plot(rows, tpots, out)


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

    from .baselines import HFBaseline, load_hf_twin
    from .engine import eos_token_ids
    from .models.loader import load_hf_config

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


def _git_commit() -> str:
    import subprocess

    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
        ).stdout.strip()
    except OSError:
        return "?"
