"""Device-resident pool of FSM mask rows with LRU eviction.

A compiled :class:`~structgen.fsm.TokenFSM` owns deduplicated mask rows (``int32
[ceil(V/32)]``).  The pool keeps each row on the sampling device once, uploaded on first use;
afterwards a step sends only one int32 row index per request (−1 = unconstrained) to the mask
kernel (:func:`structgen.kernels.apply_mask_rows`).  When the pool is full, the least recently
used rows not needed by the current step are overwritten.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from structgen.fsm import Cursor, GrammarCompileError, fill_rows
from structgen.runtime.staging import to_device


class MaskPoolStats(NamedTuple):
    """Counters since creation: row lookups that hit, rows uploaded, rows evicted, rows held."""

    hits: int
    uploads: int
    evictions: int
    resident: int


class MaskRowPool:
    """``rows_gpu``: int32 ``[capacity, ceil(vocab_size / 32)]`` on ``device`` (zeros beyond a
    grammar's own vocabulary).  ``capacity`` ≥ 1 rows; raises ``ValueError`` otherwise."""

    def __init__(self, capacity: int, vocab_size: int, device: torch.device) -> None:
        if capacity < 1:
            raise ValueError(f"mask pool capacity must be ≥ 1 row, got {capacity}")
        self.capacity = capacity
        self.words = (vocab_size + 31) // 32
        self.device = device
        self.rows_gpu = torch.zeros((capacity, self.words), dtype=torch.int32, device=device)  # [R, W]
        self._slots: OrderedDict[tuple[int, int], int] = OrderedDict()  # (fsm uid, row) -> slot, LRU first
        self._free = list(range(capacity - 1, -1, -1))
        self._hits = self._uploads = self._evictions = 0

    def stats(self) -> MaskPoolStats:
        return MaskPoolStats(self._hits, self._uploads, self._evictions, len(self._slots))

    def row_indices(
        self,
        cursors: Sequence[Cursor | None],
        dead: list[int] | None = None,
        tokens_left: Sequence[int | None] | None = None,
        narrowed: list[int] | None = None,
        failed: dict[int, GrammarCompileError] | None = None,
    ) -> torch.Tensor:
        """Pool slots for each cursor's current state (int32 ``[B]`` host tensor, −1 for None),
        uploading missing rows first (one batched host → device copy).  Where ``tokens_left[i]``
        is an int, cursor ``i`` gets its budget-restricted row (:meth:`Cursor.budget_row`)
        instead of the plain one; positions where that row allows fewer tokens than the plain
        one (the budget shaped the output) are appended to ``narrowed`` when given.  Positions
        whose row allows no token (a grammar dead end) are appended to ``dead`` when given.
        First-visit rows (and budget rows) of grammars served by row workers are computed
        there, the whole batch at once (:func:`~structgen.fsm.fill_rows`); the rest inline, on
        first visit.  A row whose computation hits its grammar's limits (a lazily built
        automaton past ``max_states`` or its time-out: :class:`GrammarCompileError`) is not
        looked up: the position gets −1 and, when ``failed`` is given, ``failed[i]`` the error,
        and is appended to ``dead`` (the caller ends that request; the others are served).
        Raises ``RuntimeError`` when one step needs more distinct rows than the pool holds."""
        lefts = [None] * len(cursors) if tokens_left is None else tokens_left
        fill_rows([(c.fsm, c.state, left) for c, left in zip(cursors, lefts) if c is not None and c.fsm.row_source is not None])
        out = np.full(len(cursors), -1, dtype=np.int32)
        missing: dict[tuple[int, int], list[int]] = {}
        sources: dict[tuple[int, int], np.ndarray] = {}
        slots = self._slots
        for i, cur in enumerate(cursors):
            if cur is None:
                continue
            fsm = cur.fsm
            left = None if tokens_left is None else tokens_left[i]
            try:
                r = fsm.mask_row_index(cur.state) if left is None else cur.budget_row_index(left)
                if left is not None and narrowed is not None and r != fsm.mask_row_index(cur.state):
                    narrowed.append(i)
            except GrammarCompileError as exc:  # this grammar's limits, met mid-output: its request ends
                if failed is not None:
                    failed[i] = exc
                if dead is not None:
                    dead.append(i)
                continue
            if dead is not None and fsm.row_is_empty(r):
                dead.append(i)
            key = (fsm.uid, r)
            slot = slots.get(key)
            if slot is not None:
                slots.move_to_end(key)
                out[i] = slot
                self._hits += 1
            else:
                missing.setdefault(key, []).append(i)
                sources[key] = fsm.row(r)
        if missing:
            self._upload(missing, sources, out)
        return torch.from_numpy(out)

    def _upload(self, missing: dict[tuple[int, int], list[int]], sources: dict[tuple[int, int], np.ndarray], out: np.ndarray) -> None:
        needed = len(missing)
        in_use = len(set(out[out >= 0].tolist()))
        if needed + in_use > self.capacity:
            raise RuntimeError(
                f"one step needs {needed + in_use} distinct mask rows but the pool holds {self.capacity}; raise mask_pool_rows"
            )
        staged = np.zeros((needed, self.words), dtype=np.int32)  # [M, W]
        new_slots = np.empty(needed, dtype=np.int64)
        for j, (key, rows) in enumerate(missing.items()):
            if self._free:
                slot = self._free.pop()
            else:  # least recently used first; rows hit in this step were moved to the end
                _old, slot = self._slots.popitem(last=False)
                self._evictions += 1
            self._slots[key] = slot
            src = sources[key]
            n = min(src.shape[0], self.words)
            staged[j, :n] = src[:n]
            new_slots[j] = slot
            out[rows] = slot
        self._uploads += needed
        dst = to_device(torch.from_numpy(new_slots), self.device)  # [M]
        self.rows_gpu[dst] = to_device(torch.from_numpy(staged), self.device)  # [M, W]
