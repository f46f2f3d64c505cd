"""``structgen bench json``: metric computations on synthetic timings, and a tiny CPU run end to end."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from structgen.bench_json import MODES, Record, build_workload, mode_config, percentile, summarize
from structgen.engine import EngineConfig


def _rec(ttft: float, latency: float, tokens: int, *, forced: int = 0, prompt: int = 10, cached: int = 0, valid: bool = True) -> Record:
    return Record(prompt, cached, tokens, forced, tokens - forced, ttft, latency, "stop" if valid else "length", valid)


def test_percentile_nearest_rank() -> None:
    assert percentile([], 0.5) != percentile([], 0.5)  # NaN
    assert percentile([5.0], 0.99) == 5.0
    values = [float(i) for i in range(1, 101)]  # 1..100
    assert percentile(values, 0.5) == 51.0  # index round(0.5 * 99) = 50 (banker's rounding of 49.5)
    assert percentile(values, 0.99) == 99.0
    assert percentile(values, 0.0) == 1.0 and percentile(values, 1.0) == 100.0


def test_summarize_on_synthetic_timings() -> None:
    records = [
        _rec(0.100, 1.100, 11, forced=5, prompt=100, cached=50),  # TPOT (1.1 - 0.1) / 10 = 100 ms
        _rec(0.200, 0.600, 5, forced=1, prompt=100, cached=0),  # TPOT 0.4 / 4 = 100 ms
        _rec(0.300, 0.300, 1, prompt=100, valid=False),  # one token: no TPOT
        Record(0, 0, 0, 0, 0, 0.0, 0.0, "error", False),  # rejected: counted, not timed
    ]
    s = summarize(records, wall_s=2.0, peak_mem_bytes=3 * 2**20)
    assert s["requests"] == 4
    assert s["req_per_s"] == pytest.approx(1.5)  # 3 served in 2 s
    assert s["out_tok_per_s"] == pytest.approx(17 / 2)
    assert s["tpot_p50_ms"] == pytest.approx(100.0) and s["tpot_p99_ms"] == pytest.approx(100.0)
    assert s["ttft_p50_ms"] == pytest.approx(200.0) and s["ttft_p99_ms"] == pytest.approx(300.0)
    assert s["forced_share"] == pytest.approx(6 / 17)
    assert s["cache_hit_rate"] == pytest.approx(50 / 300)
    assert s["validity"] == pytest.approx(2 / 4)
    assert s["forwards_per_req"] == pytest.approx((6 + 4 + 1) / 3)
    assert s["peak_gpu_mem_mb"] == pytest.approx(3.0)
    assert s["length_share"] == pytest.approx(1 / 3)  # the one-token request ended on max_tokens
    assert s["stopped_invalid"] == 0
    empty = summarize([], wall_s=1.0)
    assert empty["req_per_s"] == 0.0 and math.isnan(empty["ttft_p50_ms"])


def test_modes_and_workloads_are_validated() -> None:
    base = EngineConfig()
    assert mode_config(base, "no-jump-forward")[0].scheduler.jump_forward is False
    assert mode_config(base, "no-radix")[0].scheduler.radix_cache is False
    assert mode_config(base, "unconstrained")[1] is False
    assert mode_config(base, "no-cuda-graph")[0].cuda_graph is False
    assert set(MODES) >= {"default", "unconstrained"}
    with pytest.raises(ValueError, match="unknown mode"):
        mode_config(base, "fast")
    with pytest.raises(ValueError, match="unknown workload"):
        build_workload("poems", 2, 0)
    chars = build_workload("character", 3, 0)
    assert len(chars) == 3 and "Harry Potter" in chars[0].prompt and chars[0].constraint.kind == "regex"
    shared = build_workload("shared-prefix", 3, 0)
    common = os.path.commonprefix([r.prompt for r in shared])  # noqa: RUF071 (a character prefix is meant)
    assert len(common) > 1500 and common.count("\nJSON: ") == 4  # the 4 worked examples


def test_cli_tiny_cpu_run_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from structgen.cli import main

    out = tmp_path / "bench"
    argv = ["bench", "json", "--workload", "character,extraction", "--modes", "default,no-jump-forward,unconstrained"]
    argv += ["--num-requests", "3", "--concurrency", "1", "3", "--device", "cpu", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    lines = (out / "results.jsonl").read_text().splitlines()
    meta = json.loads(lines[0])["meta"]
    assert {"command", "machine", "commit", "model", "date"} <= set(meta)
    rows = [json.loads(x) for x in lines[1:]]
    assert len(rows) == 2 * 3 * 2  # workloads × modes × concurrency levels
    for r in rows:
        assert r["requests"] == 3 and r["req_per_s"] > 0
        if r["mode"] != "unconstrained":
            assert r["validity"] == 1.0  # constrained outputs are valid (the demo model finishes within max_tokens)
    jf = {(r["workload"], r["mode"]): r for r in rows if r["concurrency"] == 1}
    assert jf[("character", "default")]["forced_share"] > 0.5
    assert jf[("character", "no-jump-forward")]["forced_share"] == 0.0
    assert jf[("character", "default")]["forwards_per_req"] < jf[("character", "no-jump-forward")]["forwards_per_req"]
    md = (out / "results.md").read_text()
    assert md.count("\n| character |") == 6 and "TPOT p99 ms" in md
    for png in ("throughput.png", "tpot.png", "forced_share.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "results.jsonl" in capsys.readouterr().out
    assert main(["bench", "json", "--workload", "nope", "--out", str(out)]) == 2
    assert "unknown workload 'nope'" in capsys.readouterr().err
    assert main(["bench", "json", "--concurrency", "0", "--out", str(out)]) == 2
    assert "concurrency levels must be ≥ 1" in capsys.readouterr().err
    assert main(["bench", "json", "--num-requests", "0", "--out", str(out)]) == 2
    assert "num_requests must be ≥ 1" in capsys.readouterr().err
    assert main(["bench", "json", "--config", "llama3-8b", "--out", str(out)]) == 2
    assert "--random-weights" in capsys.readouterr().err
