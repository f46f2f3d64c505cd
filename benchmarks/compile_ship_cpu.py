"""What a cold schema costs a compile process and the engine that receives it, on the CPU.

For each request of the peer race's cold workloads (``extraction`` with every schema made
unique, as ``structgen bench peers`` sends it, and a seeded ``maskbench`` sample), the schema is
compiled as a compile process does it: the compile, then ``ship_blob`` (the compile process's
own function: the NFA fragments, the automaton expanded whole where it fits, the pickle), with
the garbage collector paused and the vocabulary frozen out of it.  The pickle is then loaded as
the engine loads it (collector paused).  A compile process serves one schema at a time, so
*schemas/s per process* (1 / mean seconds) bounds what a pool of them can feed the engine.

    python benchmarks/compile_ship_cpu.py --tokenizer LLAMA3_TOKENIZER --maskbench MASKBENCH_DATA
"""

from __future__ import annotations

import argparse
import gc
import pickle
import statistics
import time
from pathlib import Path

from _gpu_common import HERE, run_meta, write_results
from structgen.fsm import CompilerConfig, GrammarCompileError, GrammarCompiler, TokenFSM, Vocabulary
from structgen.fsm.compile_process import ship_blob
from structgen.fsm.compiler_config import GC_PAUSE
from structgen.schemas.errors import ConstraintError

from structgen.bench.common import percentile
from structgen.bench.workloads import BenchRequest, build_workload, distinct_schemas


def ship(compiler: GrammarCompiler, vocab: Vocabulary, req: BenchRequest) -> tuple[float, int, float, str]:
    """(compile + ship seconds, pickle bytes (0 when refused), load seconds, outcome)."""
    with GC_PAUSE.paused():
        t0 = time.perf_counter()
        try:
            blob = ship_blob(compiler.compile(req.constraint))
        except (ConstraintError, GrammarCompileError) as e:
            return time.perf_counter() - t0, 0, 0.0, type(e).__name__
        spent = time.perf_counter() - t0
        t0 = time.perf_counter()
        copy = TokenFSM.__new__(TokenFSM)
        copy.__setstate__({**pickle.loads(blob), "vocab": vocab})
        return spent, len(blob), time.perf_counter() - t0, "ok"


def measure(compiler: GrammarCompiler, vocab: Vocabulary, name: str, reqs: list[BenchRequest]) -> list:
    got = [ship(compiler, vocab, r) for r in reqs]
    secs = [g[0] for g in got]
    sizes = [g[1] / 1e3 for g in got if g[3] == "ok"]
    loads = [g[2] * 1e3 for g in got if g[3] == "ok"]
    mean = statistics.fmean(secs)
    return [
        name,
        len(reqs),
        sum(g[3] != "ok" for g in got),
        round(mean * 1e3, 1),
        round(percentile(secs, 0.5) * 1e3, 1),
        round(percentile(secs, 0.9) * 1e3, 1),
        round(max(secs) * 1e3),
        round(1 / mean, 1),
        round(percentile(sizes, 0.5), 1),
        round(percentile(sizes, 0.9), 1),
        round(max(sizes)),
        round(percentile(loads, 0.5), 2),
        round(percentile(loads, 0.9), 2),
        round(sum(loads), 1),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokenizer", required=True, help="local Hugging Face tokenizer folder")
    ap.add_argument("--maskbench", help="JSONSchemaBench maskbench/data folder (the maskbench row is skipped without it)")
    ap.add_argument("--num-requests", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(HERE / "results" / "compile-ship-cpu"))
    args = ap.parse_args()
    if args.num_requests < 1:
        ap.error("--num-requests must be ≥ 1")
    vocab = Vocabulary.from_tokenizer(args.tokenizer)
    vocab.prepare()
    compiler = GrammarCompiler(vocab, CompilerConfig(cache_size=0))
    gc.collect()
    gc.freeze()  # as a compile process does after loading the vocabulary
    workloads = {"extraction": distinct_schemas(build_workload("extraction", args.num_requests, args.seed), str(args.seed))}
    if args.maskbench:
        workloads["maskbench"] = build_workload("maskbench", args.num_requests, args.seed, maskbench_dir=Path(args.maskbench))
    rows = [measure(compiler, vocab, name, reqs) for name, reqs in workloads.items()]
    header = [
        "workload",
        "schemas",
        "refused",
        "compile + ship ms mean",
        "p50",
        "p90",
        "max",
        "schemas/s per process",
        "pickle KB p50",
        "p90",
        "max",
        "engine load ms p50",
        "p90",
        "sum",
    ]
    meta = {**run_meta(), "requests": f"{args.num_requests} per workload, seed {args.seed}", "vocabulary": f"{vocab.size} tokens"}
    notes = [
        "*compile + ship*: compile, NFA fragments and the whole expansion (within the compile processes' limits), pickle; refusals",
        "count with the time they took (a state cap met after seconds holds its process that long).  *engine load*: unpickling",
        "the shipped grammar as the engine does (collector paused).  Every figure has the collector paused, as the compile",
        "processes and the engine have it since 6045193.",
    ]
    write_results(
        args.out, "compile-ship-cpu", "What a cold schema costs a compile process and the engine, on the CPU", meta, header, rows, notes
    )


if __name__ == "__main__":
    main()
