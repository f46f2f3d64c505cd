from __future__ import annotations

import gc

import pytest

from structgen.engine.gc_pauses import GC_PAUSE_BUCKETS, GCPauses, GCStats, freeze_heap


def test_every_collection_is_timed_into_one_bucket_until_closed() -> None:
    tracker = GCPauses()
    try:
        before = tracker.stats()
        gc.collect()  # a full collection
        gc.collect(0)
        after = tracker.stats()
        got = after.since(before)
        assert got.collections == 2 and got.full == 1
        assert len(got.counts) == len(GC_PAUSE_BUCKETS) + 1 and min(got.counts) >= 0
        assert 0 < after.longest_s <= after.pause_s and got.pause_s > 0
        assert got.at_least(GC_PAUSE_BUCKETS[0]) == got.collections - got.counts[0]
        with pytest.raises(ValueError, match="not a bucket bound"):
            got.at_least(0.003)
    finally:
        tracker.close()
    tracker.close()  # idempotent
    gc.collect()
    assert tracker.stats().collections == after.collections  # no longer timed


def test_since_keeps_the_runs_longest_pause_as_a_bound() -> None:
    a = GCStats((1,) + (0,) * len(GC_PAUSE_BUCKETS), 0.2, 0.2, 1)
    b = GCStats((1, 1) + (0,) * (len(GC_PAUSE_BUCKETS) - 1), 0.3, 0.2, 1)
    d = b.since(a)
    assert d.counts[:2] == (0, 1) and d.full == 0 and d.longest_s == 0.2 and abs(d.pause_s - 0.1) < 1e-12


def test_freeze_heap_moves_the_live_heap_out_of_the_collectors_passes() -> None:
    try:
        freeze_heap()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
