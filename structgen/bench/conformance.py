"""Conformance benchmark of the compile layer: ``structgen bench conformance``.

For every schema of the JSON-Schema-Test-Suite (draft 2020-12) and of MaskBench
(JSONSchemaBench) the outcome is *compiled*, *unsupported* (with the keyword) or *error*
(time-out, state cap, crash).  For compiled schemas every test instance is serialized in our
layout (keys in schema order, falling back to the instance's own order) and walked through
the token FSM token by token with the tokenizer's canonical encoding; a schema *passes* when
every valid instance is accepted and every invalid one rejected; schemas compile with JSON
Schema's own reading where the defaults narrow (:data:`EXACT_OPTIONS`: undeclared properties
allowed, a schema without ``type`` open to every type).  Soundness is checked twice:
invalid instances that are accepted, and random strings sampled from the automaton that fail
``jsonschema`` validation (with format checking) or do not parse.

Timings: cold time-to-first-mask (compile + the initial state's mask row), cache hits, and the
CPU cost per token of ``mask_row`` + ``advance`` on the first walk (cold, rows computed on
first visit) and on a second walk (warm).
"""

from __future__ import annotations

import gc
import json
import os
import random
import signal
import time
import zlib
from dataclasses import asdict
from typing import Any

import numpy as np

from structgen.bench.common import run_meta
from structgen.bench.conformance_anchors import ANCHORS, Anchor, AnchorResult, anchor_version, run_anchor, summarize_anchor
from structgen.bench.conformance_items import Item, ItemResult, KeyOrderer, exact_validator, load_maskbench, load_test_suite, tally
from structgen.bench.conformance_report import TIMED_TOKENS, render_markdown, summarize
from structgen.bench.item_pool import PoolSpec, limit_cpu, run_items
from structgen.fsm.compile_process import WARM_UP
from structgen.fsm.compiler import GrammarCompiler
from structgen.fsm.compiler_config import CompilerConfig
from structgen.fsm.constraint import Constraint
from structgen.fsm.cursor import TokenRejectedError
from structgen.fsm.dfa import DEAD
from structgen.fsm.errors import GrammarCompileError, GrammarTimeoutError
from structgen.fsm.lazy_dfa import LazyDFA
from structgen.fsm.token_fsm import TokenFSM
from structgen.fsm.vocab import Vocabulary
from structgen.schemas.errors import SchemaError, UnsupportedSchemaError
from structgen.schemas.schema_options import SchemaOptions


def accepts_tokens(fsm: TokenFSM, ids: list[int]) -> bool:
    """Whether the FSM accepts ``ids`` followed by EOS (``advance`` only; no mask rows)."""
    cur = fsm.cursor()
    try:
        for t in ids:
            cur.advance(t)
    except TokenRejectedError:
        return False
    return cur.is_accepting()


def time_tokens(fsm: TokenFSM, ids: list[int], out: list[int]) -> None:
    """Append the ns of ``mask_row`` + ``advance`` for each accepted token of ``ids``."""
    cur = fsm.cursor()
    clock = time.perf_counter_ns
    for t in ids:
        t0 = clock()
        row = cur.mask_row_index
        try:
            cur.advance(t)
        except TokenRejectedError:
            return
        out.append(clock() - t0)
        assert fsm.row_allows(row, t)


def sample_strings(dfa: LazyDFA, n: int, rng: random.Random, max_len: int = 4000) -> list[bytes]:
    """``n`` random strings of the automaton's language: random walks over live bytes, steered
    towards acceptance (shortest-path moves) with growing probability as they lengthen."""
    out: list[bytes] = []
    for _ in range(n):
        s = dfa.initial
        buf = bytearray()
        while len(buf) <= max_len:
            if dfa.is_accepting(s) and (rng.random() < 0.25 or len(buf) > max_len // 2):
                break
            row = dfa.expand(s)
            live = np.flatnonzero(row != DEAD)
            if live.size == 0:
                break
            if len(buf) > max_len // 4 or rng.random() < 0.3:
                c = int(live[np.argmin([dfa.distance_to_accept(int(row[x])) for x in live])])
            else:
                c = int(live[rng.randrange(live.size)])
            b = int(dfa.class_first_byte[c]) + rng.randrange(int(dfa.class_size[c]))
            buf.append(b)
            s = int(row[c])
        if dfa.is_accepting(s):
            out.append(bytes(buf))
    return out


# ----------------------------------------------------------------------------- one item

_STATE: dict[str, Any] = {}


def _init_worker(
    tokenizer: str,
    timeout_s: float,
    max_states: int,
    samples: int,
    precompute_states: int = 0,
    precompute_budget_s: float | None = None,
    pause_gc: bool = True,
    anchors: tuple[str, ...] = (),
    product_cache_mb: int = 128,
) -> None:
    import jsonschema  # noqa: F401 - its format checkers take seconds to import; not per schema

    _STATE["anchors"] = {name: Anchor(name, tokenizer) for name in anchors}

    vocab = Vocabulary.from_tokenizer(tokenizer)
    vocab.prepare()  # once per worker, outside the timed compiles
    _STATE.update(
        vocab=vocab,
        compiler=GrammarCompiler(
            vocab,
            CompilerConfig(
                timeout_s=timeout_s,
                max_states=max_states,
                cache_size=2,
                precompute_states=precompute_states,
                precompute_budget_s=precompute_budget_s,
                pause_gc=pause_gc,
                product_cache_mb=product_cache_mb,
            ),
        ),
        samples=samples,
        timeout_s=timeout_s,
        gc_freeze=pause_gc,
    )
    _STATE["compiler"].compile(WARM_UP)  # the one-time tables a compile process meets at its start-up
    if pause_gc:  # the engine's start-up: the vocabulary and the anchors out of the collector's passes
        gc.collect()
        gc.freeze()


class _HardTimeout(BaseException):
    """The per-schema alarm: a BaseException, so no engine's ``except Exception`` (an anchor's
    refusal handler) can record it as a refusal."""


def _alarm(_sig: int, _frame: Any) -> None:
    raise _HardTimeout()


OURS = "structgen"
"""The engine name of :func:`run_task`'s own tasks (the others are anchors)."""

EXACT_OPTIONS = SchemaOptions(allow_undeclared_properties=True, infer_types=False)
"""JSON Schema's own reading where the defaults narrow: undeclared properties allowed, and a
schema without ``type`` open to every type (its keywords constrain their own types only)."""

Task = tuple[int, Item, str]
"""One engine on one schema: (the schema's index in the run, the schema, :data:`OURS` or an anchor's name)."""

TaskResult = tuple[int, str, ItemResult | AnchorResult]
"""(index, engine, its result) of a :data:`Task`."""


def _task_died(task: Task) -> TaskResult:
    """The result of a task whose worker process died twice on it (out of memory, a crash in
    native code): an error for that engine alone, counted with the others."""
    index, item, engine = task
    if engine == OURS:
        return index, engine, ItemResult(item.suite, item.name, "error", detail="worker-died")
    return index, engine, AnchorResult(detail="worker-died")


def _hard_alarm_s() -> int:
    """Seconds before the alarm ends one engine's compile and checks of a schema."""
    return int(_STATE["timeout_s"] * 3) + 5


def run_item(item: Item) -> ItemResult:
    """Compile and check one schema with structgen, then with each anchor, in this process (a
    worker initialised by ``_init_worker``)."""
    _i, _e, res = run_task((0, item, OURS))
    assert isinstance(res, ItemResult)
    for name in _STATE.get("anchors", {}):
        res.anchors[name] = asdict(run_task((0, item, name))[2])
    return res


def run_task(task: Task) -> TaskResult:
    """One engine on one schema (in a worker initialised by ``_init_worker``): structgen's
    compile and checks, or one anchor's.  Each is its own task, so an anchor that kills its
    worker costs only its own result."""
    index, item, engine = task
    limit_cpu(_hard_alarm_s() + 30)  # past the alarm: a task stuck in native code
    if engine == OURS:
        return index, engine, run_ours(item)
    texts = instance_texts(item, EXACT_OPTIONS)
    return index, engine, _run_anchor_bounded(_STATE["anchors"][engine], item, texts)


def _run_anchor_bounded(anchor: Anchor, item: Item, texts: list[tuple[list[str], bool]]) -> AnchorResult:
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(_hard_alarm_s())
    try:
        return run_anchor(anchor, item.schema, texts)
    except _HardTimeout:
        return AnchorResult(detail="hard-timeout")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def instance_texts(item: Item, options: SchemaOptions) -> list[tuple[list[str], bool]]:
    """Each test instance's texts in our layout (keys in schema order, then instance order), with
    whether it is valid."""
    orderer = KeyOrderer(item.schema)
    out = []
    for data, valid in item.tests:
        texts = []
        try:
            texts.append(options.dumps(orderer.order(item.schema, data)))
        except (ValueError, TypeError, RecursionError):
            pass
        try:
            plain = options.dumps(data)
        except (ValueError, TypeError):
            plain = None
        if plain is not None and plain not in texts:
            texts.append(plain)
        out.append((texts, valid))
    return out


def run_ours(item: Item) -> ItemResult:
    """Compile and check one schema with structgen."""
    compiler: GrammarCompiler = _STATE["compiler"]
    res = ItemResult(item.suite, item.name, "error")
    options = EXACT_OPTIONS
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(_hard_alarm_s())
    try:
        t0 = time.perf_counter()
        try:
            constraint = Constraint.json_schema(item.schema, options)
            fsm = compiler.compile(constraint)
        except UnsupportedSchemaError as e:
            res.outcome, res.detail = "unsupported", e.keyword
            return res
        except GrammarTimeoutError:
            res.detail = "timeout"
            return res
        except GrammarCompileError as e:
            res.detail = "empty" if "empty language" in str(e) else "state-cap"
            return res
        except SchemaError as e:
            res.detail = f"schema-error:{e.keyword}"
            return res
        res.first_mask_ms = (time.perf_counter() - t0) * 1000
        t1 = time.perf_counter()
        compiler.compile(constraint)
        res.cache_hit_ms = (time.perf_counter() - t1) * 1000
        res.outcome = "compiled"
        res.states = fsm.num_states
        res.rows_complete = fsm.rows_complete
        if _STATE["gc_freeze"]:
            gc.freeze()  # as the engine does when a grammar starts serving (GrammarManager)
        try:
            check(item, fsm, options, res)
        except GrammarCompileError as e:  # a cap reached while walking (lazy expansion)
            res.outcome, res.detail = "error", "serve-state-cap" if "max_states" in str(e) else "serve-limit"
            return res
        res.rows = fsm.num_rows
        res.states_after = fsm.num_states
        return res
    except _HardTimeout:
        res.outcome, res.detail = "error", "hard-timeout"
        return res
    except RecursionError:
        res.outcome, res.detail = "error", "recursion"
        return res
    except Exception as e:  # a crash is a finding: recorded, never hidden
        res.outcome, res.detail = "error", f"crash:{type(e).__name__}:{str(e)[:200]}"
        return res
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def check(item: Item, fsm: TokenFSM, options: SchemaOptions, res: ItemResult) -> None:

    vocab = fsm.vocab
    passing = True
    timed = False
    for texts, valid in instance_texts(item, options):
        accepted = False
        for text in texts:
            ids = vocab.encode_bytes(text.encode())
            if ids is not None and accepts_tokens(fsm, ids):
                accepted = True
                if not timed:
                    time_tokens(fsm, ids[:TIMED_TOKENS], res.token_ns_cold)
                    time_tokens(fsm, ids[:TIMED_TOKENS], res.token_ns_warm)
                    timed = True
                break
        passing &= tally(res, accepted, valid)
        if not valid and accepted and len(res.violation_examples) < 3:
            res.violation_examples.append(f"invalid accepted: {texts[0][:200] if texts else '(no text)'}")
    res.passing = passing
    n = _STATE["samples"]
    if n:
        validator = exact_validator(item.schema)
        rng = random.Random(zlib.crc32(item.name.encode()))  # the same samples in every process (str hash is salted)
        for s in sample_strings(fsm.dfa, n, rng):
            res.sample_total += 1
            try:
                value = json.loads(s.decode("utf-8"))
                ok = validator.is_valid(value)
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                ok = False
            if not ok:
                res.sample_violations += 1
                if len(res.violation_examples) < 3:
                    res.violation_examples.append(f"sample fails validation: {s[:200]!r}")


# ----------------------------------------------------------------------------- report


def run(
    *,
    tokenizer: str,
    suites: list[str],
    test_suite_root: str | None,
    maskbench_root: str | None,
    out_dir: str,
    maskbench_limit: int | None = None,
    timeout_s: float = 10.0,
    max_states: int = 50_000,
    samples: int = 5,
    workers: int = 2,
    precompute_states: int = 0,
    precompute_budget_s: float | None = None,
    pause_gc: bool = True,
    anchors: tuple[str, ...] = (),
    product_cache_mb: int = 128,
    shard: tuple[int, int] | None = None,
    command: str = "",
    progress: bool = True,
) -> dict[str, Any]:
    """Run the suites and write ``conformance-<tokenizer>.{json,md}`` under ``out_dir``.
    ``shard=(i, n)`` runs every n-th schema from the i-th (0-based) and writes only
    ``conformance-<tokenizer>.shard-<i>-of-<n>.json`` (every field kept), for machines that
    split one run; :func:`merge` reports the shards together.
    ``precompute_states``: :class:`~structgen.fsm.compiler.CompilerConfig`'s (rows computed
    in the compile, so within the first-mask time; 0 = lazy rows, computed on the first
    walk); ``precompute_budget_s``: its time limit per compile (s, None: ``timeout_s``);
    ``pause_gc``: its garbage-collector pause during compiles, and the heap frozen out of the
    collector after a worker's start-up and after each compile, as the engine freezes it (so
    the token walks pay no full collection over the vocabulary); ``product_cache_mb``: its
    cross-compile cache of eager sub-automata (0: off; each worker has its own, kept across
    the schemas it compiles, as a compile process keeps it); ``anchors``: llguidance /
    xgrammar run on the same schemas and instances (:mod:`.conformance_anchors`).
    Raises ``ValueError`` for bad limits or an unknown anchor (before any worker starts) and
    ``FileNotFoundError`` when no suite folder holds schemas."""
    CompilerConfig(
        timeout_s=timeout_s,
        max_states=max_states,
        precompute_states=precompute_states,
        precompute_budget_s=precompute_budget_s,
        pause_gc=pause_gc,
        product_cache_mb=product_cache_mb,
    )  # validates the limits
    for name in anchors:
        if name not in ANCHORS:
            raise ValueError(f"unknown anchor {name!r}; choose from {', '.join(ANCHORS)}")
    if workers < 1 or samples < 0:
        raise ValueError(f"workers must be >= 1 and samples >= 0, got workers={workers}, samples={samples}")
    if shard is not None and not 0 <= shard[0] < shard[1]:
        raise ValueError(f"shard {shard[0]}/{shard[1]}: need 0 <= i < n")
    items: list[Item] = []
    if "test-suite" in suites and test_suite_root:
        items += list(load_test_suite(test_suite_root))
    if "maskbench" in suites and maskbench_root:
        items += list(load_maskbench(maskbench_root, maskbench_limit))
    if not items:
        raise FileNotFoundError("no schemas found: pass --test-suite / --maskbench folders that exist")
    if shard is not None:
        items = items[shard[0] :: shard[1]]
    started = run_meta(command)  # the commit whose code runs (read now, not when the run ends)
    spec = PoolSpec(
        run_task,
        _init_worker,
        (tokenizer, timeout_s, max_states, samples, precompute_states, precompute_budget_s, pause_gc, tuple(anchors), product_cache_mb),
    )
    from tqdm import tqdm

    engines = (OURS, *anchors)
    tasks = [(i, item, engine) for i, item in enumerate(items) for engine in engines]
    runs = run_items(spec, tasks, workers, on_death=_task_died, recycle=500 * workers * len(engines))
    done: dict[tuple[int, str], ItemResult | AnchorResult] = {}
    for index, engine, res in tqdm(runs, total=len(tasks), disable=not progress, desc="schemas × engines"):
        done[index, engine] = res
    results: list[ItemResult] = []
    for i in range(len(items)):
        ours = done[i, OURS]
        assert isinstance(ours, ItemResult)
        ours.anchors = {name: asdict(done[i, name]) for name in anchors}
        results.append(ours)
    tok_name = os.path.basename(os.path.normpath(tokenizer))
    meta = {
        **started,
        "tokenizer": tokenizer,
        "tokenizer_name": tok_name,
        "timeout_s": timeout_s,
        "max_states": max_states,
        "precompute_states": precompute_states,
        "precompute_budget_s": precompute_budget_s,
        "pause_gc": pause_gc,
        "product_cache_mb": product_cache_mb,
        "samples": samples,
        "maskbench_limit": maskbench_limit,
        "anchors": {name: anchor_version(name) for name in anchors},
    }
    os.makedirs(out_dir, exist_ok=True)
    if shard is not None:
        path = os.path.join(out_dir, f"conformance-{tok_name}.shard-{shard[0]}-of-{shard[1]}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"meta": {**meta, "shard": list(shard)}, "items": [asdict(r) for r in results]}, f, ensure_ascii=False)
        return {"meta": meta, "suites": {}}
    return _report(results, meta, anchors, out_dir)


def merge(paths: list[str], out_dir: str) -> dict[str, Any]:
    """Report shard files of one run (:func:`run` with ``shard``) together, as one run would.
    Raises ``ValueError`` when they are not the n shards of one run."""
    metas, results = [], []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        metas.append(data["meta"])
        results += [ItemResult(**d) for d in data["items"]]
    shards = sorted(tuple(m.get("shard") or ()) for m in metas)
    n = len(paths)
    if shards != [(i, n) for i in range(n)]:
        raise ValueError(f"expected shards 0..{n - 1} of {n}, got {shards}")
    meta = {k: v for k, v in metas[0].items() if k != "shard"}
    meta["shards"] = n
    meta["command"] = str(meta.get("command", "")).replace(f"--shard 0/{n}", f"--shard I/{n} (I = 0..{n - 1}, merged with --merge)")
    return _report(results, meta, tuple(meta["anchors"]), out_dir)


def _report(results: list[ItemResult], meta: dict[str, Any], anchors: tuple[str, ...], out_dir: str) -> dict[str, Any]:
    by_suite: dict[str, list[ItemResult]] = {}
    for r in results:
        by_suite.setdefault(r.suite, []).append(r)
    summaries = {name: summarize(rs) for name, rs in sorted(by_suite.items())}
    for name, rs in by_suite.items():
        summaries[name]["anchors"] = {a: summarize_anchor(rs, a) for a in anchors}
    tok_name = meta["tokenizer_name"]
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"conformance-{tok_name}.json"), "w", encoding="utf-8") as f:
        json.dump(
            {
                "meta": meta,
                "suites": summaries,
                "items": [{k: v for k, v in asdict(r).items() if not k.startswith("token_ns")} for r in results],
            },
            f,
            indent=1,
            ensure_ascii=False,
        )
    with open(os.path.join(out_dir, f"conformance-{tok_name}.md"), "w", encoding="utf-8") as f:
        f.write(render_markdown(meta, summaries))
    return {"meta": meta, "suites": summaries}
