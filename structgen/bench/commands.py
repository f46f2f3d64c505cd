"""``structgen bench``: its arguments and its commands (``json``, ``peers``, ``conformance``)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any


def add_bench(sub: Any) -> None:
    """``structgen bench json``, ``structgen bench conformance`` and ``structgen bench peers``."""
    bench = sub.add_parser("bench", help="benchmarks")
    bsub = bench.add_subparsers(dest="bench", required=True)
    bj = bsub.add_parser("json", help="JSON-decoding benchmark: workloads × modes × concurrency, with plots")
    src_model = bj.add_mutually_exclusive_group()
    src_model.add_argument("--model", default=None, help="local model folder (default: the embedded demo model)")
    src_model.add_argument("--config", default=None, help="a random-weight preset (llama3-8b); needs --random-weights and --tokenizer")
    bj.add_argument("--random-weights", action="store_true", help="draw the --config weights at random on the device")
    bj.add_argument("--tokenizer", default=None, help="tokenizer folder (for --config)")
    bj.add_argument("--workload", default="character,extraction,maskbench,shared-prefix", help="comma list")
    bj.add_argument("--modes", default="default,no-jump-forward,no-radix,unconstrained,no-cuda-graph", help="comma list")
    bj.add_argument("--baselines", default="", help="comma list of hf-xgrammar, hf-outlines-core (same weights, batch-synchronous)")
    bj.add_argument("--num-requests", type=int, default=64, help="requests per run (the cap when --waves is given)")
    bj.add_argument("--waves", type=int, default=0, help="run min(N, max(4, waves × concurrency)) requests per level (0: N)")
    bj.add_argument("--shots", type=int, default=4, help="worked examples in the shared-prefix workload's prefix")
    bj.add_argument("--append", action="store_true", help="add to --out's results.jsonl; the reports cover every part")
    bj.add_argument(
        "--warm-grammars",
        action="store_true",
        help="compile each run's constraints before its clock starts, engine and baselines alike (steady state; the "
        "engine's with every reachable state's mask row precomputed, on worker processes); "
        "default: every run starts with empty grammar caches and compiles count in TTFT",
    )
    bj.add_argument("--compile-processes", default="auto", help="the engine's compile worker processes (0: threads; auto: as serve)")
    bj.add_argument("--row-processes", default="auto", help="the engine's row worker processes (needs --compile-processes; auto: as serve)")
    bj.add_argument("--maskbench-dir", default=None, help="JSONSchemaBench maskbench/data folder (maskbench is skipped without it)")
    bj.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    bj.add_argument("--device", default="auto")
    bj.add_argument("--dtype", default="auto")
    bj.add_argument("--seed", type=int, default=0)
    bj.add_argument("--out", default="benchmarks/results/bench-json-cpu")
    bj.add_argument("--no-progress", action="store_true")
    bj.add_argument(
        "--distinct-schemas",
        action="store_true",
        help="make every object schema unique per request (an optional property named after it), as bench peers does",
    )
    bj.add_argument("--save-requests", action="store_true", help="write each workload's requests to OUT/requests-WORKLOAD.jsonl")
    bj.add_argument(
        "--profile",
        action="store_true",
        help="time each engine step's phases (device synced after every forward) into profile.md; profiled runs are a little slower",
    )
    conf = bsub.add_parser("conformance", help="JSON-Schema-Test-Suite and MaskBench through the compile layer")
    conf.add_argument("--tokenizer", default=None, help="local Hugging Face tokenizer folder (required unless --merge)")
    conf.add_argument("--suites", default="test-suite,maskbench", help="comma list of test-suite, maskbench")
    conf.add_argument("--test-suite", default=None, help="JSON-Schema-Test-Suite root (its tests/ folder inside)")
    conf.add_argument("--maskbench", default=None, help="JSONSchemaBench maskbench/data folder")
    conf.add_argument("--maskbench-limit", type=int, default=None, help="seeded sample of N MaskBench schemas")
    conf.add_argument("--timeout-s", type=float, default=10.0)
    conf.add_argument("--max-states", type=int, default=50_000)
    conf.add_argument("--samples", type=int, default=5, help="random automaton samples validated per schema")
    conf.add_argument("--workers", type=int, default=2)
    conf.add_argument(
        "--precompute-states",
        type=int,
        default=0,
        help="mask rows computed during each compile (CompilerConfig.precompute_states; 0: lazy, on first visit)",
    )
    conf.add_argument(
        "--precompute-budget-s",
        type=float,
        default=None,
        help="stop each compile's eager rows this many seconds after it began (CompilerConfig.precompute_budget_s)",
    )
    conf.add_argument(
        "--no-pause-gc",
        dest="pause_gc",
        action="store_false",
        help="the garbage collector as Python has it: on during compiles (CompilerConfig.pause_gc=False) and the heap never "
        "frozen (default: paused during compiles, the heap frozen after start-up and when a grammar starts serving, as the "
        "engine has it; for A/B runs)",
    )
    conf.add_argument(
        "--product-cache-mb",
        type=int,
        default=128,
        help="MiB of eager sub-automata each worker keeps across the schemas it compiles (CompilerConfig.product_cache_mb; "
        "0: off; for A/B runs)",
    )
    conf.add_argument(
        "--anchors",
        default="llguidance,xgrammar",
        help="comma list of llguidance, xgrammar run on the same schemas and instances (none: structgen alone)",
    )
    conf.add_argument("--shard", default=None, help="I/N: run every N-th schema from the I-th (0-based) into a shard file for --merge")
    conf.add_argument(
        "--merge", nargs="+", default=None, metavar="SHARD_JSON", help="report the N shard files of one run together (runs nothing)"
    )
    conf.add_argument("--out", default="benchmarks/results/conformance")
    _add_bench_peers(bsub)


def _add_bench_peers(bsub: Any) -> None:
    peers = bsub.add_parser("peers", help="the JSON workloads over HTTP against a running structgen, vLLM or SGLang server")
    peers.add_argument("--endpoint", default=None, help="LABEL=FLAVOR@URL, FLAVOR structgen, vllm or sglang (unless --render)")
    peers.add_argument("--served-model", default="default", help="model name sent in OpenAI requests (vLLM: --served-model-name)")
    peers.add_argument("--engine", default="", help="engine version and flags, recorded with the results")
    peers.add_argument("--workload", default="character,extraction", help="comma list of character, extraction, maskbench, shared-prefix")
    peers.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    peers.add_argument("--num-requests", type=int, default=128)
    peers.add_argument("--seed", type=int, default=0)
    peers.add_argument("--maskbench-dir", default=None)
    peers.add_argument("--wait-ready-s", type=float, default=0.0, help="first wait up to this long for GET /health")
    peers.add_argument(
        "--warm-grammars", action="store_true", help="send each level's requests once, untimed, before timing them (schemas seen before)"
    )
    peers.add_argument("--out", default="benchmarks/results/peers", help="appends to OUT/peers.json, renders OUT/peers.md")
    peers.add_argument("--render", action="store_true", help="send nothing: render OUT/peers.md again from OUT/peers.json")


def bench_command(args: argparse.Namespace, argv: list[str]) -> int:
    """Run ``structgen bench …``; 0 on success, 2 on a named error."""
    if args.bench == "json":
        return _bench_json_command(args, argv)
    if args.bench == "peers":
        return _bench_peers_command(args, argv)
    return _conformance_command(args, argv)


def _bench_json_command(args: argparse.Namespace, argv: list[str]) -> int:
    import tempfile

    from structgen.bench.json_bench import BenchConfig, bench_json
    from structgen.engine.config import worker_processes
    from structgen.engine.engine import EngineConfig
    from structgen.fsm import CompilerConfig
    from structgen.models.llama import UnsupportedModelError
    from structgen.models.loader import ModelLoadError

    try:
        seed = None
        model, label = args.model, None
        if args.config is not None:
            if not args.random_weights or args.tokenizer is None:
                raise ValueError("--config needs --random-weights and --tokenizer (no checkpoint is read)")
            from structgen.models.presets import write_preset_folder

            model = os.fspath(write_preset_folder(args.config, tempfile.mkdtemp(prefix="structgen-bench-"), tokenizer_dir=args.tokenizer))
            seed = 0
            label = f"{args.config} preset, random weights (seed 0), tokenizer {os.path.basename(os.path.normpath(args.tokenizer))}"
        if model is None:
            from structgen.api import default_model_path

            model = default_model_path()
        config = BenchConfig(
            workloads=tuple(w.strip() for w in args.workload.split(",") if w.strip()),
            modes=tuple(m.strip() for m in args.modes.split(",") if m.strip()),
            concurrency=tuple(args.concurrency),
            num_requests=args.num_requests,
            out_dir=args.out,
            tokenizer=args.tokenizer,
            seed=args.seed,
            baselines=tuple(b.strip() for b in args.baselines.split(",") if b.strip()),
            waves=args.waves,
            shots=args.shots,
            append=args.append,
            maskbench_dir=args.maskbench_dir,
            command="structgen " + shlex.join(argv),
            progress=not args.no_progress,
            warm_grammars=args.warm_grammars,
            profile=args.profile,
            model_label=label,
            distinct_schemas=args.distinct_schemas,
            save_requests=args.save_requests,
        )
        compiler = CompilerConfig(**worker_processes(args.compile_processes, args.row_processes, args.device))
        rows = bench_json(model, config, EngineConfig(device=args.device, dtype=args.dtype, random_weights_seed=seed, compiler=compiler))
    except (ValueError, FileNotFoundError, ModelLoadError, UnsupportedModelError) as e:
        print(f"structgen: error: {e}", file=sys.stderr)
        return 2
    print((Path(args.out) / "results.md").read_text())
    print(f"{len(rows)} runs; results.jsonl, results.md and plots in {args.out}")
    return 0


def _bench_peers_command(args: argparse.Namespace, argv: list[str]) -> int:
    from structgen.bench.peers import Endpoint, race, wait_ready
    from structgen.bench.peers_report import append_run, rerender

    try:
        if args.render:
            rerender(args.out)
            return 0
        if not args.endpoint:
            raise ValueError("--endpoint is required (unless --render)")
        endpoint = Endpoint.parse(args.endpoint, args.served_model)
        if args.num_requests < 1 or min(args.concurrency) < 1:
            raise ValueError("--num-requests and --concurrency must be >= 1")
        if args.wait_ready_s > 0:
            wait_ready(endpoint, args.wait_ready_s)
        workloads = [w.strip() for w in args.workload.split(",") if w.strip()]
        rows = race(endpoint, workloads, args.concurrency, args.num_requests, args.seed, args.maskbench_dir, warm=args.warm_grammars)
    except (ValueError, TimeoutError, FileNotFoundError) as e:
        print(f"structgen: error: {e}", file=sys.stderr)
        return 2
    meta = {"label": endpoint.label, "flavor": endpoint.flavor, "url": endpoint.url, "engine": args.engine}
    append_run(args.out, meta, rows, "structgen " + shlex.join(argv))
    return 0


def _conformance_command(args: argparse.Namespace, argv: list[str]) -> int:
    from structgen.bench.conformance import merge, run

    try:
        if args.merge:
            out = merge(args.merge, args.out)
        else:
            if not args.tokenizer:
                raise ValueError("--tokenizer is required (unless --merge)")
            out = run(
                tokenizer=args.tokenizer,
                suites=[s.strip() for s in args.suites.split(",") if s.strip()],
                test_suite_root=args.test_suite,
                maskbench_root=args.maskbench,
                out_dir=args.out,
                maskbench_limit=args.maskbench_limit,
                timeout_s=args.timeout_s,
                max_states=args.max_states,
                samples=args.samples,
                workers=args.workers,
                precompute_states=args.precompute_states,
                precompute_budget_s=args.precompute_budget_s,
                pause_gc=args.pause_gc,
                product_cache_mb=args.product_cache_mb,
                anchors=tuple(a.strip() for a in args.anchors.split(",") if a.strip() and a.strip() != "none"),
                shard=parse_shard(args.shard),
                command="structgen " + shlex.join(argv),
            )
    except (FileNotFoundError, ValueError) as e:
        print(f"structgen: error: {e}", file=sys.stderr)
        return 2
    if not out["suites"]:
        return 0  # a shard: reported by --merge
    from structgen.bench.conformance_report import render_markdown

    print(render_markdown(out["meta"], out["suites"]))
    return 0


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"I/N"`` → ``(I, N)``; ValueError naming the flag for anything else."""
    if text is None:
        return None
    i, sep, n = text.partition("/")
    if not sep or not i.strip().isdigit() or not n.strip().isdigit() or not 0 <= int(i) < int(n):
        raise ValueError(f"--shard {text!r}: give I/N with 0 <= I < N (e.g. 0/4)")
    return int(i), int(n)
