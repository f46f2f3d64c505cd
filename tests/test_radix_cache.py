"""Radix cache properties (hypothesis): match / insert / split / evict, locks, no slot leaks."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from structgen.engine.radix_cache import RadixCache, common_prefix_len
from structgen.runtime.memory import KVAllocator

seqs = st.lists(st.integers(0, 3), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["insert", "match", "lock", "unlock", "evict"]), seqs, st.integers(0, 20)), max_size=40))
def test_radix_operations_keep_invariants(ops: list[tuple[str, list[int], int]]) -> None:
    alloc = KVAllocator(400)
    cache = RadixCache(alloc)
    truth: dict[tuple[int, ...], int] = {}  # token prefix -> slot that holds its last token
    locks: list = []
    for op, key, n in ops:
        if op == "insert":
            slots = alloc.alloc(len(key))
            if slots is None:
                continue
            present = cache.insert(key, slots)
            assert present <= len(key) and cache.peek_prefix_len(key) == len(key)
            alloc.free(slots[:present])  # the caller frees its duplicates
            for i in range(present, len(key)):
                truth[tuple(key[: i + 1])] = int(slots[i])
        elif op == "match":
            slots, node = cache.match_prefix(key)
            m = int(slots.numel())
            assert m == cache.peek_prefix_len(key)
            for i in range(m):
                assert truth[tuple(key[: i + 1])] == int(slots[i])
            if m < len(key):
                assert tuple(key[: m + 1]) not in truth
        elif op == "lock":
            _slots, node = cache.match_prefix(key)
            cache.inc_lock_ref(node)
            locks.append((node, tuple(key[: int(_slots.numel())])))
        elif op == "unlock" and locks:
            node, _k = locks.pop(n % len(locks))
            cache.dec_lock_ref(node)
        elif op == "evict":
            before = alloc.available
            freed = cache.evict(n)
            assert alloc.available == before + freed
            for t in list(truth):
                if cache.peek_prefix_len(list(t)) < len(t):
                    del truth[t]
        cache.check()
        for _node, k in locks:  # locked paths are never evicted
            assert cache.peek_prefix_len(list(k)) == len(k)
        assert alloc.available + cache.total_size == alloc.capacity
    for node, _k in locks:
        cache.dec_lock_ref(node)
    cache.evict(10**6)
    assert cache.total_size == 0 and alloc.available == alloc.capacity


def test_split_keeps_locks_and_slots() -> None:
    alloc = KVAllocator(16)
    cache = RadixCache(alloc)
    s = alloc.alloc(6)
    assert s is not None
    cache.insert([1, 2, 3, 4, 5, 6], s)
    _slots, node = cache.match_prefix([1, 2, 3, 4, 5, 6])
    cache.inc_lock_ref(node)
    part, mid = cache.match_prefix([1, 2, 3, 9])  # splits the edge after 3 tokens
    assert part.tolist() == s[:3].tolist() and mid.lock_ref == 1
    assert cache.evict(100) == 0  # everything is pinned
    cache.dec_lock_ref(node)
    assert cache.evict(1) == 3  # one leaf (the lower half)
    assert cache.evict(100) == 3 and alloc.available == 16
    cache.check()


def test_lru_order_and_counters() -> None:
    alloc = KVAllocator(32)
    cache = RadixCache(alloc)
    for k in ([1, 1, 1], [2, 2, 2], [3, 3, 3]):
        slots = alloc.alloc(3)
        assert slots is not None
        cache.insert(k, slots)
    cache.match_prefix([1, 1, 1])  # refresh: [2,2,2] is now least recently used
    assert cache.evict(3) == 3
    assert cache.peek_prefix_len([2, 2, 2]) == 0 and cache.peek_prefix_len([1, 1, 1]) == 3
    assert cache.evicted_tokens == 3 and cache.hit_tokens == 3
    try:
        cache.dec_lock_ref(cache.match_prefix([1, 1, 1]).last_node)
    except RuntimeError as exc:
        assert "unlocked more often" in str(exc)
    else:
        raise AssertionError("lock underflow not detected")
    assert torch.equal(cache.match_prefix([3, 3, 3, 4]).slots_cpu, cache.match_prefix([3, 3, 3]).slots_cpu)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=40), st.lists(st.integers(0, 3), max_size=40), st.integers(0, 5))
def test_common_prefix_len_is_the_first_mismatch(a: list[int], b: list[int], start: int) -> None:
    """Slice comparisons and halving find what a loop over the tokens finds, for tuples and
    lists alike."""
    want = 0
    while want < len(a) and start + want < len(b) and a[want] == b[start + want]:
        want += 1
    assert common_prefix_len(tuple(a), b, start) == want
    assert common_prefix_len(a, tuple(b), start) == want
    long_a, long_b = [7] * 300 + a, [7] * 300 + b[start:]
    assert common_prefix_len(long_a, long_b) == 300 + want
