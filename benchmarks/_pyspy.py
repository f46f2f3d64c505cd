"""Sampling profiles of running processes with py-spy (``pip install py-spy``): where each
process's CPU time goes during one benchmark level, summarized as the functions with the most
samples on top of the stack (self) and anywhere on it (inclusive)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections import Counter
from typing import NamedTuple

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


class Profile(NamedTuple):
    """One process's samples: total, and (function, share of samples) lists, highest first (the
    inclusive list leaves out frames on more than 90% of stacks: thread and loop scaffolding)."""

    label: str
    samples: int
    top_self: list[tuple[str, float]]
    top_inclusive: list[tuple[str, float]]


def _short(frame: str) -> str:
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    path = m.group("file")
    parts = path.replace("\\", "/").split("/")
    for anchor in ("site-packages", "structgen", "fsm", "schemas", "kernels", "benchmarks", "lib"):
        if anchor in parts[:-1]:
            parts = parts[len(parts) - 1 - parts[::-1].index(anchor) + 1 :]
            break
    return f"{m.group('func')} ({'/'.join(parts[-3:])})"


def summarize(raw: str, label: str, top: int = 12) -> Profile:
    """``raw``: py-spy's ``--format raw`` output (collapsed stacks, one ``a;b;c N`` per line)."""
    self_count: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        count = int(n)
        frames = [_short(f) for f in stack.split(";")[1:]]  # the first entry names the thread
        if not frames:
            continue
        total += count
        self_count[frames[-1]] += count
        for f in set(frames):
            incl[f] += count
    share = (lambda c: c / total) if total else (lambda c: 0.0)
    inclusive = [(f, share(c)) for f, c in incl.most_common() if share(c) <= 0.9][:top]  # > 90%: the process's own scaffolding
    return Profile(label, total, [(f, share(c)) for f, c in self_count.most_common(top)], inclusive)


class PySpy:
    """Records ``pids`` (label → pid) from :meth:`start` to :meth:`stop` (100 samples/s, active
    threads only, native frames off).  ``available`` is False without the py-spy binary."""

    def __init__(self) -> None:
        self.available = shutil.which("py-spy") is not None
        self._runs: list[tuple[str, subprocess.Popen[bytes], str]] = []
        self._dir = tempfile.mkdtemp(prefix="pyspy-")

    def start(self, pids: dict[str, int]) -> None:
        for label, pid in pids.items():
            out = os.path.join(self._dir, f"{pid}.txt")
            cmd = ["py-spy", "record", "--pid", str(pid), "--rate", "100", "--format", "raw", "--output", out, "--nonblocking"]
            self._runs.append((label, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), out))

    def stop(self) -> list[Profile]:
        profiles = []
        for label, proc, out in self._runs:
            proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            raw = open(out).read() if os.path.exists(out) else ""
            if not raw:
                raw = ""
                label = f"{label} (py-spy: {err.decode(errors='replace').strip()[-200:]})"
            profiles.append(summarize(raw, label))
        self._runs = []
        return profiles


def render(title: str, profiles: list[Profile]) -> list[str]:
    """Markdown: one table per process (self and inclusive shares side by side)."""
    md = [f"## {title}", ""]
    for p in profiles:
        md += [f"### {p.label}: {p.samples} samples", "", "| self | share | inclusive | share |", "|---|---|---|---|"]
        for i in range(max(len(p.top_self), len(p.top_inclusive))):
            s = p.top_self[i] if i < len(p.top_self) else ("", 0.0)
            c = p.top_inclusive[i] if i < len(p.top_inclusive) else ("", 0.0)
            md.append(f"| `{s[0]}` | {100 * s[1]:.1f}% | `{c[0]}` | {100 * c[1]:.1f}% |")
        md.append("")
    return md
