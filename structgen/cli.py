"""``structgen`` command line: ``demo``, ``generate``, ``serve``, ``compile``; ``bench`` lives in :mod:`structgen.bench.commands`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

CPU_THREADS_HELP = "torch threads for a model on the CPU (default: 1 under 200M parameters, else torch's; OMP_NUM_THREADS is respected)"


def build_parser() -> argparse.ArgumentParser:
    """The ``structgen`` argument parser: one subcommand per function below."""
    from structgen import __version__

    parser = argparse.ArgumentParser(prog="structgen", description="Constrained-decoding structured output engine")
    parser.add_argument("--version", action="version", version=f"structgen {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    from structgen.bench.commands import add_bench

    for add in (_add_compile, _add_generate, _add_demo, _add_serve, add_bench):
        add(sub)
    _show_defaults(parser)
    return parser


def _show_defaults(parser: argparse.ArgumentParser) -> None:
    """Append its default to every option's help, in ``parser`` and all its subcommands,
    unless it has none (None, a flag) or the help already names it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _show_defaults(child)
        elif action.option_strings and action.default is not None and not isinstance(action.default, bool):
            text = action.help or ""
            if action.default is not argparse.SUPPRESS and "default" not in text:
                action.help = f"{text} (default: %(default)s)".lstrip()


def _add_compile(sub: Any) -> None:
    """``structgen compile``: a constraint's token FSM, walked over an instance."""
    comp = sub.add_parser("compile", help="compile a JSON Schema or regex to a token FSM and check an instance")
    comp.add_argument("--tokenizer", required=True, help="local Hugging Face tokenizer folder")
    src = comp.add_mutually_exclusive_group(required=True)
    src.add_argument("--schema", help="JSON Schema: a file path or inline JSON")
    src.add_argument("--regex", help="a regex (fullmatch)")
    comp.add_argument("--instance", help="a JSON value (schema) or text (regex) to walk through the FSM")
    comp.add_argument("--whitespace", default="canonical", choices=["canonical", "compact", "flexible"])
    comp.add_argument("--timeout-s", type=float, default=10.0)
    comp.add_argument("--max-states", type=int, default=50_000)


def _add_generate(sub: Any) -> None:
    """``structgen generate``: one validated object from a local model."""
    gen = sub.add_parser("generate", help="generate a validated object with a local model")
    gen.add_argument("--model", default=None, help="local Hugging Face model folder (default: the embedded default model)")
    what = gen.add_mutually_exclusive_group()
    what.add_argument("--schema", help="JSON Schema: a file path or inline JSON")
    what.add_argument("--regex", help="a regex the output must fully match")
    what.add_argument(
        "--pydantic",
        help="module:Class of a Pydantic model (default: structgen.demo.examples:Person, which the embedded model reads "
        "in sentences like 'Ben Okafor, 41, can be reached at ben@post.eu.'; "
        "structgen.demo.examples:Character is SGLang's benchmark model, for a real model)",
    )
    gen.add_argument("--prompt", required=True, help="prompt text")
    gen.add_argument("--chat", action="store_true", help="send the prompt as one user message through the chat template")
    gen.add_argument("--max-tokens", type=int, default=256)
    gen.add_argument("--temperature", type=float, default=0.0)
    gen.add_argument("--top-p", type=float, default=1.0)
    gen.add_argument("--top-k", type=int, default=0)
    gen.add_argument("--seed", type=int, default=None)
    gen.add_argument("--no-jump-forward", action="store_true", help="decode forced tokens one by one")
    gen.add_argument("--device", default="auto")
    gen.add_argument("--dtype", default="auto")
    gen.add_argument("--cpu-threads", type=int, default=None, help=CPU_THREADS_HELP)


def _add_demo(sub: Any) -> None:
    """``structgen demo``: the embedded model on a few held-out texts."""
    demo = sub.add_parser("demo", help="a few extractions with the embedded demo model, with stats")
    demo.add_argument("--model", default=None, help="model folder (default: the embedded demo model)")
    demo.add_argument("--held-out", type=int, default=3, help="examples from the generator's held-out split")


def _add_serve(sub: Any) -> None:
    """``structgen serve``: the HTTP server."""
    srv = sub.add_parser("serve", help="serve /v1/structured and the OpenAI-compatible routes over HTTP")
    srv.add_argument("model_arg", nargs="?", metavar="MODEL", default=None, help="the model folder (same as --model)")
    srv.add_argument("--model", default=None, help="local Hugging Face model folder (default: the embedded default model)")
    srv.add_argument("--tokenizer", default=None, help="tokenizer folder (default: the model folder)")
    srv.add_argument("--chat-template", default=None, help="a Jinja chat template, as a file or inline text (default: the tokenizer's own)")
    srv.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback only)")
    srv.add_argument("--port", type=int, default=8000)
    srv.add_argument(
        "--api-key", default=os.environ.get("STRUCTGEN_API_KEY"), help="require 'Authorization: Bearer KEY' ($STRUCTGEN_API_KEY)"
    )
    srv.add_argument("--max-queue", type=int, default=1024, help="requests in flight before 429")
    srv.add_argument("--max-body-bytes", type=int, default=4 * 1024 * 1024, help="larger bodies get 413")
    srv.add_argument("--served-model-name", default=None, help="model id in /v1/models (default: the folder name)")
    srv.add_argument("--device", default="auto")
    srv.add_argument("--dtype", default="auto")
    srv.add_argument("--cpu-threads", type=int, default=None, help=CPU_THREADS_HELP)
    srv.add_argument("--max-total-tokens", type=int, default=0, help="KV-pool slots (0: from --mem-fraction)")
    srv.add_argument("--mem-fraction", type=float, default=0.5)
    srv.add_argument("--max-running-requests", type=int, default=256)
    srv.add_argument("--max-context", "--max-model-len", dest="max_context", type=int, default=4096, help="longest prompt + output, tokens")
    srv.add_argument("--compile-timeout-s", type=float, default=10.0)
    srv.add_argument("--max-states", type=int, default=50_000)
    srv.add_argument("--compile-workers", type=int, default=2, help="compile threads (when --compile-processes is 0)")
    srv.add_argument(
        "--compile-processes",
        default="auto",
        help="compile (and --precompute-states rows) on this many worker processes, off the engine's interpreter lock "
        "(0: threads; auto: three quarters of the cores, at most 32, on a CUDA device with 8 or more, else 0)",
    )
    srv.add_argument(
        "--row-processes",
        default="auto",
        help="worker processes that compute first-visit mask rows of grammars compiled on --compile-processes, a whole "
        "batch at once (0: in the engine step; auto: the cores but a quarter and one when compile processes run, else 0)",
    )
    srv.add_argument(
        "--precompute-states",
        type=int,
        default=0,
        help="mask rows each compile computes on its worker before the grammar serves (0: on first visit, in the engine step)",
    )
    srv.add_argument("--precompute-budget-s", type=float, default=None, help="stop a compile's eager rows this long after it began")
    srv.add_argument("--no-radix-cache", action="store_true")
    srv.add_argument("--no-jump-forward", action="store_true", help="engine default for requests that do not say")
    srv.add_argument("--no-cuda-graph", action="store_true")
    srv.add_argument(
        "--no-overlap-schedule", action="store_true", help="process each step's sampled tokens before launching the next forward"
    )
    srv.add_argument(
        "--no-prefill-while-compiling",
        action="store_true",
        help="queue a request for prefill only once its grammar is compiled (default: its prompt prefills meanwhile)",
    )
    srv.add_argument(
        "--defer-late-rows",
        action="store_true",
        help="a request whose mask row a row worker still computes once the forward is done samples a step later (default: the step waits)",
    )
    srv.add_argument(
        "--prefill-kernel",
        default="fa2",
        choices=["auto", "fa2", "fa3"],
        help="FlashInfer's paged prefill for extend batches (default fa2; auto: FlashInfer's choice, FA3 on Hopper)",
    )
    srv.add_argument(
        "--extend-as-decode",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run small extend batches (jump-forward chains among decodes) through the decode graphs, one row per token (default: on)",
    )
    srv.add_argument("--random-weights-seed", type=int, default=None, help="draw random weights (benchmarks of a config-only folder)")
    srv.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])


def _walks(fsm: Any, ids: list[int]) -> bool:
    """Whether ``ids`` walk ``fsm`` from its initial state to an accepting one."""
    cur = fsm.cursor()
    for t in ids:
        if not cur.is_allowed(t):
            return False
        cur.advance(t)
    return bool(cur.is_accepting())


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
            text = _read_text(args.schema) if os.path.exists(args.schema) else args.schema
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
    canonical: bytes | None = None
    if args.schema is not None:
        try:
            value = json.loads(args.instance)
        except json.JSONDecodeError as e:
            print(f"structgen: error: --instance is not JSON: {e}", file=sys.stderr)
            return 2
        canonical = constraint.options.dumps(value).encode()
    data = args.instance.encode()  # the literal text given is what is checked
    ids = vocab.encode_bytes(data)
    if ids is None:
        print("structgen: error: the instance cannot be tokenized", file=sys.stderr)
        return 2
    accepted = _walks(fsm, ids)
    print(f"instance: {data.decode()[:200]}")
    print(f"accepted: {accepted} ({len(ids)} tokens)")
    if not accepted and canonical is not None and canonical != data:
        canon_ids = vocab.encode_bytes(canonical)
        if canon_ids is not None and _walks(fsm, canon_ids):
            print(f"  the grammar's spelling of the same value is accepted: {canonical.decode()[:200]}")
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


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _generate_command(args: argparse.Namespace) -> int:
    import importlib
    import json

    from pydantic import BaseModel

    from structgen.api import GenerationError, default_model_path, generate
    from structgen.engine.engine import Engine, EngineConfig
    from structgen.engine.request import RequestError, SamplingParams
    from structgen.models import ModelLoadError, UnsupportedModelError
    from structgen.schemas import ConstraintError

    try:
        model_cls = schema = regex = None
        if args.schema is not None:
            schema = _read_text(args.schema) if os.path.exists(args.schema) else args.schema
        elif args.regex is not None:
            regex = args.regex
        else:
            spec = args.pydantic or "structgen.demo.examples:Person"
            mod, _, name = spec.partition(":")
            model_cls = getattr(importlib.import_module(mod), name, None)
            if not (isinstance(model_cls, type) and issubclass(model_cls, BaseModel)):
                raise ValueError(f"--pydantic {spec!r} is not a pydantic.BaseModel subclass")
        path = args.model if args.model is not None else default_model_path()
        prompt = [{"role": "user", "content": args.prompt}] if args.chat else args.prompt
        params = SamplingParams(
            max_tokens=args.max_tokens,
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k,
            seed=args.seed,
            jump_forward=not args.no_jump_forward,
        )
        with Engine(path, EngineConfig(device=args.device, dtype=args.dtype, cpu_threads=args.cpu_threads)) as engine:
            value, out = generate(model_cls, prompt, schema=schema, regex=regex, engine=engine, params=params, return_output=True)
            stats = engine.stats()
    except GenerationError as e:
        print(f"structgen: no valid output ({e.finish_reason}): {e}\nraw text: {e.text!r}", file=sys.stderr)
        return 1
    except (ConstraintError, RequestError, ModelLoadError, UnsupportedModelError, FileNotFoundError, ValueError, ImportError) as e:
        print(f"structgen: error: {e}", file=sys.stderr)
        return 2
    if isinstance(value, BaseModel):
        print(value.model_dump_json())
    elif isinstance(value, str) and regex is not None:
        print(value)
    else:
        print(json.dumps(value, ensure_ascii=False))
    u = out.usage
    print(
        f"finish={out.finish_reason} prompt={u.prompt_tokens} cached={u.cached_tokens} completion={u.completion_tokens} "
        f"sampled={u.sampled_tokens} forced={u.forced_tokens} rolled_back={u.rolled_back_tokens} forwards={u.forwards} "
        f"ttft_ms={u.ttft_s * 1e3:.1f} latency_ms={u.latency_s * 1e3:.1f} model={path}"
    )
    print(f"engine: forwards={stats.forwards} prefill_tokens={stats.prefill_tokens_computed} cache_hit_tokens={stats.cache_hit_tokens}")
    return 0


def _serve_command(args: argparse.Namespace) -> int:
    try:
        from structgen.server import ServerConfig, serve
    except ImportError as e:
        print(f"structgen: error: the server needs the 'server' extra (pip install 'structgen[server]'): {e}", file=sys.stderr)
        return 2
    from structgen.engine.config import worker_processes
    from structgen.engine.engine import EngineConfig
    from structgen.engine.scheduler import SchedulerConfig
    from structgen.fsm import CompilerConfig
    from structgen.models.llama import UnsupportedModelError
    from structgen.models.loader import ModelLoadError
    from structgen.runtime.memory import MemoryConfig

    if args.model_arg is not None and args.model is not None and args.model_arg != args.model:
        print(f"structgen: error: two models given: {args.model_arg!r} and --model {args.model!r}", file=sys.stderr)
        return 2
    args.model = args.model or args.model_arg
    try:
        engine = EngineConfig(
            device=args.device,
            dtype=args.dtype,
            cpu_threads=args.cpu_threads,
            cuda_graph=not args.no_cuda_graph,
            prefill_kernel=args.prefill_kernel,
            extend_as_decode=args.extend_as_decode,
            random_weights_seed=args.random_weights_seed,
            memory=MemoryConfig(
                max_total_tokens=args.max_total_tokens,
                mem_fraction=args.mem_fraction,
                max_context=args.max_context,
            ),
            scheduler=SchedulerConfig(
                max_running_requests=args.max_running_requests,
                radix_cache=not args.no_radix_cache,
                jump_forward=not args.no_jump_forward,
                overlap_schedule=not args.no_overlap_schedule,
                prefill_while_compiling=not args.no_prefill_while_compiling,
                defer_late_rows=args.defer_late_rows,
            ),
            compiler=CompilerConfig(
                timeout_s=args.compile_timeout_s,
                max_states=args.max_states,
                workers=args.compile_workers,
                **worker_processes(args.compile_processes, args.row_processes, args.device, reserved=2),  # engine + front end
                precompute_states=args.precompute_states,
                precompute_budget_s=args.precompute_budget_s,
            ),
        )
        template = args.chat_template
        if template is not None and os.path.isfile(template):
            template = _read_text(template)
        elif template is not None and "{{" not in template and "{%" not in template:
            raise ValueError(f"--chat-template {template!r} is neither a file nor a Jinja template")
        config = ServerConfig(
            model=args.model,
            tokenizer=args.tokenizer,
            chat_template=template,
            host=args.host,
            port=args.port,
            api_key=args.api_key,
            max_queue=args.max_queue,
            max_body_bytes=args.max_body_bytes,
            served_model_name=args.served_model_name,
            engine=engine,
        )
        serve(config, log_level=args.log_level)
    except (ValueError, RuntimeError, ModelLoadError, UnsupportedModelError) as e:
        print(f"structgen: error: {e}", file=sys.stderr)
        return 2
    return 0


def shadowed_kernels() -> str | None:
    """Why the commands cannot load a model here, or None: the checkout's ``kernels/`` folder
    is on the import path as the top-level ``kernels`` (``python -m structgen`` run from the
    checkout's root puts it there) while Hugging Face's ``kernels`` package, which
    transformers imports when it reads a model config, is installed."""
    import importlib.metadata
    import importlib.util

    found, ours = importlib.util.find_spec("kernels"), importlib.util.find_spec("structgen.kernels")
    if found is None or ours is None or found.origin is None or found.origin != ours.origin:
        return None
    try:
        importlib.metadata.version("kernels")
    except importlib.metadata.PackageNotFoundError:
        return None
    return (
        "this checkout's kernels/ folder shadows the Hugging Face 'kernels' package that transformers imports; "
        "run `python -P -m structgen ...` or the `structgen` command instead of `python -m structgen` from the checkout's root"
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    shadowed = shadowed_kernels()
    if shadowed is not None:
        print(f"structgen: error: {shadowed}", file=sys.stderr)
        return 2
    if args.command == "compile":
        return _compile_command(args)
    if args.command == "generate":
        return _generate_command(args)
    if args.command == "serve":
        return _serve_command(args)
    if args.command == "demo":
        from structgen.demo.run import run_demo
        from structgen.models.llama import UnsupportedModelError
        from structgen.models.loader import ModelLoadError

        try:
            return run_demo(args.model, held_out=args.held_out)
        except (ValueError, FileNotFoundError, ModelLoadError, UnsupportedModelError) as e:
            print(f"structgen: error: {e}", file=sys.stderr)
            return 2
    if args.command == "bench":
        from structgen.bench.commands import bench_command

        return bench_command(args, argv)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
