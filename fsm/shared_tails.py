"""``SharedTails``: the rows of one precompute pass over a vocabulary that spells every byte,
with the tails of shared first-byte targets walked once (see the class)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .dfa import DEAD
from .trie import LOOP_SKIP_MIN_BYTES
from .trie import copy_bit_ranges as _copy_ranges

if TYPE_CHECKING:
    from .token_fsm import TokenFSM

# SharedTails walks a target state's tails (about one full trie walk) once the rows
# leading to it have asked for this many full tries' worth of first-byte subtrees (rent, then buy)
SHARED_TAIL_AFTER_TRIES = 0.5


class SharedTails:
    """The rows of one :meth:`TokenFSM.precompute_rows` call for vocabularies that spell every
    byte, computed with the compiled walk.

    Every byte string is then a token sequence, so the token-reachable states are the
    byte-reachable ones: the search reads a state's successors from its byte-automaton row,
    with no need to record where tokens end.  Rows are built in the trie's token order
    (:attr:`VocabTrie.trie_order`), where the tokens starting with one byte form one range.
    A state's row is, per first byte ``b``, the tokens whose tail ``q = δ(s, b)`` accepts.
    Many states share their ``q`` for many bytes: a property name that may still become a
    declared one sends most letters to the same free-key state.  The tails of such a ``q``
    (every first byte at once: one walk, about a full row's cost) are kept for the call and
    copied range by range into each row that needs them; the other first bytes are walked.
    A ``q`` gets its tails once the rows sent to it have asked for ``SHARED_TAIL_AFTER_TRIES``
    full tries' worth of first-byte subtrees (pay per use until that adds up to the price of
    buying).  Rows are deduplicated in trie order and only distinct ones are turned into token
    order.  A state looping on at least ``LOOP_SKIP_MIN_BYTES`` bytes whose tails are not kept
    takes its own :meth:`VocabTrie.mask_bits` walk instead, which skips the looping subtrees.
    Results equal :meth:`TokenFSM._walk_step`'s (tests compare them).
    """

    def __init__(self, fsm: TokenFSM) -> None:
        self.fsm = fsm
        self.trie = fsm.vocab.trie
        self.words = (len(self.trie.trie_order.k_token) + 31) // 32
        with fsm._lock:
            self.ranges, self.nodes = self.trie.class_ranges(np.asarray(fsm.dfa.class_of_byte), fsm.dfa.num_classes)
        self.tails: dict[int, np.ndarray] = {}  # q -> trie-order tokens whose tail q accepts
        self.asked: dict[int, int] = {}  # q -> trie nodes under the first bytes rows sent to q so far
        self.buy = SHARED_TAIL_AFTER_TRIES * self.trie.num_nodes
        self.by_key: dict[bytes, int] = {}  # trie-order row + accepting flag -> row index

    def step(self, state: int) -> list[int]:
        """Store ``state``'s row; return its successor states.  Caller holds the FSM's lock."""
        fsm, dfa = self.fsm, self.fsm.dfa
        row = np.array(dfa.expand(state), dtype=np.int32)  # [C] next state per byte class
        if state not in fsm._state_to_row:
            fsm._state_to_row[state] = self._row(state, row)
        return [t for t in set(row.tolist()) if t != DEAD]

    def _row(self, state: int, row: np.ndarray) -> int:
        fsm, trie = self.fsm, self.trie
        if state not in self.tails and int(np.count_nonzero(row[fsm.dfa.class_of_byte] == state)) >= LOOP_SKIP_MIN_BYTES:
            # a state looping on many bytes: its own walk skips their subtrees (pre-set loop tokens)
            return fsm._store_bits(trie.mask_bits(fsm.dfa, state), fsm.dfa.acc[state])
        bits = np.zeros(self.words, dtype=np.uint32)  # [ceil(K/32)] trie order
        walk_row = row.copy()
        classes_of: dict[int, list[int]] = {}
        live = np.flatnonzero(row)  # [L] classes not leading to the dead state (0)
        for c, q in zip(live.tolist(), row[live].tolist()):
            classes_of.setdefault(q, []).append(c)
        for q, classes in classes_of.items():
            tail = self.tails.get(q)
            if tail is None:
                self.asked[q] = self.asked.get(q, 0) + sum(self.nodes[c] for c in classes)
                if self.asked[q] < self.buy:
                    continue
                tail = np.zeros(self.words, dtype=np.uint32)
                trie.walk_trie_order(fsm.dfa, q, tail, np.full(len(row), q, dtype=np.int32))
                self.tails[q] = tail
            _copy_ranges(bits, tail, np.concatenate([self.ranges[c] for c in classes]))
            walk_row[classes] = DEAD
        if walk_row.any():
            trie.walk_trie_order(fsm.dfa, state, bits, walk_row)
        accepting = fsm.dfa.acc[state]
        key = bits.tobytes() + (b"\1" if accepting else b"\0")
        r = self.by_key.get(key)
        if r is None:
            r = fsm._store_bits(trie.to_token_order(bits), accepting)
            self.by_key[key] = r
        return r
