"""The benchmark item runner: every item answered once, even when a worker process dies."""

from __future__ import annotations

import os

import pytest

from structgen.bench.item_pool import PoolSpec, limit_cpu, run_items

_OFFSET: list[int] = []


def _init(offset: int) -> None:
    _OFFSET.append(offset)


def _square_or_die(x: int) -> int:
    if x == 7:
        os._exit(3)  # as the kernel's OOM killer would end the worker
    return x * x + _OFFSET[-1]


def _spin_in_c(x: int) -> int:
    if x == 2:
        limit_cpu(1.0)
        sum(range(10**12))  # one call into C: no Python signal handler would run before it returns
    return x


def _died(x: int) -> int:
    return -x


@pytest.mark.parametrize("workers,recycle", [(1, 2000), (3, 2000), (2, 4)])
def test_each_item_is_answered_once_when_a_worker_dies(workers: int, recycle: int) -> None:
    items = list(range(20))
    spec = PoolSpec(_square_or_die, _init, (100,))
    out = list(run_items(spec, items, workers, on_death=_died, recycle=recycle))
    assert sorted(out) == sorted([-7] + [x * x + 100 for x in items if x != 7])


def test_without_deaths_results_come_from_initialized_workers() -> None:
    out = list(run_items(PoolSpec(_square_or_die, _init, (1,)), [1, 2, 3], 2, on_death=_died, recycle=1))
    assert sorted(out) == [2, 5, 10]


def test_bad_worker_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="workers and recycle"):
        list(run_items(PoolSpec(_square_or_die), [1], 0, on_death=_died))


def test_an_item_stuck_in_native_code_is_ended_by_its_cpu_limit() -> None:
    out = list(run_items(PoolSpec(_spin_in_c), [1, 2, 3], 2, on_death=_died))
    assert sorted(out) == [-2, 1, 3]
    with pytest.raises(ValueError, match="seconds"):
        limit_cpu(0)
