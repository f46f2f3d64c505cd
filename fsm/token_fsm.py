"""Token-level FSM over a vocabulary: mask rows, forced strings, distances; its per-request
cursor and jump-forward are in :mod:`.cursor`.

A :class:`TokenFSM` is a byte DFA (``dfa.ByteDFA``) seen through a
:class:`~structgen.fsm.vocab.Vocabulary`: from DFA state ``s`` token ``t`` is allowed iff
walking ``t``'s bytes from ``s`` does not reach the dead state, and EOS is allowed iff ``s``
accepts.  Token-level states are DFA states.

Mask rows (``int32 [ceil(V/32)]``, bit ``t & 31`` of word ``t >> 5`` set when ``t`` is
allowed) are computed per state on first use by one walk of the vocabulary trie (a compiled
preorder scan, or a vectorized numpy walk where the C extension is not built; the lazy scheme
of xgrammar / llguidance rather than outlines-core's eager index, because an eager index over
a 128k vocabulary dominates compile time), deduplicated, and memoized: serving a state twice
costs a list lookup.  :meth:`TokenFSM.materialize` computes all of them.
"""

from __future__ import annotations

import itertools
import threading
import time
from bisect import bisect_left
from typing import Any

import numpy as np

from .budget_rows import BudgetRows
from .cursor import Cursor, JumpForward, prefix_successor
from .dfa import DEAD
from .lazy_dfa import LazyDFA
from .shared_tails import SharedTails
from .vocab import Vocabulary

_c_walk_bytes: Any
_c_any_live: Any
try:  # a token's bytes, and a sorted run of them, through a complete table (fsm/_trie_walk.c); optional
    from ._trie_walk import any_live as _c_any_live
    from ._trie_walk import walk_bytes as _c_walk_bytes
except ImportError:  # pragma: no cover - exercised when no C compiler was available at install
    _c_walk_bytes = _c_any_live = None

_FSM_UIDS = itertools.count(1)
# eager rows stop before the automaton holds this share of its state cap: the rest stays for
# the states requests reach lazily (a precompute that filled the cap would leave them none)
PRECOMPUTE_CAP_SHARE = 0.8


class TokenFSM:
    """Logically immutable token FSM; thread-safe; picklable (rows computed so far travel).

    Queries never change the language or the meaning of a state id; automaton states, mask
    rows and state→row entries are filled in on demand (under a lock).

    Attributes: ``dfa`` (:class:`LazyDFA`), ``vocab`` (:class:`Vocabulary`), ``initial``
    (int), ``mask_words`` (ceil(V/32)), ``uid`` (int, unique per live instance in this process;
    a device mask-row pool keys rows by ``(uid, row index)``).
    """

    def __init__(self, dfa: LazyDFA, vocab: Vocabulary) -> None:
        self.dfa = dfa
        self.vocab = vocab
        self.initial = dfa.initial
        self.mask_words = (vocab.size + 31) // 32
        self._state_to_row: dict[int, int] = {}
        self._rows: list[np.ndarray] = []
        self._row_bytes: list[bytes] = []
        self._row_index: dict[bytes, int] = {}
        self._row_empty: list[bool] = []
        self._rows_complete = False  # every token-reachable state has its row (precompute_rows)
        self.budgets = BudgetRows(self)  # rows cut to a token budget (max_tokens near)
        self._init_runtime()

    def _init_runtime(self) -> None:
        self.uid = next(_FSM_UIDS)
        self._lock = threading.RLock()
        self._byte_rows: dict[int, list[int]] = {}  # state -> next state per byte (advance fast path)
        self._eos = set(self.vocab.eos_token_ids)
        self._special = self.vocab.special_ids
        self._reached: np.ndarray | None = None  # uint8 [max_states] scratch for the trie walk
        self._tails: SharedTails | None = None  # first-visit rows' shared tails (_first_visit_tails)
        # (state k tokens back, those k tokens) -> jump-forward plan: requests of one grammar
        # meet the same seams again and again, and a plan costs a tokenizer call and mask scans
        self._jump_plans: dict[tuple[int, tuple[int, ...]], JumpForward | None] = {}
        # rows served by worker processes (fsm.row_workers): where they come from, and per state
        # the (parent state, token id) that first reached it, so a worker can find its own copy
        self.row_source: Any = None
        self._witness: dict[int, tuple[int, int]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            return {
                "dfa": self.dfa,
                "vocab": self.vocab,
                "initial": self.initial,
                "mask_words": self.mask_words,
                "_state_to_row": dict(self._state_to_row),
                "_row_bytes": list(self._row_bytes),  # the rows travel once, as bytes
                "_row_index": dict(self._row_index),
                "_row_empty": list(self._row_empty),
                "_rows_complete": self._rows_complete,
                "_budget_rows": dict(self.budgets.by_state),
            }

    def __setstate__(self, state: dict[str, Any]) -> None:
        budget_rows = state.pop("_budget_rows")
        self.__dict__.update(state)
        self.budgets = BudgetRows(self, budget_rows)
        self._rows = [np.frombuffer(b, dtype="<i4") for b in self._row_bytes]  # read-only views, no copy
        self._init_runtime()

    @property
    def num_states(self) -> int:
        """Automaton states discovered so far (the dead state 0 included)."""
        return self.dfa.num_states

    # ------------------------------------------------------------------ per-state queries

    def is_accepting(self, state: int) -> bool:
        return self.dfa.acc[state]

    def forced_bytes(self, state: int) -> bytes:
        """Bytes every accepted continuation from ``state`` starts with (b"" if none)."""
        with self._lock:
            return self.dfa.forced(state)

    def can_continue(self, state: int) -> bool:
        """Whether some non-empty byte string leads on from ``state`` (False: only EOS, if
        accepting, is left).  Pure query."""
        dfa = self.dfa
        if dfa.complete:
            return bool((dfa.table[state] != DEAD).any())
        with self._lock:
            return bool((dfa.expand(state) != DEAD).any())

    def _byte_row(self, state: int) -> list[int]:
        with self._lock:
            row = self._byte_rows.get(state)
            if row is None:
                row = self.dfa.expand(state)[self.dfa.class_of_byte].tolist()
                self._byte_rows[state] = row
            return row

    def next_state(self, state: int, token_id: int) -> int:
        """State after ``token_id``, or -1 when it is not allowed.  EOS in an accepting state
        returns ``state`` (the caller marks the sequence finished).  Pure query."""
        if token_id in self._special:
            return state if token_id in self._eos and self.dfa.acc[state] else -1
        if not 0 <= token_id < self.vocab.size:
            return -1
        data = self.vocab.token_bytes[token_id]
        if not data:
            return -1
        origin = state
        dfa = self.dfa
        if _c_walk_bytes is not None:  # compiled walks over the table, each unexpanded state met expanded in turn
            while (got := _c_walk_bytes(dfa.table, dfa.num_classes, dfa.class_of_byte, state, data)) < 0:
                with self._lock:
                    dfa.expand(-1 - got)
            if got == DEAD:
                return -1
            state = got
        else:  # the extension is not built: byte by byte
            rows = self._byte_rows
            for b in data:
                row = rows.get(state)
                if row is None:
                    row = self._byte_row(state)
                state = row[b]
                if state == DEAD:
                    return -1
        witness = self._witness
        if witness is not None and state not in witness:
            witness[state] = (origin, token_id)
        return state

    def extension_allowed(self, state: int, skip: int, lo: int, hi: int) -> bool:
        """Whether some token of ``vocab.sorted_order[1][lo:hi]`` (byte strings in sorted order,
        all sharing one prefix of ``skip`` bytes, none equal to it) continues live from ``state``,
        the state after that prefix: the question jump-forward's back-off asks of the tokens
        that strictly extend the last forced token.  Walks only the live part of that
        range, a dead byte skipping every string that shares the prefix up to it, so it costs
        far less than the mask row of the state before the prefix; one compiled scan of the run
        over the table, walked here instead when it meets a state not expanded yet (never in a
        complete table).  Pure query."""
        dfa = self.dfa
        if _c_any_live is not None:
            flat, offsets = self.vocab.sorted_flat
            got = _c_any_live(dfa.table, dfa.num_classes, dfa.class_of_byte, state, skip, flat, offsets, lo, hi)
            if got >= 0:
                return bool(got)
            assert not dfa.complete, "a complete table has no unexpanded state"
        sorted_bytes = self.vocab.sorted_order[1]
        i = lo
        while i < hi:
            data = sorted_bytes[i]
            st = state
            for k in range(skip, len(data)):
                st = self._byte_row(st)[data[k]]
                if st == DEAD:
                    succ = prefix_successor(data[: k + 1])
                    i = hi if succ is None else bisect_left(sorted_bytes, succ, i + 1, hi)
                    break
            else:
                return True
        return False

    def track_witnesses(self) -> None:
        """From now on remember, for every state :meth:`next_state` reaches, the (state, token
        id) it was first reached from, so :meth:`witness_path` can spell a token path to it
        (what a worker process holding its own copy of this FSM replays: row workers)."""
        with self._lock:
            if self._witness is None:
                self._witness = {self.initial: (-1, -1)}

    def witness_path(self, state: int, known: set[int]) -> list[tuple[int, int, int]] | None:
        """``[(state, parent state, token id), ...]``, oldest first: a token path from a state
        in ``known`` (or the initial state) to ``state``, each step as :meth:`next_state` first
        took it; ``[]`` when ``state`` is already known.  None when no path was recorded
        (:meth:`track_witnesses` not on, or the state was found another way)."""
        witness = self._witness
        if witness is None:
            return None
        path: list[tuple[int, int, int]] = []
        while state not in known and state != self.initial:
            step = witness.get(state)
            if step is None:
                return None
            path.append((state, step[0], step[1]))
            state = step[0]
        path.reverse()
        return path

    def has_row(self, state: int) -> bool:
        """Whether ``state``'s mask row is computed (pure query)."""
        return state in self._state_to_row

    def put_row(self, state: int, row: bytes) -> None:
        """Record ``state``'s mask row computed elsewhere: ``row`` the ``int32 [ceil(V/32)]``
        little-endian bytes of an equivalent state of an identical FSM (EOS included), e.g.
        from a row worker.  A state whose row is already known keeps it.  Raises
        ``ValueError`` for a row of the wrong length."""
        if len(row) != self.mask_words * 4:
            raise ValueError(f"a mask row has {self.mask_words * 4} bytes, got {len(row)}")
        with self._lock:
            if state not in self._state_to_row:
                self._state_to_row[state] = self._store_key(bytes(row))

    def mask_row_index(self, state: int) -> int:
        """Index of ``state``'s row in :meth:`mask_rows`, computing it on first use."""
        r = self._state_to_row.get(state)
        if r is None:
            self._compute_rows(np.array([state], dtype=np.int64))
            r = self._state_to_row[state]
        return r

    def mask_row(self, state: int) -> np.ndarray:
        """``int32 [ceil(V/32)]`` token bitmask of ``state`` (read-only view)."""
        return self._rows[self.mask_row_index(state)]

    def row(self, row_index: int) -> np.ndarray:
        """Computed row ``row_index`` (``int32 [ceil(V/32)]``, read-only view); raises
        ``IndexError`` for a row not computed."""
        return self._rows[row_index]

    def allowed_token_ids(self, state: int) -> np.ndarray:
        """Sorted ``int64`` ids allowed in ``state`` (EOS included when accepting)."""
        row = self.mask_row(state)
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[: self.vocab.size]
        return np.flatnonzero(bits)

    def mask_rows(self) -> np.ndarray:
        """All rows computed so far, ``int32 [R, ceil(V/32)]`` (deduplicated)."""
        with self._lock:
            if not self._rows:
                return np.zeros((0, self.mask_words), dtype=np.int32)
            return np.stack(self._rows)

    @property
    def num_rows(self) -> int:
        return len(self._rows)

    def state_to_row(self) -> np.ndarray:
        """``int32 [S]`` row index per discovered state, -1 where not computed yet (copy)."""
        out = np.full(self.num_states, -1, dtype=np.int32)
        with self._lock:
            for s, r in self._state_to_row.items():
                out[s] = r
        return out

    def _compute_rows(self, states: np.ndarray) -> None:
        """Compute (and deduplicate) the mask rows of ``states`` (``int64 [K]``) not computed yet:
        through this grammar's :class:`SharedTails` where the vocabulary spells every byte and
        the compiled walk is built (rows whose first bytes lead to a state whose tails an
        earlier row bought copy them), else one trie walk each."""
        with self._lock:
            tails = self._first_visit_tails()
            for s in states.tolist():
                if s not in self._state_to_row:
                    plan = self.dfa.counted_row(s)
                    if plan is not None:  # a bounded string's position: the relaxed row, cut by arithmetic
                        relaxed = self._walked_row(plan.relaxed, tails)
                        bits = self._rows[relaxed].view(np.uint32) & self.vocab.char_needs.within(plan.automaton, plan.room)  # [W]
                        self._state_to_row[s] = self._store_bits(bits, False)  # EOS bits come with the relaxed row
                        continue
                    rep = self.dfa.row_representative(s, self.vocab.max_token_bytes)  # a state with the same row
                    self._state_to_row[s] = self._walked_row(rep, tails)

    def _walked_row(self, state: int, tails: SharedTails | None) -> int:
        """Index of ``state``'s row, walked (through ``tails`` where given) if not known yet.
        Caller holds the lock."""
        if state not in self._state_to_row:
            if tails is not None:
                self._state_to_row[state] = tails.row_index(state)
            else:
                self._store_row(state, self.vocab.trie.mask_bits(self.dfa, state))
        return self._state_to_row[state]

    def _first_visit_tails(self) -> SharedTails | None:
        """This grammar's first-visit :class:`SharedTails` (made on first use; not pickled), or
        None where it does not apply.  Caller holds the lock."""
        if self._tails is None and self.vocab.trie.use_compiled and self.vocab.covers_every_byte:
            self._tails = SharedTails(self)
        return self._tails

    def _scratch(self) -> np.ndarray:
        """The zero-filled ``reached`` buffer of the trie walk (caller holds the lock and
        clears what it set, through :meth:`_note_successors`)."""
        if self._reached is None or len(self._reached) < self.dfa.max_states:
            self._reached = np.zeros(self.dfa.max_states, dtype=np.uint8)
        return self._reached

    def _note_successors(self, state: int, reached: np.ndarray) -> list[int]:
        """Read and clear ``reached``; returns the successor states of ``state`` (dead state
        excluded).  Caller holds the lock."""
        succ = np.flatnonzero(reached[: self.dfa.num_states])  # every state a token ends in is discovered
        reached[succ] = 0
        return [t for t in succ.tolist() if t != DEAD]

    def _store_row(self, state: int, bits: np.ndarray) -> None:
        """Record ``state``'s row from its trie bits (``uint32 [W]``, EOS added here); caller holds the lock."""
        self._state_to_row[state] = self._store_bits(bits, self.dfa.acc[state])

    def _store_bits(self, bits: np.ndarray, accepting: bool) -> int:
        """Index of the deduplicated row ``bits`` (``uint32 [W]``, EOS added when ``accepting``),
        appended if new; caller holds the lock."""
        if accepting:
            for t in self.vocab.eos_token_ids:
                bits[t >> 5] |= np.uint32(1 << (t & 31))
        return self._store_key(bits.tobytes())

    def _store_key(self, key: bytes) -> int:
        """Index of the deduplicated row whose little-endian bytes are ``key``, appended if new
        (the row is a read-only view of ``key``: one copy of its bytes); caller holds the lock."""
        r = self._row_index.get(key)
        if r is None:
            r = len(self._rows)
            row = np.frombuffer(key, dtype="<i4")  # [W], read-only
            self._rows.append(row)
            self._row_bytes.append(key)
            self._row_empty.append(not row.any())
            self._row_index[key] = r
        return r

    def row_is_empty(self, row_index: int) -> bool:
        """Whether computed row ``row_index`` allows no token at all (a grammar dead end:
        neither EOS nor any token continues the state).  Pure query."""
        return self._row_empty[row_index]

    def row_allows(self, row_index: int, token_id: int) -> bool:
        """Bit test on a computed row (pure query)."""
        return bool(self._row_bytes[row_index][token_id >> 3] >> (token_id & 7) & 1)

    # ------------------------------------------------------------------ distances

    def distance(self, state: int) -> int:
        """Bytes in the shortest accepted continuation from ``state`` (0 when accepting), exact
        (:meth:`LazyDFA.distance_to_accept`).  When the vocabulary has a token for every single
        byte (:attr:`Vocabulary.covers_every_byte`) it bounds the tokens still needed, EOS
        aside.  Pure query; raises ``ValueError`` for an undiscovered state."""
        with self._lock:
            return self.dfa.distance_to_accept(state)

    def within_distance(self, state: int, limit: int) -> bool:
        """Whether :meth:`distance` of ``state`` is at most ``limit``: settled by the
        automaton's bound on every state's distance (:attr:`LazyDFA.distance_bound`) when that
        bound is within ``limit``, at no cost; else exact (which, on a cold grammar, may build
        automaton states and update shortest paths).  Pure query."""
        bound = self.distance_bound()
        if bound is not None and bound <= limit:
            return True
        return self.distance(state) <= limit

    def distance_bound(self) -> int | None:
        """The automaton's bound on every state's :meth:`distance` in bytes
        (:attr:`LazyDFA.distance_bound`, worked out under the lock the first time it is asked
        for; None where none is known)."""
        with self._lock:
            return self.dfa.distance_bound

    # ------------------------------------------------------------------ whole-FSM views

    def materialize(self, max_states: int | None = None) -> int:
        """Compute mask rows for every state reachable by tokens from the initial state.

        Returns the number of token-reachable states.  Raises ``RuntimeError`` if more than
        ``max_states`` are reachable (the automaton's own cap raises ``GrammarCompileError``).
        """
        done, complete = self.precompute_rows(max_states=max_states)
        if not complete:
            raise RuntimeError(f"more than max_states={max_states} token-reachable states")
        return done

    def complete_dfa(self, deadline: float, max_entries: int) -> bool:
        """Expand the whole automaton now, within ``deadline`` (``time.perf_counter()``
        seconds) and a table of at most ``max_entries`` transitions (:meth:`LazyDFA.complete_ahead`:
        when it all fits, the NFA is dropped and nothing is expanded again), e.g. on a compile
        process before this FSM is shipped, so neither the engine nor a row worker expands
        states while serving.  Returns whether it completed.  Raises ``ValueError`` for a
        negative ``max_entries``."""
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}")
        with self._lock:
            return self.dfa.complete_ahead(deadline, max_entries // max(1, self.dfa.num_classes))

    def build_fragments(self, deadline: float, max_nfa_states: int | None = None) -> int:
        """Build the automaton's pending NFA fragments now (:meth:`LazyDFA.build_fragments`),
        e.g. on a compile process before this FSM is shipped.  Returns the fragments built."""
        with self._lock:
            return self.dfa.build_fragments(deadline, max_nfa_states)

    def precompute_rows(self, *, max_states: int | None = None, deadline: float | None = None) -> tuple[int, bool]:
        """Eagerly compute the mask rows of token-reachable states, breadth-first from the
        initial state (the precomputed-mask design of the compressed FSM: after this, serving
        any of these states costs a row lookup, never a trie walk).

        Stops early, keeping every row computed so far, once ``max_states`` states are done or
        ``time.perf_counter()`` passes ``deadline`` (seconds); rows not computed stay lazy (after
        a deadline stop, so do the automaton's distances to acceptance: the time is spent).
        Returns ``(states done, complete)``: ``complete`` is True when every token-reachable
        state has its row.  Thread-safe; the language is unchanged.  Raises ``ValueError`` for a
        negative ``max_states``.

        With the compiled walk and a vocabulary that spells every byte (byte-level BPE,
        SentencePiece with byte fallback), each state is a :class:`_SharedTails` step, and the
        search stops (incomplete) before the automaton holds ``PRECOMPUTE_CAP_SHARE`` of its
        state cap; otherwise each state is walked on its own (:meth:`_walk_step`).
        """
        if max_states is not None and max_states < 0:
            raise ValueError(f"max_states must be >= 0, got {max_states}")
        if self._rows_complete:
            return len(self._state_to_row), True
        shared = self.vocab.trie.use_compiled and self.vocab.covers_every_byte
        step = SharedTails(self).step if shared else self._walk_step
        dfa = self.dfa
        seen = {self.initial}
        frontier = [self.initial]
        done = 0
        while frontier:
            nxt: list[int] = []
            for s in frontier:
                if deadline is not None and time.perf_counter() > deadline:
                    return done, False  # out of time: distances too are left to first use
                if (max_states is not None and done >= max_states) or (
                    shared and dfa.num_states + dfa.num_classes > PRECOMPUTE_CAP_SHARE * dfa.max_states
                ):
                    with self._lock:
                        dfa.prepare_distances()
                    return done, False
                with self._lock:
                    succ = step(s)
                done += 1
                for t in succ:
                    if t not in seen:
                        seen.add(t)
                        nxt.append(t)
            frontier = nxt
        with self._lock:
            self._rows_complete = True
            dfa.prepare_distances()  # so budget rows later need no shortest-path search
        return done, True

    def _walk_step(self, state: int) -> list[int]:
        """One state of :meth:`precompute_rows` by its own trie walk, which also records where
        tokens end: its row stored, its token successors returned.  Caller holds the lock."""
        reached = self._scratch()
        bits = self.vocab.trie.mask_bits(self.dfa, state, reached=reached)
        if state not in self._state_to_row:
            self._store_row(state, bits)
        return self._note_successors(state, reached)

    @property
    def rows_complete(self) -> bool:
        """Whether :meth:`precompute_rows` has computed every token-reachable state's row."""
        return self._rows_complete

    def cursor(self) -> Cursor:
        """A fresh per-request cursor at the initial state."""
        return Cursor(self)

    def __repr__(self) -> str:
        return f"TokenFSM(states={self.num_states}, rows={len(self._rows)}, vocab={self.vocab!r})"
