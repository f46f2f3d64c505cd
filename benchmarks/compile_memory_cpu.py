"""Memory a compiler keeps after its compiles, on the CPU: what a compile process holds, and
what cached failures hold.

A compile process compiles a cold schema, ships it (``ship_blob``: the automaton expanded
whole, pickled) and has no use for it afterwards: the compiler that owns the process caches
what comes back.  The first case compiles and ships a seeded MaskBench sample (the peer race's
``maskbench`` workload) in one fresh process, as a compile process does (the garbage
collector paused around each compile), once with the owner's LRU (``cache_size`` 512) and once
with a compile process's configuration (no LRU), and reports the resident memory it grew by.

The compiler's LRU also keeps failures, so that a repeated bad schema is refused at once.  The
second case compiles state-cap schemas (the default ``max_states``), keeps their failures
cached, and reports the resident memory grown.

The third case starts a compiler's worker processes (``--worker-processes`` compile and row
processes, as ``serve`` does before taking requests) and reports the seconds
``start_workers`` took and each worker's resident memory: what every worker holds before its
first grammar.  It runs from ``python -c``, whose spawned children import nothing of the
benchmark, as a server's children import nothing of ``python -m structgen``.

    python benchmarks/compile_memory_cpu.py --tokenizer LLAMA3_TOKENIZER --maskbench MASKBENCH_DATA
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _gpu_common import HERE, run_meta, write_results
from structgen.fsm import CompilerConfig, Constraint, GrammarCompileError, GrammarCompiler, Vocabulary
from structgen.fsm.compile_process import WARM_UP, ship_blob
from structgen.fsm.compiler_config import GC_PAUSE
from structgen.schemas.errors import ConstraintError

from structgen.bench.workloads import build_workload


def rss_mb() -> float:
    """Resident memory of this process (MiB), from ``/proc/self/statm``."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 / 2**20


def state_cap_schemas(n: int) -> list[dict[str, Any]]:
    """``n`` distinct string schemas whose product automaton passes the default state cap."""
    return [{"type": "string", "pattern": f"^(a|b)*a(a|b){{{14 + i}}}$", "maxLength": 60 + i} for i in range(n)]


def _compiler(tokenizer: str, config: CompilerConfig) -> GrammarCompiler:
    vocab = Vocabulary.from_tokenizer(tokenizer)
    vocab.prepare()
    compiler = GrammarCompiler(vocab, config)
    compiler.compile(WARM_UP)  # the one-time imports and tables, outside the measurement
    return compiler


def ship_case(tokenizer: str, maskbench: str, n: int, cache_size: int) -> tuple[float, float, int]:
    """(MiB grown, seconds, schemas refused) compiling and shipping ``n`` MaskBench schemas."""
    import gc

    compiler = _compiler(tokenizer, dataclasses.replace(CompilerConfig(), cache_size=cache_size))
    reqs = build_workload("maskbench", n, 0, maskbench_dir=Path(maskbench))
    gc.collect()
    before, t0, refused = rss_mb(), time.perf_counter(), 0
    for req in reqs:
        with GC_PAUSE.paused() if compiler.config.pause_gc else contextlib.nullcontext():
            try:
                ship_blob(compiler.compile(req.constraint))
            except (ConstraintError, GrammarCompileError):
                refused += 1
    gc.collect()
    return rss_mb() - before, time.perf_counter() - t0, refused


def failure_case(tokenizer: str, n: int) -> tuple[float, float, int]:
    """(MiB grown, seconds, failures) with ``n`` state-cap failures in the LRU."""
    import gc

    compiler = _compiler(tokenizer, CompilerConfig())
    gc.collect()
    before, t0, failed = rss_mb(), time.perf_counter(), 0
    for schema in state_cap_schemas(n):
        try:
            compiler.compile(Constraint.json_schema(schema))
        except GrammarCompileError:
            failed += 1
    gc.collect()
    return rss_mb() - before, time.perf_counter() - t0, failed


_WORKERS_CODE = """
import json, os, sys, time
from pathlib import Path
from structgen.fsm import CompilerConfig, GrammarCompiler, Vocabulary
def rss(pid):
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * 4096 / 2**20
def main():
    tokenizer, processes, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    compiler = GrammarCompiler(Vocabulary.from_tokenizer(tokenizer), CompilerConfig(processes=processes, row_processes=rows))
    t0 = time.perf_counter()
    compiler.start_workers(600)
    secs = time.perf_counter() - t0
    me = str(os.getpid())
    kids = [p.name for p in Path("/proc").iterdir() if p.name.isdigit() and (p / "stat").read_text().split()[3] == me]
    sizes = sorted(rss(k) for k in kids)[-(processes + rows):]  # the workers, not the resource tracker
    compiler.close()
    print(json.dumps([secs, sizes]))
main()
"""


def workers_case(tokenizer: str, processes: int, row_processes: int) -> tuple[float, list[float]]:
    """(seconds ``start_workers`` took, each worker's resident MiB) for ``processes`` compile and
    ``row_processes`` row processes, started from a ``python -c`` parent."""
    cmd = [sys.executable, "-c", _WORKERS_CODE, tokenizer, str(processes), str(row_processes)]
    # from a neutral folder: a `-c` parent puts its working folder first on sys.path
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=tempfile.gettempdir()).stdout
    secs, sizes = json.loads(out.strip().splitlines()[-1])
    return float(secs), [float(x) for x in sizes]


def _in_fresh_process(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in a spawned process, so each case starts from the same resident memory."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(fn, args)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="local Hugging Face tokenizer folder")
    ap.add_argument("--maskbench", required=True, help="JSONSchemaBench maskbench/data folder")
    ap.add_argument("--num-requests", type=int, default=100, help="MaskBench schemas compiled and shipped")
    ap.add_argument("--failures", type=int, default=8, help="state-cap schemas whose failures stay cached")
    ap.add_argument("--worker-processes", type=int, default=2, help="compile processes and row processes the workers case starts (each)")
    ap.add_argument("--cases", default="ship,failures,workers", help="comma list of ship, failures, workers")
    ap.add_argument("--out", default=str(HERE / "results" / "compile-memory-cpu"))
    args = ap.parse_args()
    if args.num_requests < 1 or args.failures < 1 or args.worker_processes < 1:
        ap.error("--num-requests, --failures and --worker-processes must be ≥ 1")
    cases = set(args.cases.split(","))
    known = {"ship", "failures", "workers"}
    if not cases <= known:
        ap.error(f"--cases: unknown {sorted(cases - known)}; expected ship, failures, workers")
    rows: list[list[Any]] = []
    if "ship" in cases:
        for label, size in (("compile and ship, LRU of 512 (the owner's)", 512), ("compile and ship, no LRU", 0)):
            grown, secs, refused = _in_fresh_process(ship_case, args.tokenizer, args.maskbench, args.num_requests, size)
            rows.append([label, args.num_requests, refused, round(grown), round(secs, 1)])
    if "failures" in cases:
        grown, secs, failed = _in_fresh_process(failure_case, args.tokenizer, args.failures)
        rows.append(["state-cap failures kept in the LRU", args.failures, failed, round(grown), round(secs, 1)])
    if "workers" in cases:
        n = args.worker_processes
        secs, sizes = workers_case(args.tokenizer, n, n)
        label = f"start {n} compile + {n} row processes (RSS: each worker's, before any grammar)"
        rows.append([label, 0, 0, " / ".join(str(round(x)) for x in sizes), round(secs, 1)])
    header = ["case", "schemas", "refused", "RSS grown MiB", "seconds"]
    meta = {**run_meta(), "maskbench": f"{args.num_requests} schemas, seed 0", "max_states": CompilerConfig().max_states}
    notes = [
        "Each case runs in a fresh spawned process after compiling the compile processes' warm-up schema; *RSS grown*: resident",
        "memory after the case (and a full collection) minus before it; for the workers case, each worker process's resident",
        "memory after `start_workers`, and its seconds.",
    ]
    write_results(args.out, "compile-memory-cpu", "Memory a compiler keeps after its compiles (CPU)", meta, header, rows, notes)


if __name__ == "__main__":
    main()
