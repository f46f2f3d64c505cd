"""Re-compile the MaskBench schemas that a conformance report lists as compile failures
(time-out, hard time-out, state cap) with the current code, one at a time on this machine,
under the report's limits; prints each outcome and time, and the counts.

A quick check of a compiler change against the slow tail, without the full conformance run.

    python benchmarks/retime_failures.py --tokenizer TOKENIZER_DIR --report OUT/conformance-llama3.json \
        --maskbench MASKBENCH_DATA_DIR

(the report is the per-schema JSON that ``structgen bench conformance --out OUT`` writes).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from structgen.fsm import CompilerConfig, Constraint, GrammarCompileError, GrammarCompiler, GrammarTimeoutError, Vocabulary
from structgen.schemas import SchemaOptions

FAILED = ("timeout", "hard-timeout", "state-cap")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--report", required=True, help="a conformance run's per-schema JSON report")
    ap.add_argument("--maskbench", default=None, help="JSONSchemaBench maskbench/data folder (required)")
    args = ap.parse_args()
    if not Path(args.report).is_file():
        ap.error(f"--report {args.report!r} does not exist (run structgen bench conformance first)")
    if args.maskbench is None or not Path(args.maskbench).is_dir():
        ap.error(f"--maskbench {args.maskbench!r} is not a folder")
    report = json.loads(Path(args.report).read_text())
    meta = report["meta"]
    names = [i["name"] for i in report["items"] if i["suite"] == "maskbench" and i["detail"] in FAILED]
    before = Counter(i["detail"] for i in report["items"] if i["suite"] == "maskbench" and i["detail"] in FAILED)
    vocab = Vocabulary.from_tokenizer(args.tokenizer)
    vocab.trie  # noqa: B018 - built once, outside the timed compiles
    compiler = GrammarCompiler(vocab, CompilerConfig(timeout_s=meta["timeout_s"], max_states=meta["max_states"], cache_size=0))
    options = SchemaOptions(allow_undeclared_properties=True)  # as the conformance run
    now: Counter[str] = Counter()
    for name in names:
        schema = json.loads((Path(args.maskbench) / f"{name}.json").read_text())["schema"]
        t0 = time.perf_counter()
        try:
            compiler.compile(Constraint.json_schema(schema, options))
            outcome = "compiled"
        except GrammarTimeoutError:
            outcome = "timeout"
        except GrammarCompileError:
            outcome = "state-cap"
        now[outcome] += 1
        print(f"{name}: {outcome} in {time.perf_counter() - t0:.2f} s", flush=True)
    print(f"report {meta['commit']}: {dict(before)}; now: {dict(now)}")


if __name__ == "__main__":
    main()
