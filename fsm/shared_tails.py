"""``SharedTails``: rows over a vocabulary that spells every byte (one precompute pass, or a
grammar's first-visit rows), with the tails of shared first-byte targets walked once (see the
class)."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np

from .dfa import DEAD
from .trie import TrieOrder
from .trie import copy_bit_ranges as _copy_ranges
from .trie_bodies import LOOP_SKIP_MIN_BYTES

if TYPE_CHECKING:
    from .token_fsm import TokenFSM

# SharedTails walks a target state's tails (about one full trie walk) once the rows
# leading to it have asked for this many full tries' worth of first-byte subtrees (rent, then buy)
SHARED_TAIL_AFTER_TRIES = 0.5
# a row whose live first bytes hold fewer trie nodes than this many full tries' worth is walked
# at once: no tails to copy could save more than the bookkeeping costs
SMALL_ROW_TRIES = 0.02


class SharedTails:
    """Rows for vocabularies that spell every byte, computed with the compiled walk: those of
    one :meth:`TokenFSM.precompute_rows` call, or a grammar's first-visit rows.

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
    buying).  A row that copies no tails is one token-order walk; the others are deduplicated
    in trie order and only distinct ones are turned into token order.  A state looping on at
    least ``LOOP_SKIP_MIN_BYTES`` bytes whose tails are not kept takes its own
    :meth:`VocabTrie.mask_bits` walk instead, which skips the looping subtrees.  Results equal
    :meth:`TokenFSM._walk_step`'s (tests compare them).  :meth:`TokenFSM.mask_row_index` keeps
    one per grammar for first-visit rows (:meth:`row_index`), so the tails outlive one call.
    """

    def __init__(self, fsm: TokenFSM) -> None:
        # a weak reference: the grammar keeps its SharedTails, and a cycle between them would
        # leave every grammar to the cyclic collector, which never frees what gc.freeze froze
        # (the engine freezes a grammar once it serves, so an evicted one would never go)
        self._fsm = weakref.ref(fsm)
        self.trie = fsm.vocab.trie
        self.words = (len(self.trie.trie_order.k_token) + 31) // 32
        with fsm._lock:
            self.ranges, self.nodes = class_ranges(self.trie.trie_order, np.asarray(fsm.dfa.class_of_byte), fsm.dfa.num_classes)
        self.tails: dict[int, np.ndarray] = {}  # q -> trie-order tokens whose tail q accepts
        self.asked: dict[int, int] = {}  # q -> trie nodes under the first bytes rows sent to q so far
        self.buy = SHARED_TAIL_AFTER_TRIES * self.trie.num_nodes
        self.small = SMALL_ROW_TRIES * self.trie.num_nodes
        self.by_key: dict[bytes, int] = {}  # trie-order row + accepting flag -> row index

    @property
    def fsm(self) -> TokenFSM:
        """The grammar these rows are for (alive while its methods run: it owns this object)."""
        fsm = self._fsm()
        assert fsm is not None, "SharedTails outlived its TokenFSM"
        return fsm

    def step(self, state: int) -> list[int]:
        """Store ``state``'s row; return its successor states.  Caller holds the FSM's lock."""
        fsm = self.fsm
        targets = fsm.dfa.expand(state)  # [C] next state per byte class
        if state not in fsm._state_to_row:
            fsm._state_to_row[state] = self._row(state, targets)
        return [t for t in set(targets.tolist()) if t != DEAD]

    def row_index(self, state: int) -> int:
        """Index of ``state``'s row, computed (and deduplicated) here without touching the
        FSM's state map: the first-visit path of :meth:`TokenFSM.mask_row_index`, which keeps
        one of these per grammar so that later rows copy the tails earlier ones bought.
        Caller holds the FSM's lock."""
        return self._row(state, self.fsm.dfa.expand(state))

    def _walk(self, state: int) -> int:
        """``state``'s row by its own token-order walk (which skips looping subtrees)."""
        fsm = self.fsm
        return fsm._store_bits(self.trie.mask_bits(fsm.dfa, state), fsm.dfa.acc[state])

    def _tails_of(self, q: int) -> np.ndarray:
        """``q``'s tails (kept): per first byte, the trie-order tokens whose tail ``q`` accepts."""
        tail = self.tails.get(q)
        if tail is None:
            fsm = self.fsm
            tail = self.trie.loop_tails(fsm.dfa, q)  # a loop state: its body's subtrees skipped
            if tail is None:
                tail = np.zeros(self.words, dtype=np.uint32)
                self.trie.walk_trie_order(fsm.dfa, q, tail, np.full(fsm.dfa.num_classes, q, dtype=np.int32))
            self.tails[q] = tail
        return tail

    def _counted_tails(self, q: int) -> np.ndarray | None:
        """The tails of a bounded string's position ``q`` by arithmetic (kept), or None for any
        other state: those of its relaxed state less the tails needing more characters than
        are left (:meth:`~.counted_rows.CharNeeds.tail_within`), as its own row follows from
        the relaxed row (:meth:`~.lazy_dfa.LazyDFA.counted_row`; a token's need depends on its
        bytes alone, so a tail's does too).  Cheap: bought at once."""
        fsm = self.fsm
        plan = fsm.dfa.counted_row(q)
        if plan is None:
            return None
        cut = fsm.vocab.char_needs.tail_within(plan.automaton, plan.room, self.trie.trie_order.k_token)  # [ceil(K/32)]
        tail = self.tails[q] = self._tails_of(plan.relaxed) & cut
        return tail

    def _row(self, state: int, targets: np.ndarray) -> int:
        """Index of ``state``'s row; ``targets``: its next state per byte class (``int32 [C]``)."""
        if int(self.nodes @ (targets != DEAD)) < self.small:  # nothing worth copying
            return self._walk(state)
        fsm, trie = self.fsm, self.trie
        row = np.array(targets, dtype=np.int32)  # [C] a copy
        if state not in self.tails and int(np.count_nonzero(row[fsm.dfa.class_of_byte] == state)) >= LOOP_SKIP_MIN_BYTES:
            return self._walk(state)  # a state looping on many bytes: its walk skips their subtrees
        live = np.flatnonzero(row)  # [L] classes not leading to the dead state (0)
        classes_of: dict[int, list[int]] = {}
        for c, q in zip(live.tolist(), row[live].tolist()):
            classes_of.setdefault(q, []).append(c)
        kept: list[tuple[np.ndarray, list[int]]] = []  # (tails, the classes that copy them)
        for q, classes in classes_of.items():
            tail = self.tails.get(q)
            if tail is None:
                tail = self._counted_tails(q)
            if tail is None:
                self.asked[q] = self.asked.get(q, 0) + int(self.nodes[classes].sum())
                if self.asked[q] < self.buy:
                    continue
                tail = self._tails_of(q)
            kept.append((tail, classes))
        if not kept:  # nothing to copy: one walk in token order (no trie-order round trip)
            return self._walk(state)
        bits = np.zeros(self.words, dtype=np.uint32)  # [ceil(K/32)] trie order
        walk_row = row.copy()
        for tail, classes in kept:
            _copy_ranges(bits, tail, np.array([r for c in classes for r in self.ranges[c]], dtype=np.int64).reshape(-1, 2))
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


def class_ranges(order: TrieOrder, class_of_byte: np.ndarray, num_classes: int) -> tuple[list[list[tuple[int, int]]], np.ndarray]:
    """Per byte class of ``class_of_byte`` (``int32 [256]``), the trie-order token ranges
    ``[lo, hi)`` of the tokens whose first byte is in the class, and ``int64 [C]`` the number of
    trie nodes under those first bytes."""
    out: list[list[tuple[int, int]]] = [[] for _ in range(num_classes)]
    nodes = np.zeros(num_classes, dtype=np.int64)  # [C]
    first = np.flatnonzero(order.root_hi > order.root_lo)  # [F] the first bytes of some token
    spans = zip(order.root_lo[first].tolist(), order.root_hi[first].tolist())
    for c, span, n in zip(class_of_byte[first].tolist(), spans, order.root_nodes[first].tolist()):
        out[c].append(span)
        nodes[c] += n
    return out, nodes
