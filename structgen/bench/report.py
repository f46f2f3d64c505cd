"""What a ``structgen bench json`` run reports: one :class:`Record` per request, the metrics of
a run (:func:`summarize`), ``results.md`` and the plots (:func:`write_reports`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from structgen.bench.common import percentile
from structgen.fsm import Constraint
from structgen.fsm.constraint import OutputValidationError


class Record(NamedTuple):
    """One finished request: token counts, seconds from submission, validity (None: rejected);
    ``grammar_s``: seconds from submission until its grammar was ready (0: none or a baseline)."""

    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    forced_tokens: int
    forwards: int
    ttft_s: float
    latency_s: float
    finish_reason: str
    valid: bool
    grammar_s: float = 0.0


def valid_output(constraint: Constraint, text: str) -> bool:
    """Whether ``text`` satisfies ``constraint`` (regex fullmatch, or JSON + jsonschema)."""
    try:
        constraint.validate(text)
    except (OutputValidationError, ValueError):
        return False
    return True


def summarize(records: Sequence[Record], wall_s: float, peak_mem_bytes: int = 0) -> dict[str, float]:
    """Throughput and latency metrics of one run (times in ms).  ``validity`` counts every
    request: rejected ones are invalid, the others are valid when their text validates, whether
    they stopped or reached ``max_tokens`` (budget completion ends many of those valid);
    ``length_share``: served requests that reached ``max_tokens``; ``stopped_invalid``: requests
    that ended on their own with an invalid output (0 under a grammar)."""
    done = [r for r in records if r.finish_reason != "error"]
    tokens = sum(r.completion_tokens for r in done)
    prompt = sum(r.prompt_tokens for r in done)
    tpot = [(r.latency_s - r.ttft_s) / (r.completion_tokens - 1) * 1e3 for r in done if r.completion_tokens > 1]
    n = max(1, len(done))
    return {
        "requests": len(records),
        "req_per_s": len(done) / wall_s if wall_s > 0 else 0.0,
        "out_tok_per_s": tokens / wall_s if wall_s > 0 else 0.0,
        "ttft_p50_ms": percentile([r.ttft_s * 1e3 for r in done], 0.5),
        "ttft_p99_ms": percentile([r.ttft_s * 1e3 for r in done], 0.99),
        "grammar_p50_ms": percentile([r.grammar_s * 1e3 for r in done], 0.5),
        "grammar_p99_ms": percentile([r.grammar_s * 1e3 for r in done], 0.99),
        "tpot_p50_ms": percentile(tpot, 0.5),
        "tpot_p99_ms": percentile(tpot, 0.99),
        "forwards_per_req": sum(r.forwards for r in done) / n,
        "forced_share": sum(r.forced_tokens for r in done) / tokens if tokens else 0.0,
        "cache_hit_rate": sum(r.cached_tokens for r in done) / prompt if prompt else 0.0,
        "validity": sum(1 for r in records if r.valid) / len(records) if records else 0.0,
        "length_share": sum(1 for r in done if r.finish_reason == "length") / n if done else 0.0,
        "stopped_invalid": sum(1 for r in done if r.finish_reason == "stop" and not r.valid),
        "peak_gpu_mem_mb": peak_mem_bytes / 2**20,
        "wall_s": wall_s,
    }


COLUMNS = [
    ("workload", "workload"), ("mode", "mode"), ("concurrency", "conc"), ("requests", "requests"), ("req_per_s", "req/s"),
    ("out_tok_per_s", "out tok/s"), ("ttft_p50_ms", "TTFT p50 ms"), ("ttft_p99_ms", "TTFT p99 ms"),
    ("grammar_p50_ms", "grammar wait p50 ms"), ("grammar_p99_ms", "grammar wait p99 ms"), ("compile_mean_ms", "compile mean ms"),
    ("tpot_p50_ms", "TPOT p50 ms"),
    ("tpot_p99_ms", "TPOT p99 ms"), ("forwards_per_req", "forwards/req"), ("forced_share", "forced share"),
    ("cache_hit_rate", "cache hit"), ("validity", "valid"), ("length_share", "hit max_tokens"),
    ("stopped_invalid", "stopped invalid"), ("peak_gpu_mem_mb", "peak GPU MB"), ("compile_s", "untimed compile s"),
]  # fmt: skip


def markdown(rows: list[dict[str, Any]], metas: Sequence[dict[str, Any]]) -> str:
    """The results table, after one bullet list per part (``--append`` runs add parts)."""
    lines = ["# JSON-decoding benchmark", ""]
    for i, meta in enumerate(metas):
        if len(metas) > 1:
            lines.append(f"Part {i + 1}:")
        lines += [f"- {k}: `{v}`" if k == "command" else f"- {k}: {v}" for k, v in meta.items() if k != "skipped"]
        lines += [f"- skipped {x}" for x in meta.get("skipped", [])]
        lines.append("")
    lines += ["| " + " | ".join(h for _k, h in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        cells = [f"{r[k]:.3g}" if isinstance(r.get(k), float) else str(r.get(k, "–")) for k, _h in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], tpots: dict[str, list[float]], out: Path) -> list[Path]:
    """throughput.png (req/s vs concurrency, a line per mode, a panel per workload),
    tpot.png (TPOT distribution per mode), forced_share.png (per workload, default mode)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    workloads = sorted({r["workload"] for r in rows})
    fig, axes = plt.subplots(1, len(workloads), figsize=(4.5 * len(workloads), 3.6), squeeze=False)
    for ax, w in zip(axes[0], workloads):
        for mode in sorted({r["mode"] for r in rows if r["workload"] == w}):
            pts = sorted((r["concurrency"], r["req_per_s"]) for r in rows if r["workload"] == w and r["mode"] == mode)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=mode)
        ax.set_xscale("log", base=2)
        ax.set_title(w)
        ax.set_xlabel("concurrency")
        ax.set_ylabel("requests/s")
        ax.legend(fontsize=7)
    paths.append(_save(fig, out / "throughput.png"))

    fig, ax = plt.subplots(figsize=(6, 3.6))
    modes = sorted(m for m in tpots if tpots[m])
    ax.boxplot([tpots[m] for m in modes], showfliers=False)
    ax.set_xticks(range(1, len(modes) + 1), modes, rotation=20, fontsize=8)
    ax.set_ylabel("TPOT (ms)")
    ax.set_title("TPOT per request, all workloads and concurrencies")
    paths.append(_save(fig, out / "tpot.png"))

    fig, ax = plt.subplots(figsize=(5, 3.2))
    shares = {w: max((r["forced_share"] for r in rows if r["workload"] == w and r["mode"] == "default"), default=0.0) for w in workloads}
    ax.bar(list(shares), [100 * v for v in shares.values()])
    ax.set_ylabel("forced tokens (%)")
    ax.set_title("jump-forward: forced-token share (default mode)")
    paths.append(_save(fig, out / "forced_share.png"))
    return paths


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_reports(out: Path) -> None:
    """``results.md`` and the plots from every part of ``out/results.jsonl``."""
    metas: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for line in (out / "results.jsonl").read_text().splitlines():
        item = json.loads(line)
        if "meta" in item:
            if set(item["meta"]) == {"skipped"} and metas:
                metas[-1]["skipped"] = item["meta"]["skipped"]
            else:
                metas.append(item["meta"])
        else:
            rows.append(item)
    (out / "results.md").write_text(markdown(rows, metas) + "\n")
    tpots: dict[str, list[float]] = {}
    for r in rows:
        tpots.setdefault(r["mode"], []).extend(r.get("tpots_ms", []))
    if rows:
        plot(rows, tpots, out)
