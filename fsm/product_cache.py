"""``ProductCache``: eager automata of ``And`` / ``Minus`` operands and products shared across
compiles.

Every schema's compile builds eager DFAs for the operands of its intersections and differences
(an object's undeclared keys are "any JSON string minus the declared names"; a ``format`` or
``pattern`` meets a length bound; an exact ``oneOf`` subtracts branches) and for the products
themselves.  Many of them recur from one schema to the next: the same JSON string automaton, the
same ``format`` under a length bound, the same shared ``$defs`` entry.  A compile's own memo
(:class:`~structgen.fsm.nfa.NFABuilder`) only spans one schema; this cache spans a compiler's
lifetime, keyed by the node's structure (:func:`structural_key`), so a new schema
reuses what earlier ones built.  The schema itself is still compiled cold: only sub-automata
equal by structure are shared, and a cached DFA is the very automaton the compile would build
(``ByteDFA`` is immutable).

The idea is the cross-grammar cache of xgrammar (2026) applied to our eager sub-automata.
Bounded by bytes (LRU), thread-safe, never pickled with the automata that used it.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import fields
from typing import Any, NamedTuple

from structgen.schemas.charset import CharSet
from structgen.schemas.ir import Automaton, Node

from .dfa import ByteDFA


def structural_key(node: Node, memo: dict[int, bytes], keep: list[Node]) -> bytes:
    """A key equal for structurally equal IR nodes, whoever built them: a 20-byte BLAKE2b digest
    of the node's type and fields, with each child node standing for its own digest (a Merkle
    hash, so an IR whose sub-trees are shared — ``$ref`` unrolling, ``allOf`` merges — is hashed
    once per distinct node, and the key's size and its hashing do not grow with the node's).
    An ``Automaton`` stands for the name of its language. Memoized in ``memo`` by identity
    (``keep`` holds the nodes so their ids stay theirs). Two different structures share a key
    only on a 160-bit hash collision."""
    got = memo.get(id(node))
    if got is None:
        if isinstance(node, Automaton):
            text = repr(("Automaton", node.key))
        else:
            text = repr((type(node).__name__, *(_field_key(getattr(node, f.name), memo, keep) for f in fields(node))))  # type: ignore[arg-type]
        got = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20).digest()
        memo[id(node)] = got
        keep.append(node)
    return got


def _field_key(value: Any, memo: dict[int, bytes], keep: list[Node]) -> Any:
    if isinstance(value, Node):
        return ("node", structural_key(value, memo, keep))
    if isinstance(value, tuple):
        return tuple(_field_key(v, memo, keep) for v in value)
    if isinstance(value, CharSet):
        return ("cs", value.ranges)
    return value


class ProductCacheStats(NamedTuple):
    """Counters of a :class:`ProductCache`: lookups answered, lookups missed, entries and bytes
    held now, entries evicted."""

    hits: int
    misses: int
    entries: int
    bytes: int
    evictions: int


class ProductCache:
    """LRU of eager :class:`ByteDFA` by structural key, at most ``max_bytes`` of tables
    (``table`` + ``accepting`` arrays); a DFA larger than ``max_bytes // 4`` is not kept.

    Raises ``ValueError`` for ``max_bytes < 0`` (0 keeps nothing)."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[Any, ...], ByteDFA] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._hits = self._misses = self._evictions = 0

    @staticmethod
    def _size(dfa: ByteDFA) -> int:
        return int(dfa.table.nbytes + dfa.accepting.nbytes)

    def get(self, key: tuple[Any, ...]) -> ByteDFA | None:
        """The DFA stored under ``key`` (marked most recently used), or None."""
        with self._lock:
            got = self._entries.get(key)
            if got is None:
                self._misses += 1
                return None
            self._entries.move_to_end(key)
            self._hits += 1
            return got

    def put(self, key: tuple[Any, ...], dfa: ByteDFA) -> None:
        """Store ``dfa`` under ``key``, evicting the least recently used entries past
        ``max_bytes``; a DFA over a quarter of ``max_bytes`` is not stored."""
        size = self._size(dfa)
        if size > self.max_bytes // 4:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= self._size(old)
            self._entries[key] = dfa
            self._bytes += size
            while self._bytes > self.max_bytes:
                _k, evicted = self._entries.popitem(last=False)
                self._bytes -= self._size(evicted)
                self._evictions += 1

    def stats(self) -> ProductCacheStats:
        with self._lock:
            return ProductCacheStats(self._hits, self._misses, len(self._entries), self._bytes, self._evictions)
