"""Body automata for the trie walk's subtree skip (:meth:`~.trie.VocabTrie.mask_bits`): which
bytes make a state's *body* (the bytes it loops on, or that move a length counter on, plus a JSON
string's UTF-8 sequences), and the body automaton over them as a small byte table
whose allowed tokens are computed once per shape.  Any body byte set is sound: a trie subtree of
body bytes, reached by body bytes, is judged by the body automaton alone."""

from __future__ import annotations

from typing import Any

import numpy as np

from .dfa import DEAD

_c_body_shape: Any
try:  # the compiled walk (fsm/_trie_walk.c); optional, see setup.py
    from ._trie_walk import body_shape as _c_body_shape
except ImportError:  # pragma: no cover - exercised when no C compiler was available at install
    _c_body_shape = None

LOOP_SKIP_MIN_BYTES = 32  # the loop-subtree skip pays off only for states looping on many bytes
BODY_MAX_STATES = 32  # body automata of loop states larger than this are not used
CHAIN_DEPTH = 16  # bytes of a chain state's body automaton; longer tokens are walked
CHAIN_MAX_STATES = 512  # chain body automata larger than this are not used


def loop_body_classes(dfa: Any, state: int, row: np.ndarray) -> np.ndarray:
    """The body classes (``bool [C]``) of a loop state whose transition row is ``row``
    (``[C]``): the classes ``state`` loops on plus every byte ≥ 0x80 (a JSON string's UTF-8
    sequences: excursions that end back in the loop).  Not ``\\`` and its escapes: their states
    must be expanded to learn the body automaton, for every string of a grammar, while few tokens
    hold a backslash (the walk meets those subtrees instead; measured, the cold walk is faster)."""
    cob = np.asarray(dfa.class_of_byte)
    high = np.zeros(len(row), dtype=bool)  # [C] continuation bytes too: dead from ``state``, live inside a sequence
    high[cob[0x80:]] = True
    return (row == state) | high


def chain_body_classes(dfa: Any, state: int, row: np.ndarray) -> np.ndarray | None:
    """Body classes (``bool [C]``) of a chain state, or None: a state that does not loop but
    sends at least ``LOOP_SKIP_MIN_BYTES`` bytes to one same state (each character of a string
    with ``maxLength`` moves a counter on); its body is those bytes plus every byte ≥ 0x80."""
    cob = np.asarray(dfa.class_of_byte)
    succ = row[cob]  # [256]
    live = succ[succ != DEAD]
    if len(live) < LOOP_SKIP_MIN_BYTES:
        return None
    values, counts = np.unique(live, return_counts=True)
    k = int(counts.argmax())
    if counts[k] < LOOP_SKIP_MIN_BYTES:
        return None
    sigma = row == values[k]  # [C]
    sigma[cob[0x80:]] = True
    return sigma


def body_shape(dfa: Any, state: int, sigma: np.ndarray, max_states: int | None = None, depth: int = 0) -> np.ndarray | None:
    """The body automaton of ``state`` over the classes ``sigma`` (``bool [C]``) as a byte
    table ``int32 [n + 1, 256]`` (row 0 dead, row 1 ``state``, the others in breadth-first
    order; bytes outside the body lead to 0), cut after ``depth`` bytes when ``depth`` > 0
    (states first reached there lead nowhere), or None past ``max_states`` states (default
    ``BODY_MAX_STATES``).  Expands the states it reaches, a breadth-first level at a time (the
    caller serializes expansions).  Needs the compiled walk."""
    cob = np.asarray(dfa.class_of_byte)
    cap = BODY_MAX_STATES if max_states is None else max_states
    out = np.zeros((cap + 1, len(sigma)), dtype=np.int32)
    sig = sigma.astype(np.uint8)
    missing = np.zeros(256, dtype=np.int32)
    while True:
        n = _c_body_shape(dfa.table, dfa.num_classes, sig, state, out, depth, missing)
        if n >= 0:
            break
        for s in missing[:-n].tolist():
            dfa.expand(s)
    return None if n == 0 else np.take(out[:n], cob, axis=1)
