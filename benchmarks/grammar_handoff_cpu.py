"""How long a cold grammar, compiled on a compile process, takes to reach a busy engine thread.

A compile process's result (the pickled automaton, hundreds of KB for an ``extraction`` schema)
is read in the engine's process, unpickled, and forwarded to a row worker.  Each step of that
way that runs on a helper thread of the engine's process must take the GIL from the engine loop,
which runs Python, and waits up to the interpreter's switch interval (``sys.setswitchinterval``;
Python's default is 5 ms) each time.  This benchmark submits cold ``extraction`` schemas (every
one made unique, as the peer race sends them) while the main thread spins in Python, polling
the compiler and the futures as the engine's step loop does:

- *one at a time*: one compile process and one row worker, each schema submitted once the last
  is answered; per switch interval (``--intervals-ms``), alternated ``--rounds`` times, and with
  the main thread blocked on the future instead (``idle``);
- *burst*: ``--burst`` schemas submitted at once (as a wave of new requests brings them) to
  ``--burst-processes`` compile processes and one row worker: the time until the last is
  answered and how busy the compile processes were meanwhile (their compile seconds over
  processes × that time).

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


def spin() -> None:
    """A few tens of µs of Python, as the engine loop runs between its polls."""
    x = 0
    for i in range(SPIN):
        x += i * i % 7


def poll(compiler: GrammarCompiler) -> None:
    """Take in the compile processes' answers, as the engine's grammar manager does each step
    (a compiler without ``poll`` answers its futures on helper threads)."""
    getattr(compiler, "poll", lambda: None)()


def wait_for(compiler: GrammarCompiler, fut: Future[TokenFSM], busy: bool) -> None:
    """Wait for ``fut``: spinning in Python between polls (``busy``), or blocked on it."""
    if not busy:
        fut.result()
        return
    while not fut.done():
        poll(compiler)
        spin()


def burst(compiler: GrammarCompiler, constraints: list, processes: int) -> tuple[list[float], float, float]:
    """Submit every constraint at once, spin and poll until all are answered: each one's
    milliseconds from the submit, the compile processes' mean compile milliseconds, and
    their busy fraction (compile seconds over ``processes`` × the time to the last answer)."""
    compile_s = compiler.stats().compile_s
    t0 = time.perf_counter()
    futs = [compiler.submit(c) for c in constraints]
    waits: dict[int, float] = {}
    while len(waits) < len(futs):
        poll(compiler)
        for i, f in enumerate(futs):
            if i not in waits and f.done():
                waits[i] = (time.perf_counter() - t0) * 1e3
        spin()
    spent = compiler.stats().compile_s - compile_s
    makespan_ms = max(waits.values())
    return list(waits.values()), spent * 1e3 / len(futs), spent * 1e3 / (processes * makespan_ms)


def measure(compiler: GrammarCompiler, constraints: list, interval: float, busy: bool) -> tuple[list[float], float]:
    """Milliseconds from submit to the future's result for each constraint, and the compile
    process's mean compile milliseconds over them."""
    sys.setswitchinterval(interval)
    compile_s = compiler.stats().compile_s
    waits = []
    for c in constraints:
        t0 = time.perf_counter()
        wait_for(compiler, compiler.submit(c), busy)
        waits.append((time.perf_counter() - t0) * 1e3)
    return waits, (compiler.stats().compile_s - compile_s) * 1e3 / len(constraints)


def one_at_a_time(vocab: Vocabulary, args: argparse.Namespace) -> list[list[object]]:
    """The *one at a time* rows: per switch interval, spinning, then blocked."""
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
    rows: list[list[object]] = []
    for (ms, busy), (waits, compiles) in results.items():
        compile_ms = statistics.fmean(compiles)
        rows.append([
            "one at a time, 1 process", "spinning" if busy else "idle (blocked on the future)", ms, len(waits),
            round(percentile(waits, 0.5), 1), round(percentile(waits, 0.9), 1), round(statistics.fmean(waits), 1),
            round(compile_ms, 1), round(statistics.fmean(waits) - compile_ms, 1), "", "",
        ])  # fmt: skip
    return rows


def bursts(vocab: Vocabulary, args: argparse.Namespace) -> list[list[object]]:
    """The *burst* rows: one per round, at Python's default switch interval."""
    compiler = GrammarCompiler(vocab, CompilerConfig(processes=args.burst_processes, row_processes=1, cache_size=0))
    compiler.start_workers()
    rows: list[list[object]] = []
    try:
        for r in range(args.rounds):
            reqs = build_workload("extraction", args.burst, 1000 + r)
            waits, compile_ms, busy = burst(compiler, [q.constraint for q in distinct_schemas(reqs, f"b{r}")], args.burst_processes)
            rows.append([
                f"burst, {args.burst_processes} process{'es' if args.burst_processes > 1 else ''}", "spinning",
                sys.getswitchinterval() * 1e3, len(waits), round(percentile(waits, 0.5), 1), round(percentile(waits, 0.9), 1),
                round(statistics.fmean(waits), 1), round(compile_ms, 1), round(statistics.fmean(waits) - compile_ms, 1),
                round(max(waits)), f"{busy:.0%}",
            ])  # fmt: skip
    finally:
        compiler.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokenizer", required=True, help="local Hugging Face tokenizer folder")
    ap.add_argument("--num-requests", type=int, default=40, help="schemas per interval and round, one at a time")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--intervals-ms", type=float, nargs="+", default=[5.0, 0.5])
    ap.add_argument("--burst", type=int, default=128, help="schemas submitted at once per round (0: no burst rows)")
    ap.add_argument("--burst-processes", type=int, default=1, help="compile processes for the bursts")
    ap.add_argument("--out", default=str(HERE / "results" / "grammar-handoff-cpu"))
    args = ap.parse_args()
    if args.num_requests < 1 or args.rounds < 1 or args.burst < 0 or args.burst_processes < 1 or any(i <= 0 for i in args.intervals_ms):
        ap.error("--num-requests, --rounds and --burst-processes must be ≥ 1, --burst ≥ 0 and every interval > 0")
    vocab = Vocabulary.from_tokenizer(args.tokenizer)
    vocab.prepare()
    rows = one_at_a_time(vocab, args) + (bursts(vocab, args) if args.burst else [])
    header = ["case", "engine thread", "switch interval ms", "schemas", "wait p50 ms", "wait p90 ms", "wait mean ms",
              "compile mean ms", "mean wait beyond the compile ms", "last answer ms", "compile processes busy"]  # fmt: skip
    intervals = " ".join(f"{ms:g}" for ms in args.intervals_ms)
    meta = run_meta(
        f"python benchmarks/grammar_handoff_cpu.py --tokenizer LLAMA3_TOKENIZER --num-requests {args.num_requests}"
        f" --rounds {args.rounds} --intervals-ms {intervals} --burst {args.burst} --burst-processes {args.burst_processes}"
    )
    meta.update(requests=f"one at a time: {args.num_requests} per interval and round; bursts: {args.burst} per round; {args.rounds} rounds")
    notes = [
        "*wait*: submit → the future's result on the main thread (compile process: compile, ship; engine process: read,",
        "unpickle, forward to the row worker); *compile*: the compile process's own seconds for the same schemas;",
        "*last answer*: a burst's submit → its last answer; *busy*: compile seconds over processes × that time.",
    ]
    write_results(
        args.out, "grammar-handoff-cpu", "A cold grammar's way from a compile process to a busy engine thread", meta, header, rows, notes
    )


if __name__ == "__main__":
    main()
