"""``token_csr``: every token transition of a :class:`~.token_fsm.TokenFSM` in CSR form (an
outlines-style index, for inspection and export)."""

from __future__ import annotations

import numpy as np

from .dfa import DEAD
from .token_fsm import TokenFSM


def token_csr(fsm: TokenFSM) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Token transitions of all token-reachable states of ``fsm`` in CSR form.

    Returns ``(states int64 [S'], indptr int64 [S'+1], token_ids int32 [E], next_states int32
    [E])``; ids within a state are sorted; EOS is not included (it ends the sequence).
    Materializes the FSM (:meth:`TokenFSM.materialize`, whose ``RuntimeError`` it raises past a
    cap); memory is O(E).
    """
    fsm.materialize()
    states = np.flatnonzero(fsm.state_to_row() >= 0)  # [S'] token-reachable states, ascending
    indptr = [0]
    toks: list[np.ndarray] = []
    nexts: list[np.ndarray] = []
    for s in states.tolist():
        with fsm._lock:  # the trie walk may expand automaton states
            ends = fsm.vocab.trie.end_states(fsm.dfa, np.array([s], dtype=np.int64))[0]  # [V] DEAD: not allowed
        ids = np.flatnonzero(ends != DEAD).astype(np.int32)  # [E_s]
        toks.append(ids)
        nexts.append(ends[ids].astype(np.int32))
        indptr.append(indptr[-1] + len(ids))
    return (
        states.astype(np.int64),
        np.array(indptr, dtype=np.int64),
        np.concatenate(toks) if toks else np.zeros(0, np.int32),
        np.concatenate(nexts) if nexts else np.zeros(0, np.int32),
    )
