"""What each process of a server under load spends: CPU seconds (``/proc``) and the garbage
collector's pauses (the server's ``/metrics``, or an in-process engine's tracker)."""

from __future__ import annotations

import os
from typing import Any

import httpx
from _pyspy import descendants, proc_stat


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far; 0 once it is gone."""
    fields = proc_stat(pid)
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds of the load generator (its client processes), the server's front end and its
    engine (the engine process with its compile and row workers; in thread mode the front end's
    process is the engine's and the engine column counts only its worker processes)."""

    def __init__(self, client_pids: list[int], front_pid: int, engine_pid: int) -> None:
        self.client_pids, self.front_pid, self.engine_pid = client_pids, front_pid, engine_pid

    def read(self) -> tuple[float, float, float]:
        engine_tree = ([] if self.engine_pid == self.front_pid else [self.engine_pid]) + descendants(self.engine_pid)
        client = sum(_proc_cpu_s(p) for p in self.client_pids)
        return client, _proc_cpu_s(self.front_pid), sum(_proc_cpu_s(p) for p in set(engine_tree))


def gc_pauses(url: str | None = None, engine: Any = None) -> dict[str, tuple[int, float]]:
    """Per process, the collector pauses of 50 ms or more and the seconds of all pauses since
    start: from a server's ``/metrics`` (front end and engine) or an in-process engine's tracker."""
    if engine is not None:
        st = engine.gc_pauses.stats()
        return {"engine": (st.at_least(0.05), st.pause_s)}
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{url}/metrics", timeout=30).text
    count: dict[str, float] = {}
    short: dict[str, float] = {}
    total: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        if fam.name == "structgen_gc_pause_seconds":
            for smp in fam.samples:
                who = smp.labels["process"]
                if smp.name.endswith("_count"):
                    count[who] = smp.value
                elif smp.name.endswith("_sum"):
                    total[who] = smp.value
                elif smp.name.endswith("_bucket") and float(smp.labels["le"]) == 0.05:
                    short[who] = smp.value
    return {who: (int(count[who] - short.get(who, 0.0)), total.get(who, 0.0)) for who in count}


def gc_column(before: dict[str, tuple[int, float]], after: dict[str, tuple[int, float]]) -> str:
    """``long pauses (seconds in GC)`` per process over one level, front end first."""
    return " / ".join(f"{after[w][0] - before[w][0]} ({after[w][1] - before[w][1]:.2f} s)" for w in ("front_end", "engine") if w in after)
