"""Run benchmark items over forked worker processes without losing one when a worker dies.

``multiprocessing.Pool`` waits forever for the result of a task whose worker was killed (the
kernel's OOM killer, a crash in native code). This runner keeps at most one item in flight per
worker, so when a worker dies (``BrokenProcessPool``), the suspects are exactly the items in
flight. Each suspect runs again alone in a fresh single-worker pool; one that kills that worker
too is reported through ``on_death``, and the rest of the items go on in a fresh pool.
Workers are replaced after ``recycle`` items, as ``maxtasksperchild`` would (memory a long run
leaves behind goes with them). :func:`limit_cpu` turns an item stuck in native code, where no
Python signal handler runs, into such a death.
"""

from __future__ import annotations

import multiprocessing as mp
import resource
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Generic, NamedTuple, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class PoolSpec(NamedTuple, Generic[T, R]):
    """What each worker runs: ``fn(item)`` after ``initializer(*initargs)`` once per worker.

    ``fn`` and ``initializer`` must be module-level functions (workers are forked, and results
    pickled back)."""

    fn: Callable[[T], R]
    initializer: Callable[..., Any] | None = None
    initargs: tuple[Any, ...] = ()


def run_items(
    spec: PoolSpec[T, R],
    items: Sequence[T],
    workers: int,
    on_death: Callable[[T], R],
    recycle: int = 2000,
) -> Iterator[R]:
    """Yield ``spec.fn(item)`` for every item, in completion order, over ``workers`` forked
    processes.

    An item whose worker dies twice (once among others, once alone) yields ``on_death(item)``
    instead; no item is lost and none is yielded twice. Raises ``ValueError`` for ``workers`` or
    ``recycle`` below 1; an exception raised by ``fn`` itself propagates."""
    if workers < 1 or recycle < 1:
        raise ValueError(f"workers and recycle must be >= 1, got workers={workers}, recycle={recycle}")
    todo = list(reversed(items))  # popped from the end: items start in their given order
    while todo:
        suspects: list[T] = []
        yield from _one_pool(spec, todo, workers, recycle, suspects)
        for item in suspects:
            alone: list[T] = []
            yield from _one_pool(spec, [item], 1, 1, alone)
            if alone:
                yield on_death(item)


def _one_pool(spec: PoolSpec[T, R], todo: list[T], workers: int, recycle: int, suspects: list[T]) -> Iterator[R]:
    """Run items off ``todo`` on one pool until ``recycle`` have started, ``todo`` is empty or a
    worker dies; on a death, the items in flight go to ``suspects``."""
    ctx = mp.get_context("fork")
    started = 0
    inflight: dict[Future[R], T] = {}
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=spec.initializer, initargs=spec.initargs) as pool:
        while True:
            while todo and len(inflight) < workers and started < recycle:
                item = todo.pop()
                inflight[pool.submit(spec.fn, item)] = item
                started += 1
            if not inflight:
                return
            done, _ = wait(inflight, return_when=FIRST_COMPLETED)
            for fut in done:
                item = inflight.pop(fut)
                try:
                    result = fut.result()
                except BrokenProcessPool:
                    suspects.append(item)
                    continue
                yield result
            if suspects:
                suspects.extend(inflight.values())  # every future of a broken pool fails
                for fut in inflight:
                    fut.cancel()
                return


def limit_cpu(seconds: float) -> None:
    """Let the calling process use at most ``seconds`` more CPU time (all its threads): past it
    the kernel ends the process with ``SIGXCPU`` even inside native code, where an alarm's
    Python handler never runs. Call it in a worker at the start of each item; in a pool run by
    :func:`run_items` the item then counts as a worker death. Raises ``ValueError`` for
    ``seconds <= 0``."""
    if seconds <= 0:
        raise ValueError(f"seconds must be > 0, got {seconds}")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = int(used + seconds) + 1
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
