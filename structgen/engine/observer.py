"""``StepObserver``: a hook the engine calls after every step with the host time of each phase
(schedule → forward → sample → process results), for profilers and benchmarks."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import NamedTuple

from structgen.engine.scheduler import ScheduledBatch


class StepPhases(NamedTuple):
    """Seconds (host clock) of one engine step's phases: ``schedule_s`` (including the wait for
    a compile when nothing can run), ``forward_s`` (the launch; device time too when the
    observer synchronizes), ``sample_s`` (the grammars polled again for held first tokens,
    mask rows, mask kernel and draw; with ``synchronize`` also the wait for the sampled ids),
    ``process_s`` (cursors, jump-forward, stop rules, stream chunks; with the overlap scheduler
    the previous step's tokens).  Parts of ``sample_s``: ``poll_s``, the grammars polled
    again and held first tokens gathered (:meth:`Scheduler.gather_samples`); ``rows_s``, the
    mask rows looked up, first-visit ones collected from the row workers or computed, and
    uploaded (:meth:`MaskRowPool.row_indices`)."""

    schedule_s: float
    forward_s: float
    sample_s: float
    process_s: float
    poll_s: float = 0.0
    rows_s: float = 0.0


class StepObserver(ABC):
    """Attached with :meth:`Engine.observe <structgen.engine.engine.Engine.observe>`.

    ``synchronize`` (class attribute): while attached the engine runs without the overlap
    scheduler, synchronizes the device after each forward and waits for the sampled ids inside
    the sample phase, so every phase's time is its own (a slower run, for breakdowns)."""

    synchronize: bool = False

    @abstractmethod
    def on_step(self, batch: ScheduledBatch | None, forward_kind: str | None, phases: StepPhases) -> None:
        """Called once per step, after its results are processed.  ``batch``: what ran (None for
        a step with nothing to run; no ``forward`` when the step only sampled first tokens from
        logits held while their grammars compiled); ``forward_kind``: ``"decode graph"``,
        ``"extend graph"`` or ``"eager"`` (None without a forward).  Must not raise or touch
        the engine."""
