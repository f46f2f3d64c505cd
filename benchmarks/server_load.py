"""Load test of the HTTP server: N requests at concurrency C mixing JSON Schemas, regexes and
free text (a third streamed), against a server started in a process of its own (or ``--url``),
with its engine in a process of its own or on a thread of the front end (``--placements``),
and optionally the same requests through ``structgen.Engine`` alone (``--engine-alone``).

Reports requests/s, latency p50/p99 (client side), TTFT and TPOT p50/p99 (server timings),
validity of every schema / regex output (jsonschema / ``re.fullmatch``), lost requests, and the
CPU time of each process (load generator, front end, engine) per wall second.

    python benchmarks/server_load.py                       # CPU: tiny random Llama + GPT-2 tokenizer
    python benchmarks/server_load.py --preset llama3-8b --tokenizer LLAMA3_TOKENIZER \
        --concurrency 16 64 256 512 --placements process thread --engine-alone      # GPU
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import httpx
from _pyspy import PySpy, descendants, render
from _server_meters import CpuMeter, gc_column, gc_pauses
from _server_workload import FEW_SHOT, Job, build_workload, validate_output

from structgen.bench.common import percentile

HERE = Path(__file__).resolve().parent


class Record(NamedTuple):
    kind: str
    stream: bool
    status: int
    latency_s: float
    ttft_ms: float | None
    total_ms: float | None
    completion_tokens: int
    forced_tokens: int
    valid: bool | None
    error: str | None
    queue_ms: float | None = None  # arrival in the engine → first forward (the grammar wait included)
    grammar_ms: float | None = None  # arrival in the engine → grammar ready


async def _one(client: httpx.AsyncClient, job: Job) -> Record:
    t0 = time.perf_counter()
    stream = bool(job.body.get("stream"))
    try:
        if stream:
            final: dict[str, Any] | None = None
            async with client.stream("POST", "/v1/structured", json=job.body) as resp:
                if resp.status_code != 200:
                    await resp.aread()
                    return Record(job.kind, True, resp.status_code, time.perf_counter() - t0, None, None, 0, 0, False, resp.text[:200])
                async for line in resp.aiter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        event = json.loads(line[6:])
                        if event.get("object") == "structured.final" or "error" in event:
                            final = event
            if final is None or "error" in final:
                return Record(job.kind, True, 200, time.perf_counter() - t0, None, None, 0, 0, False, json.dumps(final)[:200])
            payload = final
        else:
            resp = await client.post("/v1/structured", json=job.body)
            if resp.status_code != 200:
                return Record(job.kind, False, resp.status_code, time.perf_counter() - t0, None, None, 0, 0, False, resp.text[:200])
            payload = resp.json()
    except httpx.HTTPError as exc:
        return Record(job.kind, stream, 0, time.perf_counter() - t0, None, None, 0, 0, False, repr(exc))
    except ValueError as exc:  # an event that is not one line of JSON
        return Record(job.kind, stream, 200, time.perf_counter() - t0, None, None, 0, 0, False, f"unreadable event: {exc}")
    usage, timings = payload["usage"], payload["timings"]
    return Record(
        job.kind,
        stream,
        200,
        time.perf_counter() - t0,
        timings["ttft_ms"],
        timings["total_ms"],
        usage["completion_tokens"],
        usage["forced_tokens"],
        validate_output(job, payload),
        None,
        timings["queue_ms"],
        timings["compile_ms"],
    )


async def run_load(url: str, jobs: list[Job], concurrency: int, *, timeout_s: float = 600.0) -> tuple[list[Record], float]:
    """Send ``jobs`` with at most ``concurrency`` in flight; returns the records (input order)
    and the wall time in seconds."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    sem = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=timeout_s, limits=limits) as client:

        async def bounded(job: Job) -> Record:
            async with sem:
                return await _one(client, job)

        t0 = time.perf_counter()
        records = await asyncio.gather(*(bounded(j) for j in jobs))
        return list(records), time.perf_counter() - t0


def _load_shard(url: str, jobs: list[Job], concurrency: int) -> list[Record]:
    return asyncio.run(run_load(url, jobs, concurrency))[0]


class LoadGenerator:
    """``processes`` client processes (spawned once, kept) sharing each level's jobs round-robin,
    each with its share of the concurrency: one Python process with httpx tops out near one
    core, below what the server can answer.  ``run`` returns the records (input order) and the
    wall time from the first send to the last answer; ``pids`` for CPU accounting."""

    def __init__(self, processes: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.processes = processes
        self.pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"))
        list(self.pool.map(abs, range(processes)))  # started before any level is timed
        self.pids = descendants(os.getpid())  # the pool's processes (no server is running yet)

    def run(self, url: str, jobs: list[Job], concurrency: int) -> tuple[list[Record], float]:
        k = max(1, min(self.processes, concurrency))
        shares = [concurrency // k + (i < concurrency % k) for i in range(k)]  # they add up to concurrency
        slots = [i for i in range(k) for _ in range(shares[i])]  # jobs dealt in proportion to each one's share
        index: list[list[int]] = [[] for _ in range(k)]
        for j in range(len(jobs)):
            index[slots[j % len(slots)]].append(j)
        t0 = time.perf_counter()
        futures = [self.pool.submit(_load_shard, url, [jobs[j] for j in idx], share) for idx, share in zip(index, shares)]
        parts = [f.result() for f in futures]
        wall = time.perf_counter() - t0
        records: list[Record] = [None] * len(jobs)  # type: ignore[list-item]
        for idx, part in zip(index, parts):
            for j, rec in zip(idx, part):
                records[j] = rec
        return records, wall

    def close(self) -> None:
        self.pool.shutdown()


def summarize(records: list[Record], wall_s: float, first_wave: int = 0) -> dict[str, Any]:
    """Counts, requests/s, output tokens/s, latency / TTFT / TPOT percentiles (ms), validity;
    ``ttft_p99_later_ms``: TTFT p99 of the requests after the first ``first_wave`` of
    ``records`` (input order: the load generator sends its first C at once, and those arrive
    together while the later ones arrive as others finish), NaN when none is left.  Raises
    ``ValueError`` for a negative ``first_wave``."""
    if first_wave < 0:
        raise ValueError(f"first_wave must be >= 0, got {first_wave}")
    answered = [r.status == 200 and r.error is None for r in records]
    ok = [r for r, a in zip(records, answered) if a]
    later = [r.ttft_ms for r, a in zip(records[first_wave:], answered[first_wave:]) if a and r.ttft_ms is not None]
    checked = [r for r in ok if r.valid is not None]
    tpot = [
        (r.total_ms - r.ttft_ms) / (r.completion_tokens - 1)
        for r in ok
        if r.ttft_ms is not None and r.total_ms is not None and r.completion_tokens > 1
    ]
    lat = [r.latency_s * 1e3 for r in ok]
    ttft = [r.ttft_ms for r in ok if r.ttft_ms is not None]
    tokens = sum(r.completion_tokens for r in ok)
    return {
        "requests": len(records),
        "ok": len(ok),
        "lost": sum(1 for r in records if r.status == 0),
        "errors": sum(1 for r in records if r.status != 200 or r.error is not None),
        "valid": sum(1 for r in checked if r.valid),
        "checked": len(checked),
        "req_per_s": len(ok) / wall_s,
        "out_tok_per_s": tokens / wall_s,
        "forced_share": sum(r.forced_tokens for r in ok) / max(1, tokens),
        "latency_p50_ms": percentile(lat, 0.5),
        "latency_p99_ms": percentile(lat, 0.99),
        "ttft_p50_ms": percentile(ttft, 0.5),
        "ttft_p99_ms": percentile(ttft, 0.99),
        "ttft_p99_later_ms": percentile(later, 0.99),
        "tpot_p50_ms": percentile(tpot, 0.5),
        "tpot_p99_ms": percentile(tpot, 0.99),
        "queue_p50_ms": percentile([r.queue_ms for r in ok if r.queue_ms is not None], 0.5),
        "queue_p99_ms": percentile([r.queue_ms for r in ok if r.queue_ms is not None], 0.99),
        "grammar_p99_ms": percentile([r.grammar_ms for r in ok if r.grammar_ms is not None], 0.99),
        "wall_s": wall_s,
    }


def _server_main(config: Any, placement: str, ready: Any) -> None:
    """A server's front-end process: the app with its engine in a process of its own
    (``placement="process"``, what ``structgen serve`` runs) or on a thread of this process
    (``"thread"``); serves on loopback until SIGTERM."""
    import signal as _signal

    from structgen.engine.engine import Engine
    from structgen.server import ServerThread, create_app

    engine = Engine(config.model, config.engine) if placement == "thread" else None
    app = create_app(config, engine=engine)
    _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGTERM})
    with ServerThread(app, start_timeout_s=1800) as st:
        ready.put((st.url, app.state.service.client.info.pid))
        _signal.sigwait({_signal.SIGTERM})
    if engine is not None:
        engine.close()


def run_engine_alone(engine: Any, jobs: list[Job], concurrency: int) -> tuple[list[Record], float]:
    """The same jobs through ``structgen.Engine`` directly (no HTTP, no front end), at most
    ``concurrency`` in flight: the engine-alone ceiling.  Tokenization is part of submit."""
    from collections import deque

    from structgen.fsm import Constraint

    from structgen.engine.request import GenerateRequest, SamplingParams

    def request(job: Job) -> GenerateRequest:
        b = job.body
        params = SamplingParams(max_tokens=b["max_tokens"], temperature=b["temperature"], seed=b["seed"])
        constraint = (
            Constraint.json_schema(b["json_schema"]) if "json_schema" in b else Constraint.regex(b["regex"]) if "regex" in b else None
        )
        return GenerateRequest(b["prompt"], params, constraint)

    todo, records = deque(jobs), []
    inflight: dict[int, Job] = {}
    t0 = time.perf_counter()
    while todo or inflight:
        while todo and len(inflight) < concurrency:
            job = todo.popleft()
            inflight[engine.submit(request(job))] = job
        for chunk in engine.step():
            if chunk.finished:
                job, u = inflight.pop(chunk.rid), chunk.usage
                out = engine.output(chunk.rid)
                engine.forget(chunk.rid)
                payload: dict[str, Any] = {"finish_reason": out.finish_reason, "text": out.text}
                if job.kind == "schema":
                    try:
                        payload["output"] = json.loads(out.text)
                    except ValueError:
                        pass
                valid = validate_output(job, payload)
                records.append(Record(job.kind, False, 200, u.latency_s, u.ttft_s * 1e3, u.latency_s * 1e3,
                                      u.completion_tokens, u.forced_tokens, valid, None, u.queue_s * 1e3, u.grammar_s * 1e3))  # fmt: skip
    return records, time.perf_counter() - t0


def _model_folder(args: argparse.Namespace, tmp: str) -> tuple[str, int | None, str]:
    """The model folder, its random-weight seed (None: weights on disk) and a label."""
    if args.preset:
        from structgen.models.presets import write_preset_folder

        return os.fspath(write_preset_folder(args.preset, tmp, tokenizer_dir=args.tokenizer)), 0, args.preset
    if args.model:
        return args.model, None, args.model
    from structgen.models.presets import write_random_preset_checkpoint

    tok = args.tokenizer or HERE.parent / "tests" / "fixtures" / "gpt2"
    return (
        str(write_random_preset_checkpoint("llama-gpt2-tiny", tmp, tok)),
        None,
        "preset llama-gpt2-tiny: random Llama (2 layers, hidden 64) + GPT-2 tokenizer",
    )


def table_row(
    where: str, conc: int, records: list[Record], wall: float, cpu: tuple[float, ...], gc_text: str
) -> tuple[list[Any], list[str]]:
    """One level's results row (the columns of ``main``'s table) and its first errors."""
    s = summarize(records, wall, first_wave=conc)
    row = [
        where,
        conc,
        s["requests"],
        s["ok"],
        s["lost"],
        f"{s['valid']}/{s['checked']}",
        round(s["req_per_s"], 2),
        round(s["out_tok_per_s"], 1),
        round(s["latency_p50_ms"], 1),
        round(s["latency_p99_ms"], 1),
        round(s["ttft_p50_ms"], 1),
        round(s["ttft_p99_ms"], 1),
        round(s["ttft_p99_later_ms"], 1),
        round(s["tpot_p50_ms"], 2),
        round(s["tpot_p99_ms"], 2),
        f"{s['queue_p50_ms']:.1f} / {s['queue_p99_ms']:.1f} / {s['grammar_p99_ms']:.1f}",
        " / ".join(f"{100 * c:.0f}" for c in cpu) if cpu else "",
        gc_text,
    ]
    return row, [r.error for r in records if r.error][:3]


class Level(NamedTuple):
    """One finished level: its results row and its first errors (:func:`table_row`)."""

    row: list[Any]
    errors: list[str]


def announce(where: str, conc: int, records: list[Record], wall: float, cpu: tuple[float, ...], gc_text: str) -> Level:
    """The level's row (:func:`table_row`), printed as soon as the level ends (a run stopped
    part-way still shows the levels it finished)."""
    level = Level(*table_row(where, conc, records, wall, cpu, gc_text))
    print("level done: | " + " | ".join(str(c) for c in level.row) + " |", flush=True)
    return level


def _run_server(
    config: Any, placement: str, levels: dict[int, list[Job]], warm: list[Job], gen: LoadGenerator, profile: list[str] | None
) -> list[Level]:
    """Start a server process (``placement`` of its engine), warm it up, and run each level;
    with ``profile`` (a list), py-spy summaries of the front end and the engine per level are
    appended to it as markdown."""
    import multiprocessing
    import signal as _signal

    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Queue()
    proc = ctx.Process(target=_server_main, args=(config, placement, ready))
    proc.start()
    try:
        url, engine_pid = ready.get(timeout=1800)
        meter = CpuMeter(gen.pids, proc.pid, engine_pid)  # type: ignore[arg-type]
        gen.run(url, warm, min(32, len(warm)))  # compiles, CUDA graphs, first-use allocations
        out = []
        for conc, jobs in levels.items():
            spy = PySpy() if profile is not None else None
            if spy is not None and spy.available:
                spy.start({"front end": proc.pid, "engine": engine_pid} if engine_pid != proc.pid else {"front end and engine": proc.pid})  # type: ignore[dict-item]
            before, gc_before = meter.read(), gc_pauses(url)
            records, wall = gen.run(url, jobs, conc)
            after, gc_after = meter.read(), gc_pauses(url)
            if spy is not None and profile is not None:
                profile += render(f"engine {placement}, concurrency {conc}", spy.stop()) if spy.available else ["py-spy is not installed"]
            cpu = tuple((b - a) / wall for a, b in zip(before, after))
            out.append(announce(f"server, engine {placement}", conc, records, wall, cpu, gc_column(gc_before, gc_after)))
        return out
    finally:
        os.kill(proc.pid, _signal.SIGTERM)  # type: ignore[arg-type]
        proc.join(120)
        if proc.is_alive():
            proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default=None, help="an already running server (default: start one in a process of its own)")
    ap.add_argument("--model", default=None, help="model folder (default: a tiny random Llama with the GPT-2 tokenizer)")
    ap.add_argument("--preset", default=None, help="a random-weight preset (llama3-8b) with --tokenizer")
    ap.add_argument("--tokenizer", default=None, help="tokenizer folder (default: the GPT-2 test fixture for the tiny model)")
    ap.add_argument("--num-requests", type=int, default=500)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64])
    ap.add_argument(
        "--placements",
        nargs="+",
        choices=["process", "thread"],
        default=["process"],
        help="where the server's engine runs: its own process (what `structgen serve` runs) or a thread of the front end",
    )
    ap.add_argument("--client-processes", type=int, default=4, help="load-generator processes (httpx; each tops out near one core)")
    ap.add_argument("--profile", action="store_true", help="sample the front end and the engine with py-spy at every level")
    ap.add_argument("--engine-alone", action="store_true", help="also run the same requests through structgen.Engine (no HTTP)")
    ap.add_argument("--compile-processes", default="auto", help="the server's compile processes (as `structgen serve` takes them)")
    ap.add_argument("--row-processes", default="auto", help="the server's row processes (as `structgen serve` takes them)")
    ap.add_argument(
        "--no-gc-freeze",
        action="store_true",
        help="the server's processes leave their heaps to the collector (EngineConfig.gc_freeze=False)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(HERE / "results" / "server-load"))
    ap.add_argument("--stem", default=None, help="results file stem (default: server-load-<cpu|gpu>)")
    args = ap.parse_args()
    if args.num_requests < 1 or args.client_processes < 1 or min(args.concurrency) < 1:
        ap.error("--num-requests, --client-processes and every --concurrency must be ≥ 1")

    from _gpu_common import run_meta, write_results

    meta = run_meta()
    rows, notes = [], []
    jobs = build_workload(args.num_requests, args.seed)
    # each concurrency level gets its own prompts (a repeat would be served from the radix cache)
    # and at least 4 requests per client slot, so a level is a steady state, not one burst and its tail
    levels = {conc: build_workload(max(args.num_requests, 4 * conc), args.seed + 1000 * k) for k, conc in enumerate(args.concurrency)}
    warm = build_workload(32, args.seed + 1)
    kinds = {k: sum(1 for j in jobs if j.kind == k) for k in ("schema", "regex", "text")}
    runs: list[Level] = []
    gen = LoadGenerator(args.client_processes)
    workers = ""
    profile: list[str] | None = [] if args.profile else None
    if args.url:
        label = args.url
        for conc, level in levels.items():
            gc_before = gc_pauses(args.url)
            records, wall = gen.run(args.url, level, conc)
            runs.append(announce("server at --url", conc, records, wall, (), gc_column(gc_before, gc_pauses(args.url))))
    else:
        from structgen.fsm import CompilerConfig

        from structgen.engine.config import worker_processes
        from structgen.engine.engine import Engine, EngineConfig
        from structgen.engine.scheduler import SchedulerConfig
        from structgen.runtime.memory import MemoryConfig
        from structgen.server import ServerConfig

        try:
            procs = worker_processes(args.compile_processes, args.row_processes, "auto", reserved=2)  # as `serve` picks them
        except ValueError as e:
            ap.error(str(e))
        workers = f"{procs['processes']} compile processes, {procs['row_processes']} row processes"
        workers += "; heaps left to the collector (--no-gc-freeze)" if args.no_gc_freeze else "; heaps frozen after start-up"
        tmp = tempfile.mkdtemp(prefix="structgen-load-")
        model, random_seed, label = _model_folder(args, tmp)
        top = max(64, *args.concurrency)
        engine = EngineConfig(
            random_weights_seed=random_seed,
            memory=MemoryConfig(max_context=2048, mem_fraction=0.8),
            scheduler=SchedulerConfig(max_running_requests=top),
            compiler=CompilerConfig(**procs),
            gc_freeze=not args.no_gc_freeze,
        )
        config = ServerConfig(model=model, max_queue=max(1024, 2 * top), engine=engine)
        for placement in args.placements:  # one server per placement; each concurrency level is a client setting
            runs += _run_server(config, placement, levels, warm, gen, profile)
        if args.engine_alone:
            with Engine(model, engine) as eng:
                run_engine_alone(eng, warm, min(32, len(warm)))
                for conc, level in levels.items():
                    t0, gc_before = time.process_time(), gc_pauses(engine=eng)
                    records, wall = run_engine_alone(eng, level, conc)
                    alone = (0.0, 0.0, (time.process_time() - t0) / wall)
                    runs.append(announce("engine alone", conc, records, wall, alone, gc_column(gc_before, gc_pauses(engine=eng))))
    gen.close()
    for done in runs:
        rows.append(done.row)
        if done.errors:
            notes.append(f"- {done.row[0]}, concurrency {done.row[1]}: first errors: {done.errors}")
    notes += [
        f"- model: {label}; workload: {args.num_requests} `/v1/structured` requests ({kinds['schema']} JSON Schema, {kinds['regex']} regex, "
        f"{kinds['text']} free text at seed {args.seed}; every third streamed; half share a {len(FEW_SHOT)}-character few-shot "
        f"prefix); concurrency level k uses seed {args.seed} + 1000k and max({args.num_requests}, 4 × concurrency) requests, after a "
        "32-request warm-up, on one server per engine placement.",
        "- server, engine process: the front end (HTTP, validation, tokenization, SSE) in one process and the engine in its own "
        "(what `structgen serve` runs); server, engine thread: the engine stepped on a thread of the front end's process; engine "
        "alone: the same requests submitted to `structgen.Engine` directly, at most C in flight (tokenization included, no HTTP). "
        f"The load generator runs in {args.client_processes} client processes (httpx, the level's jobs dealt round-robin, each "
        "with its share of the concurrency), apart from the server's processes."
        + (f" The server's grammar workers: {workers}." if workers else ""),
        "- CPU %: CPU seconds per wall second of the load generator (all its processes) / the server's front-end process / the engine process with its "
        "compile and row worker processes (100 = one core busy); with the engine on a thread, the front-end figure includes the "
        "engine's own thread and the engine figure counts only its worker processes.",
        "- latency: client side, request sent → last byte; TTFT / TPOT: the server's `timings` (TTFT from the request's arrival, "
        "tokenization and the wait for the grammar included; TPOT = (total − TTFT) / (completion tokens − 1)); engine alone: "
        "the engine's usage (from submit). TTFT p99 after the first C: the same over the requests after the first C of a "
        "level (those C are sent at once and arrive together; the later ones arrive one by one as others finish).",
        "- queue: the engine's time from a request's arrival to its first forward (a prompt prefills while its grammar compiles); "
        "grammar: arrival to grammar ready; both from the server's `timings` (engine alone: the request's usage).",
        "- valid: schema outputs parsed and checked with jsonschema (formats included), regex outputs with `re.fullmatch`.",
        "- GC: the garbage collector's pauses of 50 ms or more during the level, and the seconds of all its pauses, per process "
        "(the server's `structgen_gc_pause_seconds`; with the engine on a thread both processes are the front end's).",
    ]
    header = ["run", "concurrency", "requests", "answered 200", "lost", "valid", "req/s", "out tok/s",
              "latency p50 ms", "latency p99 ms", "TTFT p50 ms", "TTFT p99 ms", "TTFT p99 after the first C ms", "TPOT p50 ms", "TPOT p99 ms",
              "queue p50 / p99, grammar p99 ms", "CPU % client / front end / engine", "GC pauses ≥ 50 ms (time in GC) front end / engine"]  # fmt: skip
    stem = args.stem or ("server-load-gpu" if "H200" in meta["machine"] or "NVIDIA" in meta["machine"] else "server-load-cpu")
    write_results(args.out, stem, "HTTP server load", meta, header, rows, notes)
    if profile:
        intro = ["# HTTP server load: where each process's CPU time goes", "", f"- command: `{meta['command']}`",
                 f"- machine: {meta['machine']}", f"- commit: {meta['commit']}", "",
                 "py-spy samples (100/s, running threads only) of the server's front-end process and its engine process "
                 "during each level; self: the function on top of the stack; inclusive: anywhere on it.", ""]  # fmt: skip
        Path(args.out, f"{stem}-profile.md").write_text("\n".join(intro + profile) + "\n")


if __name__ == "__main__":
    main()
