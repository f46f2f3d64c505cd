"""Conformance benchmark of the compile layer: ``structgen bench conformance``.

For every schema of the JSON-Schema-Test-Suite (draft 2020-12) and of MaskBench
(JSONSchemaBench) the outcome is *compiled*, *unsupported* (with the keyword) or *error*
(time-out, state cap, crash).  For compiled schemas every test instance is serialized in our
layout (keys in schema order, falling back to the instance's own order) and walked through
the token FSM token by token with the tokenizer's canonical encoding; a schema *passes* when
every valid instance is accepted and every invalid one rejected.  Soundness is checked twice:
invalid instances that are accepted, and random strings sampled from the automaton that fail
``jsonschema`` validation (with format checking) or do not parse.

Timings: cold time-to-first-mask (compile + the initial state's mask row), cache hits, and the
CPU cost per token of ``mask_row`` + ``advance`` on the first walk (cold, rows computed on
first visit) and on a second walk (warm).
"""

from __future__ import annotations

import glob
import json
import multiprocessing as mp
import os
import platform
import random
import signal
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np

from structgen.bench.common import git_commit, percentile
from structgen.fsm.compiler import CompilerConfig, Constraint, GrammarCompiler
from structgen.fsm.cursor import TokenRejectedError
from structgen.fsm.dfa import DEAD
from structgen.fsm.errors import GrammarCompileError, GrammarTimeoutError
from structgen.fsm.lazy_dfa import LazyDFA
from structgen.fsm.token_fsm import TokenFSM
from structgen.fsm.vocab import Vocabulary
from structgen.schemas.errors import SchemaError, UnsupportedSchemaError
from structgen.schemas.json_schema import SchemaOptions


@dataclass
class Item:
    """One schema with its test instances: ``tests`` is a list of (data, valid)."""

    suite: str
    name: str
    schema: Any
    tests: list[tuple[Any, bool]]


@dataclass
class ItemResult:
    suite: str
    name: str
    outcome: str  # compiled | unsupported | error
    detail: str = ""
    passing: bool = False
    valid_total: int = 0
    valid_accepted: int = 0
    invalid_total: int = 0
    invalid_accepted: int = 0
    sample_total: int = 0
    sample_violations: int = 0
    violation_examples: list[str] = field(default_factory=list)
    first_mask_ms: float = 0.0
    cache_hit_ms: float = 0.0
    states: int = 0
    states_after: int = 0
    rows: int = 0
    rows_complete: bool = False  # every token-reachable state's row computed by the compile
    token_ns_cold: list[int] = field(default_factory=list)
    token_ns_warm: list[int] = field(default_factory=list)


def load_test_suite(root: str) -> Iterator[Item]:
    """JSON-Schema-Test-Suite ``tests/draft2020-12/*.json`` (not ``optional/``)."""
    for path in sorted(glob.glob(os.path.join(root, "tests", "draft2020-12", "*.json"))):
        with open(path, encoding="utf-8") as f:
            groups = json.load(f)
        base = os.path.basename(path)[:-5]
        for i, g in enumerate(groups):
            tests = [(t["data"], bool(t["valid"])) for t in g["tests"]]
            yield Item("json-schema-test-suite", f"{base}#{i} {g['description']}", g["schema"], tests)


def load_maskbench(root: str, limit: int | None = None, seed: int = 0) -> Iterator[Item]:
    """MaskBench ``data/*.json`` files (optionally a seeded sample of ``limit``)."""
    paths = sorted(glob.glob(os.path.join(root, "*.json")))
    if limit is not None and limit < len(paths):
        paths = sorted(random.Random(seed).sample(paths, limit))
    for path in paths:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        tests = [(t["data"], bool(t["valid"])) for t in d.get("tests", [])]
        yield Item("maskbench", os.path.basename(path)[:-5], d["schema"], tests)


# ----------------------------------------------------------------------------- serialization


class KeyOrderer:
    """Re-serializes an instance with object keys in the order our grammar generates them."""

    def __init__(self, root: Any) -> None:
        import jsonschema

        self.root = root
        cls = jsonschema.validators.validator_for(root, default=jsonschema.Draft202012Validator)
        self.validator = cls(root) if isinstance(root, (dict, bool)) else None

    def resolve(self, s: Any) -> Any:
        seen = set()
        while isinstance(s, dict) and isinstance(s.get("$ref"), str) and s["$ref"].startswith("#") and s["$ref"] not in seen:
            seen.add(s["$ref"])
            node: Any = self.root
            try:
                for tok in s["$ref"][1:].split("/")[1:]:
                    tok = tok.replace("~1", "/").replace("~0", "~")
                    node = node[int(tok)] if isinstance(node, list) else node[tok]
            except (KeyError, IndexError, ValueError, TypeError):
                return s
            rest = {k: v for k, v in s.items() if k != "$ref"}
            s = {"allOf": [node, rest]} if rest else node
        return s

    def valid(self, schema: Any, inst: Any) -> bool:
        if self.validator is None:
            return False
        try:
            return bool(self.validator.evolve(schema=schema).is_valid(inst))
        except Exception:
            return False

    def parts(self, schema: Any, inst: Any, depth: int = 0) -> list[Any]:
        """The flattened list of schemas whose property orders apply (allOf, chosen branches)."""
        schema = self.resolve(schema)
        if not isinstance(schema, dict) or depth > 20:
            return []
        out = [schema]
        for key in ("allOf",):
            for sub in schema.get(key, []) or []:
                out.extend(self.parts(sub, inst, depth + 1))
        for key in ("anyOf", "oneOf"):
            for sub in schema.get(key, []) or []:
                if self.valid(sub, inst):
                    out.extend(self.parts(sub, inst, depth + 1))
                    break
        return out

    def order(self, schema: Any, inst: Any) -> Any:
        if isinstance(inst, dict):
            parts = self.parts(schema, inst)
            # mirror the converter: siblings before allOf items, $ref target before siblings
            keys: list[str] = []
            subs: dict[str, list[Any]] = {}
            for p in parts:
                for k, v in (p.get("properties") or {}).items():
                    if k not in keys:
                        keys.append(k)
                    subs.setdefault(k, []).append(v)
            for p in parts:
                for k in p.get("required") or []:
                    if isinstance(k, str) and k not in keys:
                        keys.append(k)
            out: dict[str, Any] = {}
            for k in keys:
                if k in inst:
                    out[k] = self.order({"allOf": subs.get(k, [])}, inst[k]) if subs.get(k) else inst[k]
            for k, v in inst.items():
                if k not in out:
                    extra = [p.get("additionalProperties") for p in parts if isinstance(p.get("additionalProperties"), dict)]
                    out[k] = self.order({"allOf": extra}, v) if extra else v
            return out
        if isinstance(inst, list):
            parts = self.parts(schema, inst)
            prefix: list[Any] = []
            items: list[Any] = []
            for p in parts:
                if isinstance(p.get("prefixItems"), list):
                    prefix = p["prefixItems"]
                if isinstance(p.get("items"), dict):
                    items.append(p["items"])
            return [self.order(prefix[i] if i < len(prefix) else {"allOf": items}, v) for i, v in enumerate(inst)]
        return inst


# ----------------------------------------------------------------------------- walking


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
TIMED_TOKENS = 64  # per schema: the first accepted instance's first 64 tokens are timed


def _init_worker(
    tokenizer: str,
    timeout_s: float,
    max_states: int,
    samples: int,
    precompute_states: int = 0,
    precompute_budget_s: float | None = None,
    pause_gc: bool = True,
) -> None:
    import jsonschema  # noqa: F401 - its format checkers take seconds to import; not per schema

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
            ),
        ),
        samples=samples,
        timeout_s=timeout_s,
    )


class _HardTimeout(Exception):
    pass


def _alarm(_sig: int, _frame: Any) -> None:
    raise _HardTimeout()


def run_item(item: Item) -> ItemResult:
    """Compile and check one schema (in a worker initialised by ``_init_worker``)."""
    compiler: GrammarCompiler = _STATE["compiler"]
    res = ItemResult(item.suite, item.name, "error")
    options = SchemaOptions(allow_undeclared_properties=True)
    hard = int(_STATE["timeout_s"] * 3) + 5
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(hard)
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


def exact_validator(schema: Any) -> Any:
    """A ``jsonschema`` validator (format checking on) whose ``multipleOf`` uses exact decimal
    arithmetic, as the JSON Schema spec defines it; stock ``jsonschema`` divides floats and
    rejects e.g. 0.073 as a multiple of 0.0001 (0.073 / 0.0001 = 729.9999999999999)."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)

    def multiple_of(validator: Any, m: Any, instance: Any, _schema: Any) -> Any:
        if not validator.is_type(instance, "number") or isinstance(m, bool) or not isinstance(m, (int, float)) or m <= 0:
            return
        try:
            q = Decimal(repr(instance) if isinstance(instance, float) else instance) / Decimal(repr(m) if isinstance(m, float) else m)
        except (ArithmeticError, ValueError):
            return
        if q != q.to_integral_value():
            yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {m!r}")

    exact = jsonschema.validators.extend(cls, {"multipleOf": multiple_of})
    return exact(schema, format_checker=cls.FORMAT_CHECKER)


def check(item: Item, fsm: TokenFSM, options: SchemaOptions, res: ItemResult) -> None:

    vocab = fsm.vocab
    orderer = KeyOrderer(item.schema)
    passing = True
    timed = False
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
        if valid:
            res.valid_total += 1
            res.valid_accepted += accepted
            passing &= accepted
        else:
            res.invalid_total += 1
            res.invalid_accepted += accepted
            passing &= not accepted
            if accepted and len(res.violation_examples) < 3:
                res.violation_examples.append(f"invalid accepted: {texts[0][:200] if texts else data!r}")
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


def _pct(xs: list[float] | np.ndarray, q: float) -> float:
    return percentile(list(xs), q / 100, interpolate=True)


def summarize(results: list[ItemResult]) -> dict[str, Any]:
    total = len(results)
    compiled = [r for r in results if r.outcome == "compiled"]
    unsupported = Counter(r.detail for r in results if r.outcome == "unsupported")
    errors = Counter(
        r.detail.split(":")[0] if r.detail.startswith(("crash", "schema-error")) else r.detail for r in results if r.outcome == "error"
    )
    first = [r.first_mask_ms for r in compiled]
    hits = [r.cache_hit_ms for r in compiled]
    cold = np.array([x for r in compiled for x in r.token_ns_cold], dtype=np.float64) / 1000
    warm = np.array([x for r in compiled for x in r.token_ns_warm], dtype=np.float64) / 1000
    return {
        "schemas": total,
        "compiled": len(compiled),
        "compiled_pct": 100 * len(compiled) / total if total else 0.0,
        "passing": sum(r.passing for r in compiled),
        "passing_pct": 100 * sum(r.passing for r in compiled) / total if total else 0.0,
        "unsupported": sum(unsupported.values()),
        "unsupported_by_keyword": dict(unsupported.most_common()),
        "errors": sum(errors.values()),
        "errors_by_kind": dict(errors.most_common()),
        "valid_instances": sum(r.valid_total for r in compiled),
        "valid_accepted": sum(r.valid_accepted for r in compiled),
        "invalid_instances": sum(r.invalid_total for r in compiled),
        "soundness_violations_instances": sum(r.invalid_accepted for r in compiled),
        "samples": sum(r.sample_total for r in compiled),
        "soundness_violations_samples": sum(r.sample_violations for r in compiled),
        "first_mask_ms": {q: _pct(first, p) for q, p in (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))},
        "cache_hit_ms": {q: _pct(hits, p) for q, p in (("p50", 50), ("p99", 99), ("max", 100))},
        "states": {"p50": _pct([r.states for r in compiled], 50), "max": max((r.states for r in compiled), default=0)},
        "states_after": {
            "p50": _pct([r.states_after for r in compiled], 50),
            "max": max((r.states_after for r in compiled), default=0),
        },
        "mask_rows": {"p50": _pct([r.rows for r in compiled], 50), "max": max((r.rows for r in compiled), default=0)},
        "rows_complete": sum(r.rows_complete for r in compiled),
        "token_us_cold": {
            "p50": _pct(cold, 50),
            "p99": _pct(cold, 99),
            "mean": float(cold.mean()) if cold.size else float("nan"),
            "n": int(cold.size),
        },
        "token_us_warm": {
            "p50": _pct(warm, 50),
            "p99": _pct(warm, 99),
            "mean": float(warm.mean()) if warm.size else float("nan"),
            "n": int(warm.size),
        },
        "violation_examples": [(r.name, e) for r in compiled for e in r.violation_examples][:20],
    }


def render_markdown(meta: dict[str, Any], suites: dict[str, dict[str, Any]]) -> str:
    lines = [
        f"# Conformance: {meta['tokenizer_name']}",
        "",
        f"- command: `{meta['command']}`",
        f"- machine: {meta['machine']}",
        f"- commit: {meta['commit']}, date: {meta['date']}",
        f"- limits: timeout_s={meta['timeout_s']}, max_states={meta['max_states']}, "
        f"precompute_states={meta.get('precompute_states', 0)}, precompute_budget_s={meta.get('precompute_budget_s')}, "
        f"pause_gc={meta.get('pause_gc', False)}; "
        f"{meta['samples']} random samples per compiled schema",
        "",
        "| suite | schemas | compiled | passing | unsupported | errors | unsound (instances) | unsound (samples) "
        "| first mask p50 / p90 / p99 / max (ms) | cache hit p50 (ms) | token µs cold p50 / mean | token µs warm p50 / p99 / mean |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in suites.items():
        fm, ch, tc, tw = s["first_mask_ms"], s["cache_hit_ms"], s["token_us_cold"], s["token_us_warm"]
        lines.append(
            f"| {name} | {s['schemas']} | {s['compiled_pct']:.1f}% | **{s['passing_pct']:.1f}%** ({s['passing']}) "
            f"| {s['unsupported']} | {s['errors']} | "
            f"{s['soundness_violations_instances']} / {s['invalid_instances']} | {s['soundness_violations_samples']} / {s['samples']} | "
            f"{fm['p50']:.1f} / {fm['p90']:.1f} / {fm['p99']:.1f} / {fm['max']:.1f} | {ch['p50']:.3f} | "
            f"{tc['p50']:.2f} / {tc['mean']:.1f} | "
            f"{tw['p50']:.2f} / {tw['p99']:.2f} / {tw['mean']:.2f} |"
        )
    for name, s in suites.items():
        lines += [
            "",
            f"## {name}",
            "",
            f"- unsupported by keyword: {s['unsupported_by_keyword']}",
            f"- errors by kind: {s['errors_by_kind']}",
            f"- automaton states built by the first mask p50 {s['states']['p50']:.0f}, max {s['states']['max']}; "
            f"after the walks p50 {s['states_after']['p50']:.0f}, max {s['states_after']['max']}; "
            f"mask rows per schema p50 {s['mask_rows']['p50']:.0f}, max {s['mask_rows']['max']}; "
            f"every reachable row computed by the compile in {s.get('rows_complete', 0)} of {s['compiled']} compiled schemas",
            f"- valid instances accepted: {s['valid_accepted']} / {s['valid_instances']}",
        ]
        if s["violation_examples"]:
            lines.append("- soundness violation examples:")
            lines += [f"  - `{n}`: {e}" for n, e in s["violation_examples"][:10]]
    lines += [
        "",
        "Definitions: *passing* = compiled, every valid instance accepted and every invalid one rejected (instances serialized in "
        "our layout, keys in schema order, else instance order). *unsound (samples)* = random strings of the automaton that do not "
        "validate. *first mask* = cold compile + the initial state's mask row. *token µs* = `mask_row` + `advance` per token over "
        f"the first {TIMED_TOKENS} tokens of each schema's first accepted instance; cold = first walk (mask rows computed on first "
        "visit), warm = the same walk again. Acceptance of every instance is checked with `advance` alone (a token is allowed "
        "exactly when its mask bit is set; the timed walks assert it).",
    ]
    return "\n".join(lines) + "\n"


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
    command: str = "",
    progress: bool = True,
) -> dict[str, Any]:
    """Run the suites and write ``conformance-<tokenizer>.{json,md}`` under ``out_dir``.
    ``precompute_states``: :class:`~structgen.fsm.compiler.CompilerConfig`'s (rows computed
    in the compile, so within the first-mask time; 0 = lazy rows, computed on the first
    walk); ``precompute_budget_s``: its time limit per compile (s, None: ``timeout_s``);
    ``pause_gc``: its garbage-collector pause during compiles.
    Raises ``ValueError`` for bad limits (before any worker starts) and
    ``FileNotFoundError`` when no suite folder holds schemas."""
    CompilerConfig(
        timeout_s=timeout_s,
        max_states=max_states,
        precompute_states=precompute_states,
        precompute_budget_s=precompute_budget_s,
        pause_gc=pause_gc,
    )  # validates the limits
    if workers < 1 or samples < 0:
        raise ValueError(f"workers must be >= 1 and samples >= 0, got workers={workers}, samples={samples}")
    items: list[Item] = []
    if "test-suite" in suites and test_suite_root:
        items += list(load_test_suite(test_suite_root))
    if "maskbench" in suites and maskbench_root:
        items += list(load_maskbench(maskbench_root, maskbench_limit))
    if not items:
        raise FileNotFoundError("no schemas found: pass --test-suite / --maskbench folders that exist")
    ctx = mp.get_context("fork")
    results: list[ItemResult] = []
    from tqdm import tqdm

    with ctx.Pool(
        workers,
        initializer=_init_worker,
        initargs=(tokenizer, timeout_s, max_states, samples, precompute_states, precompute_budget_s, pause_gc),
        maxtasksperchild=500,
    ) as pool:
        for r in tqdm(pool.imap_unordered(run_item, items, chunksize=4), total=len(items), disable=not progress, desc="schemas"):
            results.append(r)
    by_suite: dict[str, list[ItemResult]] = {}
    for r in results:
        by_suite.setdefault(r.suite, []).append(r)
    summaries = {name: summarize(rs) for name, rs in sorted(by_suite.items())}
    tok_name = os.path.basename(os.path.normpath(tokenizer))
    meta = {
        "tokenizer": tokenizer,
        "tokenizer_name": tok_name,
        "command": command,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}",
        "commit": git_commit(),
        "date": time.strftime("%Y-%m-%d"),
        "timeout_s": timeout_s,
        "max_states": max_states,
        "precompute_states": precompute_states,
        "precompute_budget_s": precompute_budget_s,
        "pause_gc": pause_gc,
        "samples": samples,
        "maskbench_limit": maskbench_limit,
    }
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
