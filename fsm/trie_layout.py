"""The vocabulary trie's two node layouts (breadth-first for the numpy walk, preorder for the
compiled one), built from the token spellings; and the numpy walk over the breadth-first one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np


class TrieLayout(NamedTuple):
    """The arrays :class:`~.trie.VocabTrie` documents (its attributes of the same names):
    ``max_depth`` (the longest token in bytes), ``num_nodes`` (N, the root included); the
    breadth-first ``parent`` / ``byte`` / ``child_start`` / ``child_count`` (``int64 [N]``),
    ``token_node`` (``int64 [V]``), ``valid`` (``bool [V]``), ``dup_src`` / ``dup_dst``
    (``int64 [D]``); the preorder ``pre_byte`` (``uint8 [N-1]``), ``pre_depth`` / ``pre_skip``
    / ``pre_token`` / ``pre_deepest`` (``int32 [N-1]``)."""

    max_depth: int
    num_nodes: int
    parent: np.ndarray
    byte: np.ndarray
    child_start: np.ndarray
    child_count: np.ndarray
    token_node: np.ndarray
    valid: np.ndarray
    dup_src: np.ndarray
    dup_dst: np.ndarray
    pre_byte: np.ndarray
    pre_depth: np.ndarray
    pre_skip: np.ndarray
    pre_token: np.ndarray
    pre_deepest: np.ndarray


def build_layout(token_bytes: Sequence[bytes], excluded: frozenset[int]) -> TrieLayout:
    """Both layouts of the trie of every non-empty token of ``token_bytes`` (indexed by token
    id) outside ``excluded``: a node per distinct prefix, numbered level by level (prefixes
    sorted within a level, so each node's children are contiguous), and the same nodes in
    lexicographic preorder without the root (llguidance's TokTrie layout)."""
    items = sorted((b, i) for i, b in enumerate(token_bytes) if b and i not in excluded)
    prefix_id: dict[bytes, int] = {b"": 0}
    prefixes: list[bytes] = [b""]
    parent_l, byte_l = [0], [0]
    max_len = max((len(b) for b, _ in items), default=0)
    prefixes_by_len: list[set[bytes]] = [set() for _ in range(max_len + 1)]
    for b, _ in items:
        for k in range(1, len(b) + 1):
            prefixes_by_len[k].add(b[:k])
    level_start = [0, 1]
    for d in range(1, max_len + 1):
        for p in sorted(prefixes_by_len[d]):
            prefix_id[p] = len(parent_l)
            prefixes.append(p)
            parent_l.append(prefix_id[p[:-1]])
            byte_l.append(p[-1])
        level_start.append(len(parent_l))
    parent = np.array(parent_l, dtype=np.int64)  # [N]
    n = len(parent_l)
    token_node = np.zeros(len(token_bytes), dtype=np.int64)  # [V]
    valid = np.zeros(len(token_bytes), dtype=bool)  # [V]
    node_token = np.full(n, -1, dtype=np.int64)  # [N] the lowest token id spelled by each node
    dup_src: list[int] = []
    dup_dst: list[int] = []
    for b, i in items:
        node = prefix_id[b]
        token_node[i] = node
        valid[i] = True
        if node_token[node] < 0:
            node_token[node] = i
        else:
            dup_src.append(int(node_token[node]))
            dup_dst.append(i)
    # children of each node are contiguous in the next level (prefixes sorted within a level)
    child_start = np.zeros(n, dtype=np.int64)
    child_count = np.zeros(n, dtype=np.int64)
    par = parent[1:]
    np.add.at(child_count, par, 1)
    firsts = np.ones(n - 1, dtype=bool)
    firsts[1:] = par[1:] != par[:-1]
    child_start[par[firsts]] = np.flatnonzero(firsts) + 1
    # preorder: subtree sizes bottom-up over the levels, then the lexicographic order
    size = np.ones(n, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int32)
    deepest = np.zeros(n, dtype=np.int32)  # the deepest node in each subtree
    for d in range(max_len, 0, -1):
        lo, hi = level_start[d], level_start[d + 1]
        np.add.at(size, parent[lo:hi], size[lo:hi])
        depth[lo:hi] = d
        np.maximum(deepest[lo:hi], d, out=deepest[lo:hi])
        np.maximum.at(deepest, parent[lo:hi], deepest[lo:hi])
    order = np.array(sorted(range(1, n), key=prefixes.__getitem__), dtype=np.int64)  # [N-1] BFS ids in preorder
    byte = np.array(byte_l, dtype=np.int64)  # [N]
    return TrieLayout(
        max_depth=max_len,
        num_nodes=n,
        parent=parent,
        byte=byte,
        child_start=child_start,
        child_count=child_count,
        token_node=token_node,
        valid=valid,
        dup_src=np.array(dup_src, dtype=np.int64),
        dup_dst=np.array(dup_dst, dtype=np.int64),
        pre_byte=byte[order].astype(np.uint8),
        pre_depth=depth[order],
        pre_skip=size[order].astype(np.int32),
        pre_token=node_token[order].astype(np.int32),
        pre_deepest=deepest[order],
    )


class _BreadthFirst(Protocol):
    num_nodes: int
    child_start: np.ndarray
    child_count: np.ndarray


def node_states(trie: _BreadthFirst, dfa: Any, cls: np.ndarray, state: int) -> np.ndarray:
    """The numpy walk: ``int32 [N]`` the automaton state each trie node's spelling leads to
    from ``state`` (0 where it dies), level by level over live nodes only.  ``dfa``: a lazily
    built byte automaton (``table [cap, C]`` with -1 rows for unexpanded states, ``expand``);
    ``cls``: ``int64 [N]`` the byte class of each node's edge.  Expands states on demand."""
    node_state = np.zeros(trie.num_nodes, dtype=np.int32)  # [N]
    nodes = np.zeros(1, dtype=np.int64)
    st = np.array([state], dtype=np.int64)
    cs, cc = trie.child_start, trie.child_count
    c = dfa.num_classes
    while nodes.size:
        counts = cc[nodes]
        total = int(counts.sum())
        if total == 0:
            break
        starts = cs[nodes]
        # concatenate the child ranges [start, start + count) of all live nodes
        offsets = np.repeat(starts - np.cumsum(counts) + counts, counts)
        children = np.arange(total, dtype=np.int64) + offsets
        parent_st = np.repeat(st, counts)
        idx = parent_st * c + cls[children]
        child_st = dfa.table.reshape(-1)[idx]
        unknown = child_st < 0
        if unknown.any():
            for s in np.unique(parent_st[unknown]).tolist():
                dfa.expand(s)
            child_st = dfa.table.reshape(-1)[idx]
        live = child_st != 0
        nodes = children[live]
        st = child_st[live].astype(np.int64)
        node_state[nodes] = st
    return node_state
