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
    (["benchmarks/retime_failures.py", "--tokenizer", "x", "--report", "/no/such/report.json"], "does not exist"),
    (["benchmarks/mask_rows_cpu.py", "--tokenizer", "x", "--num-requests", "0"], "--num-requests must be ≥ 1"),
    (["benchmarks/demo_model.py", "--n", "0"], "--n must be ≥ 1"),
    (["benchmarks/decode_roofline.py", "--extend-graph-tokens", "-1"], "--extend-graph-tokens must be ≥ 0"),
]


@pytest.mark.parametrize(("argv", "message"), CASES, ids=[" ".join(a[:2]) + f" #{i}" for i, (a, _m) in enumerate(CASES)])
def test_bad_arguments_are_rejected(argv: list[str], message: str) -> None:
    proc = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr, proc.stderr
    assert not (ROOT / "x").exists()  # nothing was written
