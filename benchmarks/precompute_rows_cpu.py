"""Eager mask rows on the CPU, per schema: the walk-per-state path vs the shared-tail path.

For each named MaskBench schema (compiled with undeclared properties allowed, as
``structgen bench conformance`` does) a fresh automaton is built and ``precompute_rows`` runs
to completion, once with each path, alternating, ``--repeats`` times; the table gives the
median wall time of each, the states and the distinct rows.  The walk-per-state path is the
one used for vocabularies that do not spell every byte; here it is forced on the same
vocabulary.  Automaton expansion is included in both.

    python benchmarks/precompute_rows_cpu.py --tokenizer ../shared/fixtures/tokenizers/llama3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _gpu_common import HERE, run_meta, write_results
from structgen.fsm import Constraint, Vocabulary
from structgen.fsm.automaton import Budget, compile_lazy
from structgen.fsm.token_fsm import TokenFSM
from structgen.schemas.json_schema import SchemaOptions

DEFAULT_SCHEMAS = (
    "Glaiveai2K---calculate_area_758c2efe",
    "Glaiveai2K---search_news_6a78e2df",
    "Github_medium---o31638",
    "Github_hard---o30477",
    "Github_easy---o58909",
)


def precompute_ms(vocab: Vocabulary, constraint: Constraint, shared: bool) -> tuple[float, int, int]:
    """Wall ms of a complete ``precompute_rows`` on a fresh automaton, its states and rows."""
    saved = vocab.__dict__["covers_every_byte"]
    vocab.__dict__["covers_every_byte"] = saved if shared else False  # the walk-per-state path
    try:
        t0 = time.perf_counter()
        fsm = TokenFSM(compile_lazy(constraint.to_ir(), Budget(timeout_s=600)), vocab)
        _done, complete = fsm.precompute_rows()
        ms = (time.perf_counter() - t0) * 1e3
    finally:
        vocab.__dict__["covers_every_byte"] = saved
    if not complete:
        raise SystemExit(f"precompute did not complete for {constraint.text[:60]!r}")
    return ms, fsm.num_states, fsm.num_rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--maskbench", default=str(HERE.parent.parent / "shared/fixtures/maskbench/data"))
    ap.add_argument("--schemas", default=",".join(DEFAULT_SCHEMAS), help="comma-separated MaskBench file stems")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error(f"--repeats must be ≥ 1, got {args.repeats}")
    vocab = Vocabulary.from_tokenizer(args.tokenizer)
    vocab.prepare()
    if not (vocab.trie.use_compiled and vocab.covers_every_byte):
        raise SystemExit("the shared-tail path needs the compiled walk and a vocabulary that spells every byte")
    rows = []
    for name in args.schemas.split(","):
        path = Path(args.maskbench, f"{name}.json")
        if not path.is_file():
            ap.error(f"--schemas: no MaskBench file {path}")
        schema = json.loads(path.read_text())
        constraint = Constraint.json_schema(schema.get("schema", schema), SchemaOptions(allow_undeclared_properties=True))
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeats):
            for shared in (False, True):
                ms, states, n_rows = precompute_ms(vocab, constraint, shared)
                times[shared].append(ms)
        walk, tails = statistics.median(times[False]), statistics.median(times[True])
        rows.append([name, states, n_rows, round(walk, 1), round(tails, 1), round(walk / tails, 2)])
        print(rows[-1], flush=True)
    write_results(
        args.out,
        "precompute-rows-cpu",
        "Eager mask rows per schema: walk per state vs shared tails (CPU)",
        run_meta(),
        ["schema", "states", "rows", "walk per state ms", "shared tails ms", "speed-up"],
        rows,
        [f"Median of {args.repeats} alternating runs per path; each builds a fresh automaton (expansion included)."],
    )


if __name__ == "__main__":
    main()
