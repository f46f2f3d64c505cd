"""``CharNeeds``: the mask rows of a plain length product's pairs by arithmetic instead of trie
walks.

A string with ``maxLength`` and no ``pattern`` or ``format`` is a plain length product
(:class:`~.length_product.CountedAutomaton` with ``plain``): any JSON string characters, at
most ``hi`` of them.  On a character boundary with ``c`` characters read, a token is allowed
exactly when the same state with no bound (the *relaxed* pair) allows it and the characters
the token needs fit in the ``hi − c`` left.  A token's need depends on its bytes alone: the
characters it completes before it leaves the string (its first byte that no string character
continues, the closing quote), or, for a token that stays inside, the characters it completes
plus one when it stops inside a character (an escape or a UTF-8 sequence).  So one walk of
the relaxed state's row serves every count, each count's row being that row masked with "need
≤ characters left": a vector comparison instead of a trie walk per character position, which
made every position of a bounded string a new walk.  The same reading of a bounded lexeme
against a precomputed token table is how llguidance's lexer slices serve string bodies.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .length_product import CountedAutomaton

NEVER = np.iinfo(np.int32).max  # the need of a token that cannot be read from a boundary at all
WITHIN_CACHE = 512  # "need ≤ room" bitmasks kept per vocabulary (16 KB each for a 128k vocabulary)


class CharNeeds:
    """Per vocabulary: each token's character need under a plain automaton (one table per
    automaton shape; every plain automaton has the same shape, so one per process in
    practice), and the bitmasks of the tokens whose need fits a room.  Never pickled (the
    vocabulary rebuilds it).  Thread-safety: callers hold their grammar's lock; two grammars
    computing one table at once each compute the same array."""

    def __init__(self, token_bytes: Sequence[bytes], special_ids: frozenset[int]) -> None:
        self.size = len(token_bytes)
        self.words = (self.size + 31) // 32
        self._lengths = np.array([len(b) for b in token_bytes], dtype=np.int64)  # [V]
        self._offsets = np.zeros(self.size, dtype=np.int64)  # [V]
        np.cumsum(self._lengths[:-1], out=self._offsets[1:])
        self._flat = np.frombuffer(b"".join(token_bytes), dtype=np.uint8)
        self._special = np.array(sorted(special_ids), dtype=np.int64)
        self._needs: dict[tuple[object, ...], tuple[np.ndarray, int]] = {}  # (shape, skip) -> (needs, largest finite need)
        self._within: OrderedDict[tuple[object, ...], np.ndarray] = OrderedDict()

    def needs(self, automaton: CountedAutomaton) -> np.ndarray:
        """``int32 [V]``: the characters each token needs from ``automaton``'s boundary (its
        initial state): the characters completed before the first byte no character
        continues when the automaton accepts there (else :data:`NEVER`), or, for a token read
        whole, those completed plus the fewest still needed to accept (one inside a
        character).  Special tokens need 0.  Read-only; cached per automaton shape."""
        return self._table(automaton)[0]

    def within(self, automaton: CountedAutomaton, room: int) -> np.ndarray:
        """``uint32 [ceil(V/32)]``: the tokens whose :meth:`needs` is at most ``room`` (special
        tokens always set, so a row's EOS bits pass).  Read-only; kept in an LRU (every room
        past the largest finite need shares one entry)."""
        needs, top = self._table(automaton)
        return self._fits((automaton.shape_key(), min(room, top)), needs)

    def prepare(self, automaton: CountedAutomaton) -> None:
        """Compute the need tables of ``automaton``'s shape (the tokens' and their tails') now."""
        self._table(automaton)
        self._table(automaton, skip=1)

    def tail_within(self, automaton: CountedAutomaton, room: int, order: np.ndarray) -> np.ndarray:
        """``uint32 [ceil(K/32)]`` over the tokens ``order`` (``int32 [K]`` token ids, e.g. the
        trie order's ``k_token``): those whose *tail*, the bytes after the first, needs at most
        ``room`` characters (:meth:`needs` of the tail as a byte string; an empty tail needs
        none).  Read-only; kept in the same LRU as :meth:`within` (one order per vocabulary in
        practice: the key holds its length, not its contents)."""
        needs, top = self._table(automaton, skip=1)
        return self._fits((automaton.shape_key(), min(room, top), "tail", len(order)), needs[order])

    def _fits(self, key: tuple[object, ...], needs: np.ndarray) -> np.ndarray:
        """The LRU-kept bitmask of ``needs <= room`` (``room``: ``key[1]``) over ``needs``'s order."""
        got = self._within.get(key)
        if got is not None:
            self._within.move_to_end(key)
            return got
        n = len(needs)
        allowed = np.zeros((n + 31) // 32 * 32, dtype=bool)  # [W * 32]
        allowed[:n] = needs <= key[1]
        got = np.packbits(allowed, bitorder="little").view("<u4")
        got.setflags(write=False)
        self._within[key] = got
        if len(self._within) > WITHIN_CACHE:
            self._within.popitem(last=False)
        return got

    def _table(self, automaton: CountedAutomaton, skip: int = 0) -> tuple[np.ndarray, int]:
        """(:meth:`needs` of each token less its first ``skip`` bytes, the largest finite
        need), computed once per automaton shape and ``skip``."""
        key = (*automaton.shape_key(), skip)
        got = self._needs.get(key)
        if got is None:
            needs = self._compute(automaton, skip)
            needs.setflags(write=False)
            got = self._needs[key] = (needs, int(needs[needs < NEVER].max(initial=0)))
        return got

    def _compute(self, automaton: CountedAutomaton, skip: int = 0) -> np.ndarray:
        """Run every token, less its first ``skip`` bytes, through ``automaton`` from its
        boundary, one byte position at a time (all tokens at once per position)."""
        n = automaton.num_states
        nxt = np.zeros((n, 256), dtype=np.int32)  # [S, 256] next state, 0 dead
        inc = np.zeros((n, 256), dtype=np.int32)  # [S, 256] 1 where the byte completes a character
        for p, runs in enumerate(automaton.edges):
            for lo, hi, target, completes in runs:
                nxt[p, lo : hi + 1] = target
                inc[p, lo : hi + 1] = completes
        accepting = np.array(automaton.accepting, dtype=bool)  # [S]
        min_chars = np.array(automaton.min_chars, dtype=np.int64)  # [S]
        state = np.full(self.size, automaton.initial, dtype=np.int32)  # [V]
        chars = np.zeros(self.size, dtype=np.int64)  # [V]
        need = np.full(self.size, NEVER, dtype=np.int64)  # [V]
        lengths = np.maximum(self._lengths - skip, 0)  # [V] the bytes read
        reading = lengths > 0  # [V] tokens still inside the string, bytes left to read
        inside = np.ones(self.size, dtype=bool)  # [V] tokens that never left the string (an empty one included)
        for k in range(int(lengths.max(initial=0))):
            idx = np.flatnonzero(reading & (lengths > k))  # [K]
            if not idx.size:
                break
            st = state[idx]  # [K]
            b = self._flat[self._offsets[idx] + skip + k]  # [K]
            to = nxt[st, b]  # [K]
            out = to == 0  # [K] the byte leaves the string here
            left = idx[out]
            need[left] = np.where(accepting[st[out]], chars[left], NEVER)
            reading[left] = False
            inside[left] = False
            stay = idx[~out]
            chars[stay] += inc[st[~out], b[~out]]
            state[stay] = to[~out]
        whole = np.flatnonzero(inside)
        need[whole] = np.minimum(chars[whole] + min_chars[state[whole]], NEVER)
        need[self._special] = 0
        return need.astype(np.int32)
