"""The training tool and the CPU benchmark scripts reject bad arguments with a clear message
(exit status 2, argparse's usage error) before doing any work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEMO = str(ROOT / "structgen" / "assets" / "demo-extractor")

CASES = [
    (["tools/train_demo_model.py", "train", "--tokenizer", "/no/such/folder", "--out", "x"], "is not a folder"),
    (["tools/train_demo_model.py", "train", "--tokenizer", DEMO, "--out", "x", "--steps", "0"], "--steps must be ≥ 1"),
    (["tools/train_demo_model.py", "train", "--tokenizer", DEMO, "--out", "x", "--examples", "0"], "--examples must be ≥ 1"),
    (["tools/train_demo_model.py", "tokenizer", "--out", "x", "--vocab-size", "100"], "--vocab-size must be ≥ 258"),
    (["tools/train_demo_model.py", "train", "--tokenizer", DEMO, "--out", "x", "--examples", "100"], "must be ≥ --batch-size (256)"),
    (["benchmarks/retime_failures.py", "--tokenizer", "x", "--report", "/no/such/report.json"], "does not exist"),
    (["benchmarks/mask_rows_cpu.py", "--tokenizer", "x", "--num-requests", "0"], "--num-requests must be ≥ 1"),
    (["benchmarks/demo_model.py", "--n", "0"], "--n must be ≥ 1"),
    (["benchmarks/demo_model.py", "--misses"], "--misses needs --field-em-only or --independent-only"),
    (
        ["benchmarks/conformance_ab.py", "--old", "/no/such.json", "--new", "pyproject.toml"],
        "/no/such.json: not a structgen bench conformance JSON report",
    ),
    (
        ["benchmarks/conformance_ab.py", "--old", "README.md", "--new", "README.md"],
        "README.md: not a structgen bench conformance JSON report",
    ),
    (["benchmarks/decode_roofline.py", "--extend-graph-tokens", "-1"], "--extend-graph-tokens must be ≥ 0"),
    (["benchmarks/decode_roofline.py", "--gemv", "qkvx=fma:16:512:4:3"], "unknown projection 'qkvx'"),
    (["benchmarks/engine_decode_mbu.py", "--gemv", "qkv=fma:16:x:4:3"], "is not NAME=kind:block_n"),
    (["benchmarks/engine_decode_mbu.py", "--gemv", "o=mma:16:512:4:3"], "is not NAME=kind:block_n"),
    (["benchmarks/peer_profile.py", "--model", "x", "--concurrency", "64", "0", "--out", "x"], "every --concurrency must be ≥ 1"),
    (["benchmarks/peer_profile.py", "--model", "x", "--level-offset", "-1", "--out", "x"], "--level-offset ≥ 0"),
    (
        ["benchmarks/vllm_offline.py", "--model", "x", "--requests", "x", "--concurrency", "0", "--out", "x"],
        "every --concurrency must be ≥ 1",
    ),
]


@pytest.mark.parametrize(("argv", "message"), CASES, ids=[" ".join(a[:2]) + f" #{i}" for i, (a, _m) in enumerate(CASES)])
def test_bad_arguments_are_rejected(argv: list[str], message: str) -> None:
    proc = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr, proc.stderr
    assert not (ROOT / "x").exists()  # nothing was written


def test_length_grouped_batches_refuse_fewer_rows_than_a_batch() -> None:
    import random

    import numpy as np
    from train_demo_model import length_grouped_batches

    rows = [(np.zeros(n, dtype=np.int16), 1) for n in range(1, 11)]
    batch = next(length_grouped_batches(rows, 4, random.Random(0), group=2))
    assert len(batch) == 4 and [len(r[0]) for r in batch] == sorted(len(r[0]) for r in batch)
    with pytest.raises(ValueError, match="fewer than one batch of 11"):
        next(length_grouped_batches(rows, 11, random.Random(0)))
