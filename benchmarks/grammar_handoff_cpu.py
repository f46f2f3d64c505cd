"""How long a cold grammar, compiled on a compile process, takes to reach a busy engine thread.

A compile process's result (the pickled automaton, hundreds of KB for an ``extraction`` schema)
is read on a thread of the engine's process, then forwarded to a row worker; every blocking read
and write on the way gives up the GIL and must take it back from the engine loop, which runs
Python.  Each take-back waits up to the interpreter's switch interval (``sys.setswitchinterval``;
Python's default is 5 ms, ``EngineConfig.switch_interval_s`` sets it).  This benchmark submits
cold ``extraction`` schemas (every one made unique, as the peer race sends them) to one compile
process and one row worker while the main thread spins in Python polling the future, as the
engine's step loop does, and reports the wait beyond the compile process's own compile seconds.
The intervals alternate within one process (one compiler, one pair of workers), ``--rounds``
times each; ``idle`` is the same with the main thread blocked on the future instead.

    python benchmarks/grammar_handoff_cpu.py --tokenizer LLAMA3_TOKENIZER
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import Future

from _gpu_common import HERE, run_meta, write_results
from structgen.fsm import CompilerConfig, GrammarCompiler, TokenFSM, Vocabulary

from structgen.bench.common import percentile
from structgen.bench.workloads import build_workload, distinct_schemas

SPIN = 2000  # additions per poll of the spinning main thread (a few tens of µs of Python)


def wait_for(fut: Future[TokenFSM], busy: bool) -> None:
    """Wait for ``fut``: spinning in Python between polls (``busy``), or blocked on it."""
    if not busy:
        fut.result()
        return
    while not fut.done():
        x = 0
        for i in range(SPIN):
            x += i * i % 7


def measure(compiler: GrammarCompiler, constraints: list, interval: float, busy: bool) -> tuple[list[float], float]:
    """Milliseconds from submit to the future's result for each constraint, and the compile
    process's mean compile milliseconds over them."""
    sys.setswitchinterval(interval)
    compile_s = compiler.stats().compile_s
    waits = []
    for c in constraints:
        t0 = time.perf_counter()
        wait_for(compiler.submit(c), busy)
        waits.append((time.perf_counter() - t0) * 1e3)
    return waits, (compiler.stats().compile_s - compile_s) * 1e3 / len(constraints)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokenizer", required=True, help="local Hugging Face tokenizer folder")
    ap.add_argument("--num-requests", type=int, default=40, help="schemas per interval and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--intervals-ms", type=float, nargs="+", default=[5.0, 0.5])
    ap.add_argument("--out", default=str(HERE / "results" / "grammar-handoff-cpu"))
    args = ap.parse_args()
    if args.num_requests < 1 or args.rounds < 1 or any(i <= 0 for i in args.intervals_ms):
        ap.error("--num-requests and --rounds must be ≥ 1 and every interval > 0")
    vocab = Vocabulary.from_tokenizer(args.tokenizer)
    vocab.prepare()
    compiler = GrammarCompiler(vocab, CompilerConfig(processes=1, row_processes=1, cache_size=0))
    compiler.start_workers()
    cases = [(ms, True) for ms in args.intervals_ms] + [(args.intervals_ms[0], False)]
    results: dict[tuple[float, bool], tuple[list[float], list[float]]] = {case: ([], []) for case in cases}
    outer = sys.getswitchinterval()
    try:
        for r in range(args.rounds):
            for k, (ms, busy) in enumerate(cases):
                reqs = build_workload("extraction", args.num_requests, r * len(cases) + k)
                constraints = [q.constraint for q in distinct_schemas(reqs, f"h{r}-{k}")]
                waits, compile_ms = measure(compiler, constraints, ms / 1e3, busy)
                results[ms, busy][0].extend(waits)
                results[ms, busy][1].append(compile_ms)
    finally:
        sys.setswitchinterval(outer)
        compiler.close()
    rows = []
    for (ms, busy), (waits, compiles) in results.items():
        compile_ms = statistics.fmean(compiles)
        rows.append([
            "spinning" if busy else "idle (blocked on the future)", ms, len(waits),
            round(percentile(waits, 0.5), 1), round(percentile(waits, 0.9), 1), round(statistics.fmean(waits), 1),
            round(compile_ms, 1), round(statistics.fmean(waits) - compile_ms, 1),
        ])  # fmt: skip
    header = ["engine thread", "switch interval ms", "schemas", "wait p50 ms", "wait p90 ms", "wait mean ms",
              "compile mean ms", "mean wait beyond the compile ms"]  # fmt: skip
    intervals = " ".join(f"{ms:g}" for ms in args.intervals_ms)
    meta = run_meta(
        f"python benchmarks/grammar_handoff_cpu.py --tokenizer LLAMA3_TOKENIZER --num-requests {args.num_requests}"
        f" --rounds {args.rounds} --intervals-ms {intervals}"
    )
    meta.update(requests=f"{args.num_requests} per interval and round, {args.rounds} rounds, intervals alternated")
    notes = [
        "*wait*: submit → the future's result on the main thread (compile process: compile, ship; engine process: read,",
        "unpickle, forward to the row worker); *compile*: the compile process's own seconds for the same schemas.",
    ]
    write_results(
        args.out, "grammar-handoff-cpu", "A cold grammar's way from a compile process to a busy engine thread", meta, header, rows, notes
    )


if __name__ == "__main__":
    main()
