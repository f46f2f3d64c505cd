"""``GCPauses``: the cyclic garbage collector's stop-the-world pauses in this process, counted
in histogram buckets (for ``/metrics`` and the load test).  A full (generation 2) collection
walks every tracked object that is not frozen, and the process does nothing else meanwhile: in
a server's front end that holds FastAPI, pydantic and a tokenizer, every such pass walks all of
them unless the long-lived heap is frozen (``gc.freeze``), which is why the front end and the
engine freeze theirs after start-up (SGLang's ``/freeze_gc`` and vLLM's start-up freeze do the
same)."""

from __future__ import annotations

import gc
import threading
import time
from typing import Any, NamedTuple

# upper bounds (seconds) of the pause buckets; a last bucket takes the rest
GC_PAUSE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class GCStats(NamedTuple):
    """Pauses since the tracker started: ``counts`` per bucket of ``GC_PAUSE_BUCKETS`` (not
    cumulative; one more for the pauses past the last bound), ``pause_s`` their total
    (seconds), ``longest_s`` the longest, ``full`` the generation-2 collections among them."""

    counts: tuple[int, ...] = (0,) * (len(GC_PAUSE_BUCKETS) + 1)
    pause_s: float = 0.0
    longest_s: float = 0.0
    full: int = 0

    @property
    def collections(self) -> int:
        return sum(self.counts)

    def since(self, earlier: GCStats) -> GCStats:
        """The pauses after ``earlier`` (a snapshot of the same tracker); ``longest_s`` is that
        of the whole run when the longest pause came before ``earlier`` (an upper bound)."""
        counts = tuple(a - b for a, b in zip(self.counts, earlier.counts))
        return GCStats(counts, self.pause_s - earlier.pause_s, self.longest_s, self.full - earlier.full)

    def at_least(self, seconds: float) -> int:
        """Pauses in the buckets whose lower bound is at least ``seconds`` (a bucket bound).
        Raises ``ValueError`` for a value that is not one of ``GC_PAUSE_BUCKETS``."""
        if seconds not in GC_PAUSE_BUCKETS:
            raise ValueError(f"{seconds} is not a bucket bound of {GC_PAUSE_BUCKETS}")
        return sum(self.counts[GC_PAUSE_BUCKETS.index(seconds) + 1 :])


class GCPauses:
    """Times every collection of this process through ``gc.callbacks`` (two clock reads per
    collection) until :meth:`close`.  Thread-safe; :meth:`stats` is a consistent snapshot."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = [0] * (len(GC_PAUSE_BUCKETS) + 1)
        self._pause_s = 0.0
        self._longest_s = 0.0
        self._full = 0
        self._started = 0.0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        took = time.perf_counter() - self._started
        bucket = next((i for i, bound in enumerate(GC_PAUSE_BUCKETS) if took <= bound), len(GC_PAUSE_BUCKETS))
        with self._lock:
            self._counts[bucket] += 1
            self._pause_s += took
            self._longest_s = max(self._longest_s, took)
            self._full += info.get("generation") == 2

    def stats(self) -> GCStats:
        with self._lock:
            return GCStats(tuple(self._counts), self._pause_s, self._longest_s, self._full)

    def close(self) -> None:
        """Stop timing (idempotent)."""
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)


def freeze_heap() -> None:
    """Collect once, then move every object still alive out of the collector's passes
    (``gc.freeze``): what a process holds after its start-up is long-lived, and later full
    collections walk only what came after."""
    gc.collect()
    gc.freeze()
