"""``VocabTrie``: the vocabulary's byte trie and the walks that turn an automaton state into a
token bitmask (``mask_bits``): the compiled preorder scan of ``fsm/_trie_walk.c`` where it is
built (optional, see setup.py), the pruned numpy walk otherwise and as the reference."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np

from .trie_bodies import CHAIN_DEPTH, CHAIN_MAX_STATES, LOOP_SKIP_MIN_BYTES, body_shape, chain_body_classes, loop_body_classes
from .trie_layout import build_layout, node_states

_c_walk: Any
_c_subtree_bytes: Any
_c_copy_ranges: Any
_c_permute_bits: Any
_c_walk_bits: Any
_c_pack_nodes: Any
_c_subtree_within: Any
try:  # the compiled walk (fsm/_trie_walk.c); optional, see setup.py
    from ._trie_walk import copy_ranges as _c_copy_ranges
    from ._trie_walk import pack_nodes as _c_pack_nodes
    from ._trie_walk import permute_bits as _c_permute_bits
    from ._trie_walk import subtree_bytes as _c_subtree_bytes
    from ._trie_walk import subtree_within as _c_subtree_within
    from ._trie_walk import walk as _c_walk
    from ._trie_walk import walk_bits as _c_walk_bits
except ImportError:  # pragma: no cover - exercised when no C compiler was available at install
    _c_walk = _c_subtree_bytes = _c_copy_ranges = _c_permute_bits = _c_walk_bits = _c_pack_nodes = _c_subtree_within = None

LOOP_TOKENS_CACHE = 256  # loop-byte sets whose token bitmasks a trie keeps
LOOP_WITHIN_CACHE = 32  # loop-byte sets whose per-node subtree flags (N bytes each) a trie keeps
PACKED_NODE = np.dtype([("skip", "<i4"), ("token", "<i4"), ("byte", "u1"), ("pad", "u1"), ("depth", "<u2")])  # _trie_walk.c trie_node


def copy_bit_ranges(dst: np.ndarray, src: np.ndarray, ranges: np.ndarray) -> None:
    """Replace the bits of ``dst`` in each ``[lo, hi)`` of ``ranges`` (``int64 [R, 2]``) by
    those of ``src`` (both ``uint32 [W]``; C extension only).  Raises ``ValueError`` for a
    range outside the masks."""
    assert _c_copy_ranges is not None
    _c_copy_ranges(dst, src, np.ascontiguousarray(ranges, dtype=np.int64))


def compiled_walk_available() -> bool:
    """Whether the C trie walk (``structgen.fsm._trie_walk``) was built and imports."""
    return _c_walk is not None


def _check_byte_set(loop: Any) -> None:
    """Raise ``ValueError`` unless ``loop`` is a 256-bit set, ``uint64 [4]``."""
    if not isinstance(loop, np.ndarray) or loop.dtype != np.uint64 or loop.shape != (4,):
        what = f"{loop.dtype} {list(loop.shape)}" if isinstance(loop, np.ndarray) else type(loop).__name__
        raise ValueError(f"a byte set must be uint64 [4] (256 bits), got {what}")


class _TableDFA:
    """A complete automaton over raw bytes for the walk (``table int32 [n, 256]``, row 0 dead;
    nothing to expand)."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = table
        self.num_classes = 256
        self.class_of_byte = np.arange(256, dtype=np.int32)

    def expand(self, state: int) -> np.ndarray:  # pragma: no cover - a complete table never asks
        raise AssertionError(f"state {state} of a complete table is never unexpanded")


class TrieOrder(NamedTuple):
    """The trie's preorder token numbering (see :attr:`VocabTrie.trie_order`), over the K
    nodes that spell a token: ``pre_k`` ``int32 [N-1]`` each preorder node's number (-1: no
    token ends there); ``k_token`` ``int32 [K]`` the token id of each number (the lowest id of equal spellings);
    ``root_lo`` / ``root_hi`` ``int64 [256]`` per first byte, the numbers of the tokens that
    start with it; ``root_nodes`` ``int64 [256]`` per first byte, the trie nodes under it (a
    walk's cost is about the nodes it visits)."""

    pre_k: np.ndarray
    k_token: np.ndarray
    root_lo: np.ndarray
    root_hi: np.ndarray
    root_nodes: np.ndarray


class VocabTrie:
    """All non-special tokens as a byte trie, in two layouts of the same nodes.

    Breadth-first (the vectorized numpy walk; nodes are numbered level by level):

    - ``parent``: ``int64 [N]`` parent node (root 0 has parent 0);
    - ``byte``: ``int64 [N]`` the byte on the edge into the node;
    - ``child_start`` / ``child_count``: ``int64 [N]`` each node's children, contiguous in the
      next depth (prefixes are sorted within a depth), so a walk expands live nodes only;
    - ``token_node``: ``int64 [V]`` the node spelling each token (0 for excluded tokens).

    Preorder (the compiled walk; every distinct non-empty token prefix in lexicographic order,
    the root left out, llguidance's TokTrie layout):

    - ``pre_byte``: ``uint8 [N-1]``; ``pre_depth``: ``int32 [N-1]`` (1 = child of the root);
    - ``pre_skip``: ``int32 [N-1]`` subtree size including the node (a dead node jumps by it);
    - ``pre_token``: ``int32 [N-1]`` the token spelled by the node, -1 if none;
    - ``dup_src`` / ``dup_dst``: ``int64 [D]`` tokens whose bytes equal an earlier token's
      (``dup_dst`` gets the result of ``dup_src``).

    ``use_compiled``: walk with the C extension when it is available (default); set False to
    force the numpy walk (tests compare the two).
    """

    def __init__(self, token_bytes: Sequence[bytes], excluded: frozenset[int], *, use_compiled: bool = True) -> None:
        lay = build_layout(token_bytes, excluded)
        self.vocab_size, self.max_depth, self.num_nodes = len(token_bytes), lay.max_depth, lay.num_nodes
        self.use_compiled = use_compiled and _c_walk is not None
        self.parent, self.byte, self.child_start, self.child_count = lay.parent, lay.byte, lay.child_start, lay.child_count
        self.token_node, self.valid, self.dup_src, self.dup_dst = lay.token_node, lay.valid, lay.dup_src, lay.dup_dst
        self.pre_byte, self.pre_depth, self.pre_skip, self.pre_token = lay.pre_byte, lay.pre_depth, lay.pre_skip, lay.pre_token
        self.pre_deepest = lay.pre_deepest  # int32 [N-1] the depth of the deepest node in each subtree

    def prepare(self) -> None:
        """Build the tables of the compiled walk (subtree byte sets, trie token order) now
        rather than on first use; a no-op without the C extension."""
        if self.use_compiled:
            self.subtree_byte_sets()
            self.trie_order  # noqa: B018
            self.packed_nodes(trie_order=False)
            self.packed_nodes(trie_order=True)

    def mask_bits(self, dfa: Any, state: int, *, ends: np.ndarray | None = None, reached: np.ndarray | None = None) -> np.ndarray:
        """The tokens whose bytes the lazily built byte DFA ``dfa`` accepts as a prefix from ``state``.

        Returns ``uint32 [ceil(V/32)]`` (little-endian bit ``t`` = token ``t`` allowed;
        excluded/special tokens never set).  When ``ends`` (``int32 [V]``, zero-filled by the
        caller) is given, the state after each allowed token is written to it.  When
        ``reached`` (``uint8 [M]``, M ≥ the automaton's state cap) is given, ``reached[s]`` is
        set to 1 for every state ``s`` an allowed token ends in.  Expands DFA states on demand
        (the caller serializes expansions).  Raises ``ValueError`` for a state the automaton
        has not discovered or an ``ends`` / ``reached`` array of the wrong shape or dtype.
        """
        if not 0 <= state < dfa.num_states:
            raise ValueError(f"state {state} is not a discovered automaton state (0..{dfa.num_states - 1})")
        if ends is not None and (ends.shape != (self.vocab_size,) or ends.dtype != np.int32):
            raise ValueError(f"ends must be int32 [{self.vocab_size}], got {ends.dtype} {list(ends.shape)}")
        if reached is not None and (reached.ndim != 1 or reached.dtype != np.uint8 or len(reached) < dfa.max_states):
            raise ValueError(f"reached must be uint8 [>= {dfa.max_states}], got {reached.dtype} {list(reached.shape)}")
        words = (self.vocab_size + 31) // 32
        if not self.use_compiled:
            end = self.end_states(dfa, np.array([state], dtype=np.int64))[0]  # [V]
            if ends is not None:
                ends[:] = end
            if reached is not None:
                reached[end[end != 0]] = 1
            allowed = np.zeros(words * 32, dtype=bool)
            allowed[: self.vocab_size] = end != 0
            return np.packbits(allowed, bitorder="little").view("<u4")
        assert _c_walk is not None
        cob = np.ascontiguousarray(dfa.class_of_byte, dtype=np.int32)
        skip: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        bits = np.zeros(words, dtype=np.uint32)  # [W]
        if ends is None:
            row = dfa.expand(int(state))  # [C] next state per byte class
            loop_bytes = np.asarray(row)[cob] == state  # [256]
            if int(loop_bytes.sum()) >= LOOP_SKIP_MIN_BYTES:
                if reached is None:  # the fast walk: bits only, over packed nodes, skipping the body
                    body, preset = self._body(dfa, int(state), np.asarray(row), loop_bytes)
                    bits = preset.copy()
                    lflag = np.zeros(self.max_depth + 1, dtype=np.uint8)
                    fast = (self.loop_within(np.packbits(body, bitorder="little").view("<u8").copy()), body.view(np.uint8), lflag)
                    self._walk_bits(dfa, int(state), bits, self.packed_nodes(trie_order=False), None, fast)
                    self._add_duplicates(bits, None)
                    return bits
                loop = np.packbits(loop_bytes, bitorder="little").view("<u8").copy()  # [4]
                bits = self.loop_tokens(loop).copy()
                if bits.any():
                    reached[state] = 1
                skip = (self.subtree_byte_sets(), loop, np.zeros(self.max_depth + 1, dtype=np.uint8))
            elif reached is None:
                chain = self._chain_body(dfa, int(state), np.asarray(row))
                if chain is not None:  # a counted body (a string with maxLength): skip its short body tokens
                    body, preset, within = chain
                    bits = preset.copy()
                    lflag = np.zeros(self.max_depth + 1, dtype=np.uint8)
                    fast = (within, body.view(np.uint8), lflag)
                    self._walk_bits(dfa, int(state), bits, self.packed_nodes(trie_order=False), None, fast)
                else:
                    self._walk_bits(dfa, int(state), bits, self.packed_nodes(trie_order=False), None, None)
                self._add_duplicates(bits, None)
                return bits
        self._walk(lambda: dfa.table, dfa.num_classes, cob, int(state), bits, ends, reached, skip, dfa.expand)
        self._add_duplicates(bits, ends)
        return bits

    def _body(self, dfa: Any, state: int, row: np.ndarray, loop_bytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The body of a loop state for the fast walk's subtree skip: ``(body bytes bool [256],
        uint32 [W] the tokens spelled only with body bytes that ``state`` allows)``.

        The body bytes are the bytes ``state`` loops on plus every byte ≥ 0x80 (a JSON string's
        UTF-8 sequences: excursions that end back in the loop; :func:`loop_body_classes`), as
        long as the sub-automaton they reach from ``state`` has at most ``BODY_MAX_STATES``
        states; else the loop bytes alone.
        Any byte set is sound: a trie subtree made of body bytes, reached by body bytes, is
        judged by the body automaton alone (the automaton restricted to body bytes from
        ``state``), whose allowed tokens are computed once per automaton shape
        (:meth:`body_tokens`) and pre-set; the rest of the trie is walked.  Falls back to the
        loop bytes alone (:meth:`loop_tokens`).  Expands the body's states (the caller
        serializes expansions)."""
        body, shape = self._loop_body(dfa, state, row, loop_bytes)
        if shape is not None:
            return body, self.body_tokens(shape)
        return body, self.loop_tokens(np.packbits(loop_bytes, bitorder="little").view("<u8").copy())

    @staticmethod
    def _loop_body(dfa: Any, state: int, row: np.ndarray, loop_bytes: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """``(body bytes bool [256], its body automaton)`` of a loop state (:meth:`_body`), or
        ``(loop_bytes, None)`` when that automaton is past ``BODY_MAX_STATES`` states."""
        sigma = loop_body_classes(dfa, state, row)  # [C]
        shape = body_shape(dfa, state, sigma)
        return (loop_bytes, None) if shape is None else (sigma[np.asarray(dfa.class_of_byte)], shape)

    def _chain_body(self, dfa: Any, state: int, row: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The body of a chain state for the fast walk's subtree skip, or None: ``(body bytes
        bool [256], uint32 [W] the body tokens of at most CHAIN_DEPTH bytes ``state`` allows,
        uint8 [N-1] per preorder node whether its subtree is such tokens only)``.

        A chain state does not loop, but at least ``LOOP_SKIP_MIN_BYTES`` bytes lead from it
        to one same state (each character of a string with ``maxLength`` moves a counter on).
        Its body bytes are those plus every byte ≥ 0x80; the body automaton, cut after
        ``CHAIN_DEPTH`` bytes, is exact for the tokens it judges, and equal for every
        position of a long enough counter, so its tokens are computed once per shape.  Sound
        for any byte set, as :meth:`_body`.  Expands the body's states (the caller serializes
        expansions)."""
        sigma = chain_body_classes(dfa, state, row)
        if sigma is None:
            return None
        shape = body_shape(dfa, state, sigma, CHAIN_MAX_STATES, CHAIN_DEPTH)
        if shape is None:
            return None
        cob = np.asarray(dfa.class_of_byte)
        body = sigma[cob]  # [256]
        key = np.packbits(body, bitorder="little").view("<u8").copy()  # [4]
        within = self._memo("_chain_within_cache", key.tobytes(), LOOP_WITHIN_CACHE, lambda: self._within_depth(key, CHAIN_DEPTH))
        return body, self.body_tokens(shape), within

    def _within_depth(self, byte_set: np.ndarray, depth: int) -> np.ndarray:
        """``uint8 [N-1]``: :meth:`loop_within` of ``byte_set``, and the subtree no deeper than ``depth``."""
        return self.loop_within(byte_set) & (self.pre_deepest <= depth).astype(np.uint8)

    def body_tokens(self, table: np.ndarray) -> np.ndarray:
        """``uint32 [W]`` bitmask of the tokens that the body automaton ``table`` (``int32
        [n + 1, 256]``, :func:`~.trie_bodies.body_shape`) allows from its state 1, every byte of them inside
        the body.  Cached per table (read-only result).  Raises ``ValueError`` for a table that is
        not ``int32 [n + 1, 256]`` with a dead row 0, n ≥ 1 and targets in ``0..n``."""
        if (
            not isinstance(table, np.ndarray)
            or table.dtype != np.int32
            or table.ndim != 2
            or table.shape[1] != 256
            or table.shape[0] < 2
            or table[0].any()
            or table.min() < 0
            or table.max() >= table.shape[0]
        ):
            what = f"{table.dtype} {list(table.shape)}" if isinstance(table, np.ndarray) else type(table).__name__
            raise ValueError(f"a body table must be int32 [n + 1, 256], row 0 dead, targets in 0..n; got {what}")
        key = hashlib.blake2b(table.tobytes(), digest_size=20).digest()  # chain shapes run to hundreds of KB
        return self._memo("_body_cache", key, LOOP_TOKENS_CACHE, lambda: self._body_walk(table))

    def _body_walk(self, table: np.ndarray) -> np.ndarray:
        loop_bytes = table[1] == 1  # [256]
        loop = np.packbits(loop_bytes, bitorder="little").view("<u8").copy()  # [4]
        bits = self.loop_tokens(loop).copy()
        shape = _TableDFA(np.ascontiguousarray(table))
        skip = (self.loop_within(loop), loop_bytes.view(np.uint8), np.zeros(self.max_depth + 1, dtype=np.uint8))
        self._walk_bits(shape, 1, bits, self.packed_nodes(trie_order=False), None, skip)
        self._add_duplicates(bits, None)
        return bits

    def _memo(self, name: str, key: bytes, limit: int, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """``compute()`` made read-only and kept in the LRU ``self.<name>`` (at most ``limit``
        entries) under ``key``."""
        cache: OrderedDict[bytes, np.ndarray] | None = getattr(self, name, None)
        if cache is None:
            cache = OrderedDict()
            setattr(self, name, cache)
        got = cache.get(key)
        if got is not None:
            cache.move_to_end(key)
            return got
        got = compute()
        got.setflags(write=False)
        cache[key] = got
        if len(cache) > limit:
            cache.popitem(last=False)
        return got

    def _walk_bits(
        self,
        dfa: Any,
        state: int,
        bits: np.ndarray,
        nodes: np.ndarray,
        vrow: np.ndarray | None,
        skip: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
    ) -> None:
        """The compiled bits-only walk (``walk_bits``) from ``state`` over packed ``nodes``,
        resumed after each expansion; ``vrow`` (``int32 [C]``) replaces the start state's row
        for the root's children; ``skip``: ``(within, loop, lflag)`` of the loop-subtree skip."""
        stack = np.zeros(self.max_depth + 1, dtype=np.int32)
        cob = np.ascontiguousarray(dfa.class_of_byte, dtype=np.int32)
        extra = (vrow,) if skip is None else (vrow, *skip)
        depth = nodes["depth"]
        raw = nodes.view(np.uint8)
        pos = 0
        while True:
            pos = _c_walk_bits(dfa.table, dfa.num_classes, cob, raw, state, pos, stack, bits, *extra)
            if pos < 0:
                return
            dfa.expand(int(stack[depth[pos] - 1]))

    def _walk(
        self,
        table: Callable[[], np.ndarray],
        num_classes: int,
        cob: np.ndarray,
        state: int,
        bits: np.ndarray,
        ends: np.ndarray | None,
        reached: np.ndarray | None,
        skip: tuple[np.ndarray | None, ...] | None,
        expand: Any,
        node_token: np.ndarray | None = None,
    ) -> None:
        """The C walk from ``state``, resumed after each expansion (``expand(state)``); ``table()``
        is re-read after each, since expansion may grow the automaton's table.  ``skip``: the
        walk's optional trailing arguments (``sub, loop, lflag[, vrow]``); ``node_token``: the
        number each preorder node sets in ``bits`` (default: its token id)."""
        stack = np.zeros(self.max_depth + 1, dtype=np.int32)
        pos = 0
        extra = skip if skip is not None else ()
        tokens = self.pre_token if node_token is None else node_token
        while True:
            pos = _c_walk(
                table(), num_classes, cob, self.pre_byte, self.pre_depth, self.pre_skip, tokens, state, pos, stack, bits, ends,
                reached, *extra,
            )  # fmt: skip
            if pos < 0:
                return
            expand(int(stack[self.pre_depth[pos] - 1]))

    def _add_duplicates(self, bits: np.ndarray, ends: np.ndarray | None) -> None:
        """Set the bits (and ends) of tokens spelled like an allowed token with a lower id."""
        if self.dup_dst.size:
            src = self.dup_src
            on = (bits[src >> 5] >> (src & 31).astype(np.uint32)) & 1
            dst = self.dup_dst[on.astype(bool)]
            np.bitwise_or.at(bits, dst >> 5, (np.uint32(1) << (dst & 31).astype(np.uint32)))
            if ends is not None:
                ends[self.dup_dst] = ends[self.dup_src]

    # ------------------------------------------------------------------ trie-order rows

    @cached_property
    def trie_order(self) -> TrieOrder:
        """The trie's own token numbering (C extension only): token nodes numbered in
        preorder, so the tokens under any node form one contiguous range."""
        assert _c_walk is not None
        is_tok = self.pre_token >= 0
        k = int(is_tok.sum())
        pre_k = np.full(len(self.pre_token), -1, dtype=np.int32)
        pre_k[is_tok] = np.arange(k, dtype=np.int32)
        before = np.concatenate([[0], np.cumsum(is_tok)]).astype(np.int64)  # [N] token nodes before each position
        root_lo = np.zeros(256, dtype=np.int64)
        root_hi = np.zeros(256, dtype=np.int64)
        root_nodes = np.zeros(256, dtype=np.int64)
        for i in np.flatnonzero(self.pre_depth == 1).tolist():
            b = int(self.pre_byte[i])
            root_lo[b], root_hi[b] = before[i], before[i + int(self.pre_skip[i])]
            root_nodes[b] = self.pre_skip[i]
        return TrieOrder(pre_k, self.pre_token[is_tok].astype(np.int32), root_lo, root_hi, root_nodes)

    def loop_tails(self, dfa: Any, q: int) -> np.ndarray | None:
        """Per first byte, the tokens whose tail (the bytes after the first) the loop state
        ``q`` accepts: ``uint32 [ceil(K/32)]`` in trie order, as :meth:`walk_trie_order` with
        every class sent to ``q`` computes them, but skipping the trie subtrees of ``q``'s
        body (:meth:`_body`): the tokens whose tail is body bytes only are judged by the body
        automaton, once per automaton shape (:meth:`_tail_walk`).  None when ``q`` loops on
        fewer than ``LOOP_SKIP_MIN_BYTES`` bytes or the walk is not compiled.  Expands DFA
        states on demand (the caller serializes expansions)."""
        row = np.asarray(dfa.expand(int(q)))  # [C]
        cob = np.asarray(dfa.class_of_byte)
        loop_bytes = row[cob] == q  # [256]
        if not self.use_compiled or int(loop_bytes.sum()) < LOOP_SKIP_MIN_BYTES:
            return None
        body, shape = self._loop_body(dfa, int(q), row, loop_bytes)
        if shape is None:  # the loop bytes alone: a one-state body automaton
            shape = np.zeros((2, 256), dtype=np.int32)
            shape[1, loop_bytes] = 1
        key = hashlib.blake2b(shape.tobytes(), digest_size=20).digest()
        bits = self._memo("_tail_cache", key, LOOP_TOKENS_CACHE, lambda: self._tail_walk(shape)).copy()
        within = self.loop_within(np.packbits(body, bitorder="little").view("<u8").copy())
        skip = (within, body.view(np.uint8), np.zeros(self.max_depth + 1, dtype=np.uint8))
        vrow = np.full(len(row), q, dtype=np.int32)  # [C] every first byte leads to q
        self._walk_bits(dfa, int(q), bits, self.packed_nodes(trie_order=True), vrow, skip)
        return bits

    def _tail_walk(self, table: np.ndarray) -> np.ndarray:
        """Trie order, per first byte, the tokens whose tail the body automaton ``table``
        (``int32 [n + 1, 256]``, :func:`~.trie_bodies.body_shape`) accepts from its state 1."""
        bits = np.zeros((len(self.trie_order.k_token) + 31) // 32, dtype=np.uint32)
        shape = _TableDFA(np.ascontiguousarray(table))
        self._walk_bits(shape, 1, bits, self.packed_nodes(trie_order=True), np.ones(256, dtype=np.int32), None)
        return bits

    def walk_trie_order(self, dfa: Any, state: int, bits: np.ndarray, root_row: np.ndarray) -> None:
        """OR into ``bits`` (``uint32 [ceil(K/32)]``, trie order) the tokens the lazily built
        byte DFA ``dfa`` accepts when each first byte ``b`` leads to ``root_row[class(b)]``
        (``int32 [C]``, 0 = not walked) and the rest is read from there; ``state`` is where
        the walk nominally starts.  A row of ``dfa`` gives that state's own tokens; a row
        sending every class to ``q`` gives, per first byte, the tokens whose tail ``q``
        accepts.  Expands DFA states on demand (the caller serializes expansions)."""
        self._walk_bits(dfa, int(state), bits, self.packed_nodes(trie_order=True), np.ascontiguousarray(root_row, dtype=np.int32), None)

    def to_token_order(self, bits: np.ndarray) -> np.ndarray:
        """A trie-order bitmask (``uint32 [ceil(K/32)]``) as ``uint32 [ceil(V/32)]`` token bits,
        tokens spelled like an allowed one included."""
        out = np.zeros((self.vocab_size + 31) // 32, dtype=np.uint32)
        _c_permute_bits(bits, self.trie_order.k_token, out)
        self._add_duplicates(out, None)
        return out

    def subtree_byte_sets(self) -> np.ndarray:
        """``uint64 [N-1, 4]`` per preorder node, the 256-bit set of edge bytes in its subtree
        (computed once, C extension only)."""
        sub = getattr(self, "_sub", None)
        if sub is None:
            assert _c_subtree_bytes is not None
            sub = np.zeros((len(self.pre_byte), 4), dtype=np.uint64)
            _c_subtree_bytes(self.pre_byte, self.pre_skip, sub)
            self._sub = sub
        return sub

    def packed_nodes(self, *, trie_order: bool) -> np.ndarray:
        """The preorder nodes packed for the compiled bits-only walk (``PACKED_NODE [N-1]``,
        computed once per layout, C extension only): each node's token id, or with
        ``trie_order`` its trie-order number (:attr:`trie_order`)."""
        key = "_packed_k" if trie_order else "_packed_tok"
        got: np.ndarray | None = getattr(self, key, None)
        if got is None:
            assert _c_pack_nodes is not None
            got = np.zeros(len(self.pre_byte), dtype=PACKED_NODE)
            tokens = self.trie_order.pre_k if trie_order else self.pre_token
            _c_pack_nodes(self.pre_byte, self.pre_depth, self.pre_skip, np.ascontiguousarray(tokens, dtype=np.int32), got.view(np.uint8))
            got.setflags(write=False)
            setattr(self, key, got)
        return got

    def loop_within(self, loop: np.ndarray) -> np.ndarray:
        """``uint8 [N-1]`` per preorder node, 1 when its subtree uses only bytes of ``loop``
        (``uint64 [4]``, a 256-bit set): the subtrees the loop-skip of the compiled walk jumps
        over.  Cached per set (read-only result).  Raises ``ValueError`` for a set that is not
        ``uint64 [4]``."""
        _check_byte_set(loop)
        return self._memo("_within_cache", loop.tobytes(), LOOP_WITHIN_CACHE, lambda: self._within(loop))

    def _within(self, loop: np.ndarray) -> np.ndarray:
        assert _c_subtree_within is not None
        member = np.unpackbits(loop.view(np.uint8), bitorder="little").astype(np.uint8)  # [256]
        got = np.zeros(len(self.pre_byte), dtype=np.uint8)
        _c_subtree_within(self.pre_byte, self.pre_skip, member, got)
        return got

    def loop_tokens(self, loop: np.ndarray) -> np.ndarray:
        """``uint32 [W]`` bitmask of the tokens made only of the bytes in ``loop`` (``uint64
        [4]``, a 256-bit set): from a state that loops to itself on exactly those bytes, these
        tokens are allowed and end where they started.  Cached per set (read-only result).
        Raises ``ValueError`` for a set that is not ``uint64 [4]``."""
        _check_byte_set(loop)
        return self._memo("_loop_cache", loop.tobytes(), LOOP_TOKENS_CACHE, lambda: self._loop_walk(loop))

    def _loop_walk(self, loop: np.ndarray) -> np.ndarray:
        member = np.unpackbits(loop.view(np.uint8), bitorder="little").astype(bool)  # [256]
        table = np.zeros(2 * 256, dtype=np.int32)  # state 1 loops on `loop`, everything else dies
        table[256:][member] = 1
        bits = np.zeros((self.vocab_size + 31) // 32, dtype=np.uint32)
        self._walk(lambda: table, 256, np.arange(256, dtype=np.int32), 1, bits, None, None, None, None)
        self._add_duplicates(bits, None)
        return bits

    def end_states(self, dfa: Any, states: np.ndarray) -> np.ndarray:
        """Walk every token from each of ``states`` through a lazily built byte DFA.

        ``dfa``: a :class:`~structgen.fsm.lazy_dfa.LazyDFA` (``table [cap, C]`` with -1 rows
        for unexpanded states, ``class_of_byte``, ``expand``); ``states``: ``int64 [K]``.
        Returns ``int32 [K, V]``: the state after each token (0 = rejected; excluded tokens 0).
        Only live subtrees are expanded, so states that admit few tokens are cheap.
        """
        out = np.zeros((len(states), len(self.token_node)), dtype=np.int32)
        if self.use_compiled:
            for k, s in enumerate(states.tolist()):
                self.mask_bits(dfa, int(s), ends=out[k])
            return out
        cls = dfa.class_of_byte[self.byte].astype(np.int64)  # [N] byte class of each trie edge
        for k, s in enumerate(states):
            node_state = node_states(self, dfa, cls, int(s))
            out[k] = node_state[self.token_node]
        out[:, ~self.valid] = 0
        return out
