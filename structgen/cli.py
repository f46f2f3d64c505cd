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
    comp = sub.add_parser("compile", help="compile a JSON Schema or regex to a token FSM and check an instance")
    comp.add_argument("--tokenizer", required=True, help="local Hugging Face tokenizer folder")
    src = comp.add_mutually_exclusive_group(required=True)
    src.add_argument("--schema", help="JSON Schema: a file path or inline JSON")
    src.add_argument("--regex", help="a regex (fullmatch)")
    comp.add_argument("--instance", help="a JSON value (schema) or text (regex) to walk through the FSM")
    comp.add_argument("--whitespace", default="canonical", choices=["canonical", "compact", "flexible"])
    comp.add_argument("--timeout-s", type=float, default=10.0)
    comp.add_argument("--max-states", type=int, default=50_000)
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


def _compile_command(args: argparse.Namespace) -> int:
    import json
    import time

    from structgen.fsm import CompilerConfig, Constraint, GrammarCompiler, Vocabulary
    from structgen.fsm.errors import GrammarCompileError
    from structgen.schemas import ConstraintError, SchemaOptions

    try:
        t0 = time.perf_counter()
        vocab = Vocabulary.from_tokenizer(args.tokenizer)
        vocab.trie  # noqa: B018 - built once per tokenizer; timed separately from the compile
        t_vocab = time.perf_counter() - t0
        if args.schema is not None:
            text = open(args.schema, encoding="utf-8").read() if os.path.exists(args.schema) else args.schema
            constraint = Constraint.json_schema(text, SchemaOptions(whitespace=args.whitespace))
        else:
            constraint = Constraint.regex(args.regex)
        compiler = GrammarCompiler(vocab, CompilerConfig(timeout_s=args.timeout_s, max_states=args.max_states))
        t1 = time.perf_counter()
        fsm = compiler.compile(constraint)
        t_first = time.perf_counter() - t1
    except (ConstraintError, GrammarCompileError, FileNotFoundError, ValueError, OSError) as e:
        print(f"structgen: error: {e}", file=sys.stderr)
        return 2
    print(f"vocabulary: {vocab!r} (loaded + trie in {t_vocab * 1000:.0f} ms)")
    print(f"regex: {constraint.to_ir().to_regex()[:300]}")
    print(f"time to first mask: {t_first * 1000:.1f} ms; forced at start: {fsm.forced_bytes(fsm.initial).decode('utf-8', 'replace')!r}")
    if args.instance is None:
        return 0
    if args.schema is not None:
        try:
            value = json.loads(args.instance)
        except json.JSONDecodeError as e:
            print(f"structgen: error: --instance is not JSON: {e}", file=sys.stderr)
            return 2
        data = constraint.options.dumps(value).encode()
    else:
        data = args.instance.encode()
    ids = vocab.encode_bytes(data)
    if ids is None:
        print("structgen: error: the instance cannot be tokenized", file=sys.stderr)
        return 2
    cur = fsm.cursor()
    accepted = True
    for t in ids:
        if not cur.is_allowed(t):
            accepted = False
            break
        cur.advance(t)
    accepted = accepted and cur.is_accepting()
    print(f"instance: {data.decode()[:200]}")
    print(f"accepted: {accepted} ({len(ids)} tokens)")
    if accepted:
        # decode the same text again with jump-forward: forced runs are appended in one step
        cur = fsm.cursor()
        out: list[int] = []
        forwards = forced = 0
        while vocab.decode_bytes(out) != data:
            plan = cur.jump_forward(out)
            if plan is not None:
                out = out[: len(out) - plan.rollback] + plan.token_ids
                forced += len(plan.token_ids)
                forwards += 1
                continue
            rest = vocab.encode_bytes(data[len(vocab.decode_bytes(out)) :])
            if not rest or not cur.is_allowed(rest[0]):
                break
            cur.advance(rest[0])
            out.append(rest[0])
            forwards += 1
        print(f"with jump-forward: {forwards} steps instead of {len(ids)}; {forced} forced tokens")
        print(f"built so far: {fsm.num_rows} mask rows, {fsm.num_states} automaton states")
    return 0 if accepted else 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.command == "compile":
        return _compile_command(args)
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
