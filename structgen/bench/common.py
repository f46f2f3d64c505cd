"""Helpers every benchmark shares: run metadata (command, machine, commit, date) and the
nearest-rank percentile."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def percentile(values: Sequence[float], q: float, *, interpolate: bool = False) -> float:
    """The ``q``-quantile (``q`` in [0, 1]) of ``values``: nearest rank, or with ``interpolate``
    linear between the two nearest ranks (numpy's default); NaN when empty."""
    if len(values) == 0:
        return float("nan")
    v = sorted(values)
    pos = q * (len(v) - 1)
    if not interpolate:
        return v[min(len(v) - 1, max(0, round(pos)))]
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return float(v[lo] + (v[hi] - v[lo]) * (pos - lo))


def git_commit(cwd: str | os.PathLike[str] | None = None) -> str:
    """The short commit hash of the checkout at ``cwd`` (default: this package's);
    ``$STRUCTGEN_COMMIT`` when set (copies of the tree without ``.git``); "?" outside git."""
    if os.environ.get("STRUCTGEN_COMMIT"):
        return os.environ["STRUCTGEN_COMMIT"]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=cwd or Path(__file__).parent, check=False
        )
    except OSError:
        return "?"
    return out.stdout.strip() or "?"


def machine() -> str:
    """``x86_64, 2 cores, CPython 3.11.7`` (plus the CUDA device's name when torch sees one)."""
    desc = f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}"
    try:
        import torch

        if torch.cuda.is_available():
            desc += f", {torch.cuda.get_device_name()}"
    except ImportError:
        pass
    return desc


def run_meta(command: str | None = None) -> dict[str, Any]:
    """``{command, machine, commit, date, torch}`` of this run (``command``: default ``python``
    and the process's own argv)."""
    try:
        import torch

        torch_version = str(torch.__version__)
    except ImportError:
        torch_version = "none"
    return {
        "command": command or shlex.join(["python", sys.argv[0], *sys.argv[1:]]),
        "machine": machine(),
        "commit": git_commit(),
        "date": time.strftime("%Y-%m-%d"),
        "torch": torch_version,
    }
