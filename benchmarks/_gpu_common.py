"""Helpers shared by the H200 benchmarks: run metadata, copy bandwidth, result writers."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from structgen.bench.common import run_meta  # noqa: F401 (re-exported for the scripts)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def copy_bandwidth(device: torch.device, nbytes: int = 4 << 30, iters: int = 20) -> float:
    """Device-to-device copy bandwidth in bytes/s, counting read + write (``2 × nbytes`` per
    copy), median of ``iters`` copies timed with CUDA events."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    del src, dst
    torch.cuda.empty_cache()
    times.sort()
    return 2 * nbytes / times[len(times) // 2]


def decode_bytes_read(runner: Any, batch: int, kv_tokens: int) -> int:
    """HBM bytes one decode step of ``batch`` requests reads, each over ``kv_tokens`` tokens of
    KV: every parameter except the embedding table, ``batch`` embedding rows, and the KV
    (``runner``: a :class:`~structgen.engine.model_runner.ModelRunner`)."""
    from structgen.runtime.memory import kv_bytes_per_token

    model = runner.model
    m = model.args
    elt = model.lm_head.weight.element_size()
    weights = sum(p.numel() * p.element_size() for p in model.parameters()) - model.model.embed_tokens.weight.numel() * elt
    per_token_kv = kv_bytes_per_token(m.num_layers, m.num_kv_heads, m.head_dim, runner.dtype)
    return int(weights + batch * m.hidden_size * elt + batch * kv_tokens * per_token_kv)


def write_results(
    out_dir: str, stem: str, title: str, meta: dict[str, Any], header: list[str], rows: list[list[Any]], notes: list[str]
) -> None:
    """``<stem>.json`` (meta + rows) and ``<stem>.md`` (a table) under ``out_dir``."""
    os.makedirs(out_dir, exist_ok=True)
    Path(out_dir, f"{stem}.json").write_text(json.dumps({"meta": meta, "header": header, "rows": rows, "notes": notes}, indent=1))
    md = [f"# {title}", "", *(f"- {k}: `{v}`" if k == "command" else f"- {k}: {v}" for k, v in meta.items()), ""]
    md += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(f"{c:.4g}" if isinstance(c, float) else str(c) for c in row) + " |" for row in rows]
    md += ["", *notes]
    Path(out_dir, f"{stem}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md), flush=True)


def apply_gemv_overrides(spec: str, config: str) -> list[str]:
    """Benchmark knob: replace entries of ``linear_triton.TUNED`` (the Triton-vs-cuBLAS choice per
    projection shape) before a model is built, to A/B projection kernels in one process.

    ``spec``: comma-separated ``NAME=kind:block_n:block_k:warps:stages`` or ``NAME=cublas``, NAME in
    qkv, o, gate_up, down, lm_head (shapes from preset ``config``); the configuration serves
    M = 1 only (the M ≤ 8 choice is kept).  Returns the applied items as text; raises
    ``ValueError`` naming a bad item before anything is applied."""
    from structgen.models import ModelArgs
    from structgen.models.presets import preset_config

    if not spec:
        return []
    a = ModelArgs.from_hf_config(preset_config(config))
    q, kv = a.num_heads * a.head_dim, a.num_kv_heads * a.head_dim
    shapes = {
        "qkv": (q + 2 * kv, a.hidden_size), "o": (a.hidden_size, q), "gate_up": (2 * a.intermediate_size, a.hidden_size),
        "down": (a.hidden_size, a.intermediate_size), "lm_head": (a.vocab_size, a.hidden_size),
    }  # fmt: skip
    parsed: list[tuple[str, str, tuple[str, ...] | None]] = []
    for item in spec.split(","):
        name, _, value = item.partition("=")
        if name not in shapes:
            raise ValueError(f"--gemv: unknown projection {name!r} in {item!r}; known: {', '.join(shapes)}")
        fields = None if value == "cublas" else tuple(value.split(":"))
        if fields is not None and (fields[0] not in ("fma", "dot") or len(fields) != 5 or not all(f.isdigit() for f in fields[1:])):
            raise ValueError(f"--gemv: {item!r} is not NAME=kind:block_n:block_k:warps:stages (kind fma or dot) or NAME=cublas")
        parsed.append((name, value, fields))
    from structgen.kernels import linear_triton as lt  # (needs triton: only once the spec is known good)

    for name, _value, fields in parsed:
        key = shapes[name]
        cfg = None if fields is None else lt.GemvConfig(fields[0], *(int(f) for f in fields[1:]))
        lt.TUNED[key] = (cfg, lt.TUNED.get(key, (None, None))[1])
    return [f"{name} {shapes[name]}: {value}" for name, value, _f in parsed]


def graph_kernel_rows(graph: torch.cuda.CUDAGraph, title: str, top: int = 14) -> list[str]:
    """Per-kernel GPU time of one replay of ``graph`` (torch.profiler), the ``top`` largest, as
    markdown lines under ``title``: kernel name (first 90 characters), calls, µs."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
        graph.replay()
        torch.cuda.synchronize()
    totals: dict[str, list[float]] = {}
    for ev in prof.events():
        if ev.device_type.name == "CUDA":
            t = totals.setdefault(ev.name[:90], [0.0, 0])
            t[0] += ev.device_time_total
            t[1] += 1
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][0])[:top]
    lines = ["", title, "", "| kernel | calls | µs |", "|---|---|---|"]
    return lines + [f"| `{name}` | {int(c)} | {us:.0f} |" for name, (us, c) in ranked]


def graph_replay_ms(graph: torch.cuda.CUDAGraph, replays: int = 10) -> float:
    """GPU milliseconds of one replay of ``graph``: CUDA events around ``replays`` replays in a
    row, mean."""
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ev0.record()
    for _ in range(replays):
        graph.replay()
    ev1.record()
    ev1.synchronize()
    return float(ev0.elapsed_time(ev1)) / replays
