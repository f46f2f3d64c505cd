"""The report of a conformance run: per-suite counts and percentiles (:func:`summarize`) and
its markdown table (:func:`render_markdown`)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from structgen.bench.common import percentile
from structgen.bench.conformance_items import ItemResult

TIMED_TOKENS = 64  # per schema: the first accepted instance's first 64 tokens are timed


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
        "unsound_schemas": sum(1 for r in compiled if r.invalid_accepted or r.sample_violations),
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


def _anchor_table(meta: dict[str, Any], suites: dict[str, dict[str, Any]]) -> list[str]:
    """structgen beside the anchors on the same schemas and instances."""
    versions = ", ".join(f"{k} {v}" for k, v in meta.get("anchors", {}).items())
    lines = [
        "",
        f"Same schemas, same instances, same tokenizer, same worker processes, each engine a task of its own ({versions}):",
        "",
        "| suite | engine | passing | compiled | unsupported | errors | unsound instances (schemas) | valid accepted "
        "| first mask p50 / p90 / p99 (ms) | token µs p50 / mean |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in suites.items():
        fm, tc = s["first_mask_ms"], s["token_us_cold"]
        unsound_schemas = s.get("unsound_schemas", 0)
        lines.append(
            f"| {name} | structgen | **{s['passing_pct']:.1f}%** ({s['passing']}) | {s['compiled']} | {s['unsupported']} | {s['errors']} "
            f"| {s['soundness_violations_instances']} ({unsound_schemas}) | {s['valid_accepted']} / {s['valid_instances']} "
            f"| {fm['p50']:.1f} / {fm['p90']:.1f} / {fm['p99']:.1f} | {tc['p50']:.2f} / {tc['mean']:.1f} |"
        )
        for anchor, a in s.get("anchors", {}).items():
            afm, at = a["first_mask_ms"], a["token_us"]
            lines.append(
                f"| {name} | {anchor} | {a['passing_pct']:.1f}% ({a['passing']}) | {a['compiled']} | {a['unsupported']} | {a['errors']} "
                f"| {a['soundness_violations_instances']} ({a['unsound_schemas']}) | {a['valid_accepted']} / {a['valid_instances']} "
                f"| {afm['p50']:.1f} / {afm['p90']:.1f} / {afm['p99']:.1f} | {at['p50']:.2f} / {at['mean']:.1f} |"
            )
    lines += _both_table(suites)
    lines += [
        "",
        "Anchors: llguidance with its JSON Schema defaults, xgrammar with `strict_mode=False` (JSON Schema's semantics for "
        'undeclared properties), both in our layout (`", "` / `": "`, no other whitespace); a schema an anchor refuses is '
        "*unsupported*; its token time = consume one token + compute the next bitmask. structgen's token µs is the cold walk.",
    ]
    return lines


def _both_table(suites: dict[str, dict[str, Any]]) -> list[str]:
    """The timings again over only the schemas both engines compiled (an engine that refuses the
    hard schemas leaves them out of its percentiles)."""
    lines = [
        "",
        "The same timings over only the schemas both engines compiled:",
        "",
        "| suite | engines | schemas | first mask p50 / p90 / p99 (ms) | token µs p50 / mean |",
        "|---|---|---|---|---|",
    ]
    for name, s in suites.items():
        for anchor, a in s.get("anchors", {}).items():
            both = a.get("both")
            if not both:
                continue
            for engine in ("structgen", anchor):
                fm, tk = both[engine]["first_mask_ms"], both[engine]["token_us"]
                lines.append(
                    f"| {name} | {engine} (with {anchor}) | {both['schemas']} | {fm['p50']:.1f} / {fm['p90']:.1f} / {fm['p99']:.1f} "
                    f"| {tk['p50']:.2f} / {tk['mean']:.1f} |"
                )
    return lines


def render_markdown(meta: dict[str, Any], suites: dict[str, dict[str, Any]]) -> str:
    lines = [
        f"# Conformance: {meta['tokenizer_name']}",
        "",
        f"- command: `{meta['command']}`",
        f"- machine: {meta['machine']}",
        f"- commit: {meta['commit']}, date: {meta['date']}",
        f"- limits: timeout_s={meta['timeout_s']}, max_states={meta['max_states']}, "
        f"precompute_states={meta.get('precompute_states', 0)}, precompute_budget_s={meta.get('precompute_budget_s')}, "
        f"pause_gc={meta.get('pause_gc', False)}, product_cache_mb={meta.get('product_cache_mb', 0)}; "
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
    if any(s.get("anchors") for s in suites.values()):
        lines += _anchor_table(meta, suites)
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
