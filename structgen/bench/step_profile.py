"""Where an engine step's time goes: schedule, forward, sampling, result processing.

:class:`StepProfiler` observes one engine's steps for the span of a benchmark run
(``structgen bench json --profile``) through the engine's step-observer hook, which
synchronises the device after each forward so that the forward's GPU time is not charged to the
sampler's wait for the sampled ids; it also records the garbage collector's pauses
(``gc.callbacks``).  While attached, the scheduler runs without overlap (each step's tokens are
processed in that step).  The synchronisation removes
the overlap of host work with the forward, so a profiled run is slower than an unprofiled
one: its throughput is for the breakdown, not for the tables.
"""

from __future__ import annotations

import gc
import time
from typing import Any, NamedTuple

from structgen.engine import Engine
from structgen.engine.observer import StepObserver, StepPhases
from structgen.engine.scheduler import ScheduledBatch
from structgen.fsm import RowWorkerStats

_PHASES = ("schedule", "forward", "sample", "process", "poll", "rows")  # poll and rows are parts of sample


class StepRecord(NamedTuple):
    """One forward: its kind (``"decode graph"``, ``"extend graph"``, ``"eager"``), requests and
    extend tokens in it, and the seconds of each phase (``forward_s`` ends at a device sync;
    ``sample_s``: mask rows, mask kernel, draw and the copy of the ids to the host;
    ``process_s``: the rest of result processing: cursors, jump-forward, stop rules, chunks;
    ``poll_s`` / ``rows_s``: the parts of ``sample_s`` that polled the grammars again and
    looked up, collected or computed and uploaded the mask rows, as :class:`StepPhases` has them)."""

    kind: str
    requests: int
    tokens: int
    schedule_s: float
    forward_s: float
    sample_s: float
    process_s: float
    poll_s: float
    rows_s: float


class StepProfiler(StepObserver):
    """A synchronizing :class:`~structgen.engine.observer.StepObserver`: attach to an engine
    with :meth:`attach`, run, then :meth:`detach` and read :meth:`summary`."""

    synchronize = True

    def __init__(self) -> None:
        self.steps: list[StepRecord] = []
        self.idle_schedule_s = 0.0  # schedule calls that found nothing to run
        self.gc_pauses: list[tuple[int, float]] = []  # (generation, seconds) of each collection while attached
        self._engine: Any = None
        self._gc_start = 0.0
        self._rows_at_attach: RowWorkerStats | None = None
        self.row_workers: RowWorkerStats | None = None  # the row workers' share of the run (after detach)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self.gc_pauses.append((info["generation"], time.perf_counter() - self._gc_start))

    def on_step(self, batch: ScheduledBatch | None, forward_kind: str | None, phases: StepPhases) -> None:
        if batch is None:
            self.idle_schedule_s += phases.schedule_s
            return
        tokens = sum(n for _r, n in batch.items)
        self.steps.append(StepRecord(forward_kind or "sample only", len(batch.items), tokens, *phases))

    def attach(self, engine: Engine) -> None:
        """Observe ``engine``'s steps (overlap off, device synced: :attr:`synchronize`) and
        the garbage collector's pauses.  Raises ``RuntimeError`` when already attached."""
        if self._engine is not None:
            raise RuntimeError("the profiler is already attached")
        engine.observe(self)
        self._engine = engine
        gc.callbacks.append(self._on_gc)
        pool = engine.compiler.row_workers
        self._rows_at_attach = pool.stats() if pool is not None else None

    def detach(self) -> None:
        """Stop observing (the engine's overlap setting comes back)."""
        if self._engine is not None:
            pool = self._engine.compiler.row_workers
            if pool is not None:
                self.row_workers = pool.stats().minus(self._rows_at_attach or RowWorkerStats())
            self._engine.observe(None)
            self._engine = None
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def summary(self, wall_s: float) -> dict[str, Any]:
        """Per forward kind: steps, mean requests and tokens, mean ms of each phase; totals in
        seconds, and ``outside_s``: wall time spent outside the engine's steps (the benchmark
        loop: submits, outputs, validation) and in idle schedule calls."""
        kinds: dict[str, Any] = {}
        for kind in sorted({s.kind for s in self.steps}):
            ss = [s for s in self.steps if s.kind == kind]
            n = len(ss)
            kinds[kind] = {
                "steps": n,
                "requests": sum(s.requests for s in ss) / n,
                "tokens": sum(s.tokens for s in ss) / n,
                **{f"{p}_ms": sum(getattr(s, f"{p}_s") for s in ss) / n * 1e3 for p in _PHASES},
            }
        totals = {f"{p}_s": sum(getattr(s, f"{p}_s") for s in self.steps) for p in _PHASES}
        inside = sum(totals[f"{p}_s"] for p in ("schedule", "forward", "sample", "process"))
        gcs = {
            g: {"count": len(ds), "total_s": sum(ds), "max_s": max(ds, default=0.0)}
            for g in (0, 1, 2)
            for ds in [[d for gen, d in self.gc_pauses if gen == g]]
        }
        rows = self.row_workers._asdict() if self.row_workers is not None else None
        return {"kinds": kinds, "wall_s": wall_s, **totals, "outside_s": wall_s - inside, "gc": gcs, "row_workers": rows}


def profile_markdown(title: str, summary: dict[str, Any]) -> str:
    """A section for ``profile.md``: one row per forward kind, then the totals."""
    head = (
        "| forward kind | steps | requests | tokens | schedule ms | forward ms | sample ms | of it: grammar poll ms "
        "| of it: mask rows ms | process ms |"
    )
    lines = [f"## {title}", "", head, "|---|---|---|---|---|---|---|---|---|---|"]
    for kind, k in summary["kinds"].items():
        lines.append(
            f"| {kind} | {k['steps']} | {k['requests']:.1f} | {k['tokens']:.1f} | {k['schedule_ms']:.2f} | "
            f"{k['forward_ms']:.2f} | {k['sample_ms']:.2f} | {k.get('poll_ms', 0.0):.2f} | {k.get('rows_ms', 0.0):.2f} | "
            f"{k['process_ms']:.2f} |"
        )
    wall = summary["wall_s"]
    parts = ", ".join(
        f"{p} {summary[f'{p}_s']:.3f} s ({100 * summary[f'{p}_s'] / wall:.0f}%)" if wall > 0 else f"{p} {summary[f'{p}_s']:.3f} s"
        for p in ("schedule", "forward", "sample", "process", "outside")
    )
    lines += ["", f"Wall {wall:.3f} s: {parts}."]
    gcs = summary.get("gc", {})
    if gcs:
        lines.append(
            "Garbage collections (inside the phases above): "
            + ", ".join(f"gen {g} {v['count']}× {v['total_s']:.3f} s (longest {v['max_s']:.3f} s)" for g, v in gcs.items())
            + "."
        )
    rows = summary.get("row_workers")
    if rows:
        n = max(rows["fills"], 1)
        lines.append(
            f"Row workers: {rows['fills']} collections, {rows['rows']} mask rows and {rows['budget_rows']} states' budget rows "
            f"({rows['reply_bytes'] / 2**20:.1f} MiB); workers busy {rows['busy_s']:.3f} s in all, longest answer per "
            f"collection {1e3 * rows['critical_s'] / n:.2f} ms (mean); the sample blocked on them {rows['wait_s']:.3f} s "
            f"({1e3 * rows['wait_s'] / n:.2f} ms per collection)."
        )
    lines.append("")
    return "\n".join(lines)
