"""Radix tree over token ids → KV slots (RadixAttention, Zheng et al. 2024, "SGLang: Efficient
Execution of Structured Language Model Programs", §3).

Edges hold runs of token ids and the KV slots computed for them.  ``match_prefix`` returns the
slots of the longest cached prefix (splitting an edge where the match ends inside it);
``insert`` adds a request's tokens and reports how many were already cached (the caller frees its
duplicate slots).  Running requests pin their path with ``inc_lock_ref``; ``evict`` frees the
least-recently-used unlocked leaves until enough slots are back in the allocator.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from typing import NamedTuple

import torch

from structgen.runtime.memory import KVAllocator

_EMPTY = torch.zeros(0, dtype=torch.int64)


class TreeNode:
    """One edge of the tree: ``key`` (token ids) and ``value_cpu`` (``int64 [len(key)]`` KV slots)."""

    __slots__ = ("children", "id", "key", "last_access", "lock_ref", "parent", "value_cpu")
    _ids = itertools.count()

    def __init__(self, key: tuple[int, ...] = (), value_cpu: torch.Tensor = _EMPTY, parent: TreeNode | None = None) -> None:
        self.children: dict[int, TreeNode] = {}
        self.parent = parent
        self.key = key
        self.value_cpu = value_cpu
        self.lock_ref = 0
        self.last_access = 0
        self.id = next(TreeNode._ids)

    def __lt__(self, other: TreeNode) -> bool:
        return self.last_access < other.last_access


class MatchResult(NamedTuple):
    """``slots_cpu``: ``int64 [n]`` KV slots of the matched prefix (n tokens); ``last_node``: the
    node ending the match (lock it to keep the slots)."""

    slots_cpu: torch.Tensor
    last_node: TreeNode


class RadixCache:
    """Prefix cache over KV slots with LRU eviction and reference-counted locks.

    Counters: ``hit_tokens`` (tokens served by ``match_prefix``), ``evicted_tokens``,
    ``inserted_tokens``.  ``evictable_size`` / ``protected_size``: cached tokens whose node is
    unlocked / locked.
    """

    def __init__(self, allocator: KVAllocator) -> None:
        self.allocator = allocator
        self.root = TreeNode()
        self.root.lock_ref = 1
        self._clock = itertools.count(1)
        self.evictable_size = 0
        self.protected_size = 0
        self.hit_tokens = 0
        self.evicted_tokens = 0
        self.inserted_tokens = 0

    @property
    def total_size(self) -> int:
        return self.evictable_size + self.protected_size

    # ------------------------------------------------------------------ queries

    def match_prefix(self, key: Sequence[int]) -> MatchResult:
        """Longest cached prefix of ``key``; splits the edge where the match ends mid-edge and
        refreshes the LRU time of the path.  Counts the matched tokens in ``hit_tokens``."""
        node = self.root
        now = next(self._clock)
        node.last_access = now
        pieces: list[torch.Tensor] = []
        i = 0
        n = len(key)
        while i < n:
            child = node.children.get(key[i])
            if child is None:
                break
            common = common_prefix_len(child.key, key, i)
            if common < len(child.key):
                child = self._split(child, common)
            child.last_access = now
            pieces.append(child.value_cpu)
            node = child
            i += common
        slots = torch.cat(pieces) if pieces else _EMPTY
        self.hit_tokens += int(slots.numel())
        return MatchResult(slots, node)

    def peek_prefix_len(self, key: Sequence[int]) -> int:
        """Length of the longest cached prefix of ``key``.  Pure query (no split, no LRU touch)."""
        node = self.root
        i = 0
        while i < len(key):
            child = node.children.get(key[i])
            if child is None:
                break
            common = common_prefix_len(child.key, key, i)
            i += common
            if common < len(child.key):
                break
            node = child
        return i

    # ------------------------------------------------------------------ updates

    def insert(self, key: Sequence[int], slots_cpu: torch.Tensor) -> int:
        """Insert ``key`` with its slots (``int64 [len(key)]`` host tensor); returns how many
        leading tokens were already cached — their entries in ``slots_cpu`` are not adopted
        (the caller frees the ones it owns)."""
        assert slots_cpu.is_cpu and slots_cpu.numel() == len(key)
        node = self.root
        now = next(self._clock)
        i = 0
        n = len(key)
        while i < n:
            child = node.children.get(key[i])
            if child is None:
                new = TreeNode(tuple(key[i:]), slots_cpu[i:].clone(), node)
                new.last_access = now
                node.children[key[i]] = new
                self.evictable_size += n - i
                self.inserted_tokens += n - i
                return i
            common = common_prefix_len(child.key, key, i)
            if common < len(child.key):
                child = self._split(child, common)
            child.last_access = now
            node = child
            i += common
        return i

    def _split(self, child: TreeNode, at: int) -> TreeNode:
        """Split ``child``'s edge after ``at`` tokens; returns the new upper node (inherits the
        lock count, so lock accounting is unchanged)."""
        parent = child.parent
        assert parent is not None and 0 < at < len(child.key)
        upper = TreeNode(child.key[:at], child.value_cpu[:at].clone(), parent)
        upper.lock_ref = child.lock_ref
        upper.last_access = child.last_access
        parent.children[child.key[0]] = upper
        child.key = child.key[at:]
        child.value_cpu = child.value_cpu[at:].clone()
        child.parent = upper
        upper.children[child.key[0]] = child
        return upper

    def inc_lock_ref(self, node: TreeNode) -> None:
        """Pin ``node`` and its ancestors (a running request uses their slots)."""
        while node is not self.root:
            if node.lock_ref == 0:
                self.evictable_size -= len(node.key)
                self.protected_size += len(node.key)
            node.lock_ref += 1
            node = node.parent  # type: ignore[assignment]

    def dec_lock_ref(self, node: TreeNode) -> None:
        """Release one pin of ``node`` and its ancestors.  Raises ``RuntimeError`` on underflow."""
        while node is not self.root:
            if node.lock_ref <= 0:
                raise RuntimeError(f"radix node {node.id} unlocked more often than locked")
            node.lock_ref -= 1
            if node.lock_ref == 0:
                self.evictable_size += len(node.key)
                self.protected_size -= len(node.key)
            node = node.parent  # type: ignore[assignment]

    def evict(self, num_tokens: int) -> int:
        """Free at least ``num_tokens`` slots from unlocked leaves, least recently used first
        (fewer when not enough are evictable).  Returns the number freed."""
        if num_tokens <= 0:
            return 0
        heap = [n for n in self._leaves() if n.lock_ref == 0]
        heapq.heapify(heap)
        freed = 0
        while freed < num_tokens and heap:
            leaf = heapq.heappop(heap)
            parent = leaf.parent
            assert parent is not None
            self.allocator.free(leaf.value_cpu)
            freed += len(leaf.key)
            self.evictable_size -= len(leaf.key)
            del parent.children[leaf.key[0]]
            if parent is not self.root and not parent.children and parent.lock_ref == 0:
                heapq.heappush(heap, parent)
        self.evicted_tokens += freed
        return freed

    def _leaves(self) -> list[TreeNode]:
        out: list[TreeNode] = []
        stack = [self.root]
        while stack:
            node = stack.pop()
            if not node.children and node is not self.root:
                out.append(node)
            stack.extend(node.children.values())
        return out

    def check(self) -> None:
        """Verify the size counters and key/value lengths (tests).  Raises ``AssertionError``."""
        ev = pr = 0
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            assert len(node.key) == node.value_cpu.numel() > 0
            for tok, child in node.children.items():
                assert child.key[0] == tok and child.parent is node
            if node.lock_ref:
                pr += len(node.key)
            else:
                ev += len(node.key)
            stack.extend(node.children.values())
        assert (ev, pr) == (self.evictable_size, self.protected_size), ((ev, pr), (self.evictable_size, self.protected_size))


def common_prefix_len(a: Sequence[int], b: Sequence[int], start: int = 0) -> int:
    """Length of the common prefix of ``a`` and ``b[start:]`` (token ids).  Compares whole
    slices (C speed) and halves the range where they differ, instead of a Python loop per token:
    prompts behind a shared few-shot prefix are hundreds of tokens."""
    n = min(len(a), len(b) - start)
    if n <= 0:
        return 0
    x, y = tuple(a[:n]), tuple(b[start : start + n])
    if x == y:
        return n
    lo, hi = 0, n  # x[:lo] == y[:lo]; they differ within [lo, hi)
    while hi - lo > 8:
        mid = (lo + hi) // 2
        if x[lo:mid] == y[lo:mid]:
            lo = mid
        else:
            hi = mid
    while x[lo] == y[lo]:
        lo += 1
    return lo
