"""``structgen`` command line: ``bench conformance`` (more subcommands are added by later layers)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys

_SHARED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "fixtures")


def _default(path: str) -> str | None:
    p = os.path.normpath(os.path.join(_SHARED, path))
    return p if os.path.exists(p) else None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="structgen", description="Constrained-decoding structured output engine")
    sub = parser.add_subparsers(dest="command", required=True)
    bench = sub.add_parser("bench", help="benchmarks")
    bsub = bench.add_subparsers(dest="bench", required=True)
    conf = bsub.add_parser("conformance", help="JSON-Schema-Test-Suite and MaskBench through the compile layer")
    conf.add_argument("--tokenizer", required=True, help="local Hugging Face tokenizer folder")
    conf.add_argument("--suites", default="test-suite,maskbench", help="comma list of test-suite, maskbench")
    conf.add_argument("--test-suite", default=_default("json-schema-test-suite"), help="JSON-Schema-Test-Suite root")
    conf.add_argument("--maskbench", default=_default("maskbench/data"), help="MaskBench data folder")
    conf.add_argument("--maskbench-limit", type=int, default=None, help="seeded sample of N MaskBench schemas")
    conf.add_argument("--timeout-s", type=float, default=10.0)
    conf.add_argument("--max-states", type=int, default=50_000)
    conf.add_argument("--samples", type=int, default=5, help="random automaton samples validated per schema")
    conf.add_argument("--workers", type=int, default=2)
    conf.add_argument("--out", default="benchmarks/results")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.command == "bench" and args.bench == "conformance":
        from structgen.conformance import run

        try:
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
                command="structgen " + shlex.join(argv),
            )
        except (FileNotFoundError, ValueError) as e:
            print(f"structgen: error: {e}", file=sys.stderr)
            return 2
        from structgen.conformance import render_markdown

        print(render_markdown(out["meta"], out["suites"]))
        return 0
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
