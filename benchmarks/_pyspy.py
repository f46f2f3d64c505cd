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

RATE = 100  # samples per second
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


def summarize(raw: str, label: str, top: int = 12, keep: str | None = None) -> Profile:
    """``raw``: py-spy's ``--format raw`` output (collapsed stacks, one ``a;b;c N`` per line);
    ``keep``: only the stacks whose text holds it (one thread's loop, say)."""
    self_count: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit() or (keep is not None and keep not in stack):
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


def proc_stat(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first), or None once the
    process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def descendants(pid: int) -> list[int]:
    """``pid``'s child processes, their children, ... (read from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        fields = proc_stat(entry) if entry.isdigit() else None
        if fields is not None:
            parents.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class PySpy:
    """Records ``pids`` (label → pid) from :meth:`start` to :meth:`stop` (100 samples/s, native
    frames off; active threads only unless ``idle``: then waits show too, as the frames that
    wait).  ``available`` is False without the py-spy binary."""

    def __init__(self) -> None:
        self.available = shutil.which("py-spy") is not None
        self._runs: list[tuple[str, subprocess.Popen[bytes], str]] = []
        self._dir = tempfile.mkdtemp(prefix="pyspy-")

    def start(self, pids: dict[str, int], idle: bool = False) -> None:
        for label, pid in pids.items():
            out = os.path.join(self._dir, f"{pid}.txt")
            cmd = ["py-spy", "record", "--pid", str(pid), "--rate", str(RATE), "--format", "raw", "--output", out, "--nonblocking"]
            self._runs.append(
                (label, subprocess.Popen([*cmd, "--idle"] if idle else cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), out)
            )

    def stop_raw(self) -> list[tuple[str, str]]:
        """(label, collapsed stacks) of every process recorded since :meth:`start` (an empty
        text, and py-spy's complaint in the label, where it recorded nothing)."""
        raws = []
        for label, proc, out in self._runs:
            proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            raw = open(out).read() if os.path.exists(out) else ""
            if not raw:
                label = f"{label} (py-spy: {err.decode(errors='replace').strip()[-200:]})"
            raws.append((label, raw))
        self._runs = []
        return raws

    def stop(self) -> list[Profile]:
        return [summarize(raw, label) for label, raw in self.stop_raw()]


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
