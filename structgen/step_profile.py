"""Where an engine step's time goes: schedule, forward, sampling, result processing.

:class:`StepProfiler` wraps one engine's scheduler, model runner and sampler for the span of a
benchmark run (``structgen bench json --profile``), synchronising the device after each forward
so that the forward's GPU time is not charged to the sampler's wait for the sampled ids, and
records the garbage collector's pauses (``gc.callbacks``).  While attached, the scheduler runs
without overlap (each step's tokens are processed in that step).  The synchronisation removes
the overlap of host work with the forward, so a profiled run is slower than an unprofiled
one: its throughput is for the breakdown, not for the tables.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from typing import Any, NamedTuple

import torch


class StepRecord(NamedTuple):
    """One forward: its kind (``"decode graph"``, ``"extend graph"``, ``"eager"``), requests and
    extend tokens in it, and the seconds of each phase (``forward_s`` ends at a device sync;
    ``sample_s``: mask rows, mask kernel, draw and the copy of the ids to the host;
    ``process_s``: the rest of result processing: cursors, jump-forward, stop rules, chunks)."""

    kind: str
    requests: int
    tokens: int
    schedule_s: float
    forward_s: float
    sample_s: float
    process_s: float


class StepProfiler:
    """Attach to an :class:`~structgen.engine.Engine` with :meth:`attach`, run, then
    :meth:`detach` (the model runner may outlive the engine) and read :meth:`summary`."""

    def __init__(self) -> None:
        self.steps: list[StepRecord] = []
        self.idle_schedule_s = 0.0  # schedule calls that found nothing to run
        self.gc_pauses: list[tuple[int, float]] = []  # (generation, seconds) of each collection while attached
        self._restore: list[tuple[Any, str]] = []
        self._overlap: tuple[Any, bool] | None = None  # (scheduler, its overlap setting) while attached
        self._gc_start = 0.0

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self.gc_pauses.append((info["generation"], time.perf_counter() - self._gc_start))

    def attach(self, engine: Any) -> None:
        """Wrap ``engine``'s ``scheduler.schedule``, ``runner.forward``, ``scheduler.sampler.launch``
        and ``scheduler.process_results`` (instance attributes that shadow the methods) and turn
        the overlap scheduler off until :meth:`detach`.  Raises ``RuntimeError`` when already
        attached."""
        if self._restore:
            raise RuntimeError("the profiler is already attached")
        sched, runner, sampler = engine.scheduler, engine.runner, engine.scheduler.sampler
        cuda = runner.device.type == "cuda"
        pending: dict[str, Any] = {}
        schedule, forward, launch, process = sched.schedule, runner.forward, sampler.launch, sched.process_results

        def timed_schedule() -> Any:
            t0 = time.perf_counter()
            batch = schedule()
            dt = time.perf_counter() - t0
            if batch is None:
                self.idle_schedule_s += dt
            pending.update(schedule_s=dt, sample_s=0.0)
            return batch

        def timed_forward(batch: Any) -> torch.Tensor:
            before = Counter(runner.forward_counts)
            t0 = time.perf_counter()
            logits = forward(batch)
            if cuda:
                torch.cuda.synchronize(runner.device)
            pending["forward_s"] = time.perf_counter() - t0
            kinds = list((runner.forward_counts - before).elements())
            pending["kind"] = kinds[0] if kinds else "?"
            return logits

        def timed_launch(logits: torch.Tensor, reqs: Any, active: Any = None) -> Any:
            t0 = time.perf_counter()
            handle = launch(logits, reqs, active)
            handle.result()  # the wait for the ids belongs to sampling (cached for the scheduler)
            pending["sample_s"] = time.perf_counter() - t0
            return handle

        def timed_process(batch: Any, logits: torch.Tensor | None) -> Any:
            t0 = time.perf_counter()
            out = process(batch, logits)
            total = time.perf_counter() - t0
            if batch is None:  # drained a step launched before attach
                return out
            self.steps.append(
                StepRecord(
                    pending.get("kind", "?"),
                    len(batch.items),
                    sum(n for _r, n in batch.items),
                    pending.get("schedule_s", 0.0),
                    pending.get("forward_s", 0.0),
                    pending["sample_s"],
                    total - pending["sample_s"],
                )
            )
            return out

        for obj, name, fn in (
            (sched, "schedule", timed_schedule),
            (runner, "forward", timed_forward),
            (sampler, "launch", timed_launch),
            (sched, "process_results", timed_process),
        ):
            setattr(obj, name, fn)
            self._restore.append((obj, name))
        self._overlap = (sched, sched.overlap)
        sched.overlap = False
        gc.callbacks.append(self._on_gc)

    def detach(self) -> None:
        """Remove the wrappers (the methods of the classes show through again)."""
        for obj, name in self._restore:
            delattr(obj, name)
        self._restore = []
        if self._overlap is not None:
            sched, overlap = self._overlap
            sched.overlap = overlap
            self._overlap = None
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
                **{f"{p}_ms": sum(getattr(s, f"{p}_s") for s in ss) / n * 1e3 for p in ("schedule", "forward", "sample", "process")},
            }
        totals = {f"{p}_s": sum(getattr(s, f"{p}_s") for s in self.steps) for p in ("schedule", "forward", "sample", "process")}
        inside = sum(totals.values())
        gcs = {
            g: {"count": len(ds), "total_s": sum(ds), "max_s": max(ds, default=0.0)}
            for g in (0, 1, 2)
            for ds in [[d for gen, d in self.gc_pauses if gen == g]]
        }
        return {"kinds": kinds, "wall_s": wall_s, **totals, "outside_s": wall_s - inside, "gc": gcs}


def profile_markdown(title: str, summary: dict[str, Any]) -> str:
    """A section for ``profile.md``: one row per forward kind, then the totals."""
    head = "| forward kind | steps | requests | tokens | schedule ms | forward ms | sample ms | process ms |"
    lines = [f"## {title}", "", head, "|---|---|---|---|---|---|---|---|"]
    for kind, k in summary["kinds"].items():
        lines.append(
            f"| {kind} | {k['steps']} | {k['requests']:.1f} | {k['tokens']:.1f} | {k['schedule_ms']:.2f} | "
            f"{k['forward_ms']:.2f} | {k['sample_ms']:.2f} | {k['process_ms']:.2f} |"
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
    lines.append("")
    return "\n".join(lines)
