"""Compile time per schema with the plain closure search against the hybrid (CPU).

``LazyDFA._closure_one`` runs a plain depth-first search and switches to the memoizing SCC
search past ``automaton.SMALL_CLOSURE`` NFA states.  With ``SMALL_CLOSURE`` set beyond any
closure the plain search handles everything, which is the algorithm before session 15.  For
each named MaskBench schema (compiled as ``structgen bench conformance`` does: undeclared
properties allowed, 10 s timeout, rows precomputed up to 50,000 states) the table gives the
median cold compile time of each mode over ``--repeats`` alternating runs and the automaton
states reached (a compile that meets its timeout stops precomputing, keeping what it has).
``--profile NAME`` adds a cProfile (own time) of one hybrid compile of that schema.

    python benchmarks/closure_search_cpu.py --tokenizer ../shared/fixtures/tokenizers/llama3
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _gpu_common import HERE, run_meta, write_results
from structgen.fsm import CompilerConfig, Constraint, GrammarCompiler, Vocabulary, automaton
from structgen.schemas.json_schema import SchemaOptions

TAIL = ("Github_easy---o9851", "Github_hard---o82943")
MEDIAN = (  # the 16 compiled schemas around the median first mask of conformance-s14 (d4360a7)
    "Github_medium---o61603 Github_medium---o31638 Github_easy---o73015 Github_medium---o9511 "
    "Github_easy---o69514 Glaiveai2K---calculate_area_104f2a83 Github_hard---o89724 "
    "Github_easy---o70017 Github_hard---o5399 Github_medium---o82281 Github_medium---o61623 "
    "Github_medium---o79423 Glaiveai2K---calculate_area_1b99ac0a Github_easy---o42984 "
    "Github_medium---o61598 Glaiveai2K---calculate_area_c9e24995 "
).split()
PLAIN = 1 << 62  # SMALL_CLOSURE beyond any closure: the plain search only


def compile_ms(vocab: Vocabulary, constraint: Constraint) -> tuple[float, int]:
    """Cold compile (automaton, first row, precompute) wall ms and the states reached."""
    compiler = GrammarCompiler(vocab, CompilerConfig(timeout_s=10.0, max_states=50000, cache_size=2, precompute_states=50000))
    t0 = time.perf_counter()
    fsm = compiler.compile(constraint)
    return (time.perf_counter() - t0) * 1e3, fsm.num_states


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--maskbench", default=str(HERE.parent.parent / "shared/fixtures/maskbench/data"))
    ap.add_argument("--schemas", default=",".join(TAIL + tuple(MEDIAN)), help="comma-separated MaskBench file stems")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--profile", default=TAIL[1], help="schema to profile ('' for none)")
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error(f"--repeats must be ≥ 1, got {args.repeats}")
    if args.profile and args.profile not in args.schemas.split(","):
        ap.error(f"--profile {args.profile!r} is not one of --schemas")
    vocab = Vocabulary.from_tokenizer(args.tokenizer)
    vocab.prepare()
    hybrid = automaton.SMALL_CLOSURE
    constraints: dict[str, Constraint] = {}
    for name in args.schemas.split(","):
        path = Path(args.maskbench, f"{name}.json")
        if not path.is_file():
            ap.error(f"--schemas: no MaskBench file {path}")
        schema = json.loads(path.read_text())
        constraints[name] = Constraint.json_schema(schema.get("schema", schema), SchemaOptions(allow_undeclared_properties=True))
    rows = []
    sums = {PLAIN: 0.0, hybrid: 0.0}
    for name, constraint in constraints.items():
        times: dict[int, list[float]] = {PLAIN: [], hybrid: []}
        states: dict[int, int] = {}
        for _ in range(args.repeats):
            for mode in (PLAIN, hybrid):
                automaton.SMALL_CLOSURE = mode
                ms, states[mode] = compile_ms(vocab, constraint)
                times[mode].append(ms)
        automaton.SMALL_CLOSURE = hybrid
        plain_ms, hybrid_ms = statistics.median(times[PLAIN]), statistics.median(times[hybrid])
        if name in MEDIAN:
            sums[PLAIN] += plain_ms
            sums[hybrid] += hybrid_ms
        rows.append([name, round(plain_ms, 1), states[PLAIN], round(hybrid_ms, 1), states[hybrid]])
        print(rows[-1], flush=True)
    rows.append(["sum of the MEDIAN schemas run", round(sums[PLAIN], 1), "", round(sums[hybrid], 1), ""])
    notes = [f"Median of {args.repeats} alternating runs per mode; every run compiles cold (fresh compiler, no cache)."]
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        compile_ms(vocab, constraints[args.profile])
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(8)
        notes.append(f"cProfile of one hybrid compile of {args.profile} (own time, profiling overhead included):")
        notes.append("```\n" + buf.getvalue().strip() + "\n```")
    write_results(
        args.out,
        "closure-search-cpu",
        "Cold compile per schema: plain closure search vs plain + memoizing SCC search (CPU)",
        run_meta(),
        ["schema", "plain search ms", "plain: states", "hybrid ms", "hybrid: states"],
        rows,
        notes,
    )


if __name__ == "__main__":
    main()
