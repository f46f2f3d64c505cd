from __future__ import annotations

import json
import pickle
import random
from typing import Any

import numpy as np
import pytest
from structgen.fsm.cursor import JumpForward, TokenRejectedError
from structgen.fsm.dfa import DEAD
from structgen.fsm.lazy_compile import compile_lazy
from structgen.fsm.length_product import CountedState
from structgen.fsm.nfa import compile_dfa
from structgen.fsm.token_csr import token_csr
from structgen.fsm.token_fsm import TokenFSM
from structgen.fsm.vocab import Vocabulary
from structgen.schemas.json_schema import schema_to_ir
from structgen.schemas.regex_assertions import regex_to_ir
from structgen.schemas.schema_options import SchemaOptions


def fsm_for_regex(pattern: str, vocab: Vocabulary) -> TokenFSM:
    return TokenFSM(compile_lazy(regex_to_ir(pattern)), vocab)


def brute_force_allowed(pattern: str, vocab: Vocabulary, prefix: bytes) -> set[int]:
    """Independent oracle: the eager DFA, token by token."""
    dfa = compile_dfa(regex_to_ir(pattern))
    s = dfa.walk(dfa.initial, prefix)
    out = {t for t, b in enumerate(vocab.token_bytes) if b and t not in vocab.special_ids and dfa.walk(s, b) != DEAD}
    if dfa.accepting[s]:
        out |= set(vocab.eos_token_ids)
    return out


def test_tiny_vocab_exact_masks(tiny_vocab: Vocabulary) -> None:
    pattern = r'\{"a": (1|12|é)\}'
    fsm = fsm_for_regex(pattern, tiny_vocab)
    cur = fsm.cursor()
    names = {b: i for i, b in enumerate(tiny_vocab.token_bytes)}
    assert set(fsm.allowed_token_ids(cur.state).tolist()) == {names[b"{"], names[b'{"']}
    prefix = b""
    for tok in [b'{"', b"a", b'": ', b"\xc3", b"\xa9", b"}"]:
        assert set(fsm.allowed_token_ids(cur.state).tolist()) == brute_force_allowed(pattern, tiny_vocab, prefix)
        cur.advance(names[tok])
        prefix += tok
    assert cur.is_accepting()
    assert set(fsm.allowed_token_ids(cur.state).tolist()) == {0}  # only EOS
    cur.advance(0)
    assert cur.finished


def test_cursor_rejects_and_rolls_back(tiny_vocab: Vocabulary) -> None:
    fsm = fsm_for_regex(r"ab(a|b)*", tiny_vocab)
    cur = fsm.cursor()
    names = {b: i for i, b in enumerate(tiny_vocab.token_bytes)}
    with pytest.raises(TokenRejectedError):
        cur.advance(names[b"b"])
    assert cur.num_tokens == 0
    cur.advance(names[b"ab"])
    cur.advance(names[b"ba"])
    s = cur.state
    cur.advance(names[b"a"])
    cur.rollback(1)
    assert cur.state == s and cur.tokens() == [names[b"ab"], names[b"ba"]]
    with pytest.raises(ValueError):
        cur.rollback(5)
    with pytest.raises(TokenRejectedError):
        cur.advance(0) if not cur.is_accepting() else (cur.advance(0), cur.advance(names[b"a"]))


def test_masks_agree_with_advance_on_gpt2(gpt2_vocab: Vocabulary) -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 8},
            "n": {"type": "integer", "minimum": -5, "maximum": 300},
            "t": {"enum": ["x y", "é"]},
        },
        "required": ["name", "n"],
    }
    node, _ = schema_to_ir(schema)
    fsm = TokenFSM(compile_lazy(node), gpt2_vocab)
    text = SchemaOptions().dumps({"name": 'Jé "q"', "n": 299, "t": "é"})
    ids = gpt2_vocab.encode_bytes(text.encode())
    assert ids is not None
    cur = fsm.cursor()
    rng = np.random.default_rng(0)
    for t in ids:
        allowed = fsm.allowed_token_ids(cur.state)
        probe = np.concatenate([allowed[rng.integers(0, len(allowed), 50)], rng.integers(0, gpt2_vocab.size, 200)])
        for p in probe.tolist():
            assert (p in set(allowed.tolist())) == (fsm.next_state(cur.state, p) >= 0)
        assert fsm.row_allows(cur.mask_row_index, t)
        cur.advance(t)
    assert cur.is_accepting()


def test_precompute_rows_matches_lazy_rows(gpt2_vocab: Vocabulary) -> None:
    """Eager rows equal the rows computed on first visit; limits stop early without losing
    rows; a complete FSM says so, and the flag travels through pickle."""
    import pickle

    regex = r'\{"a": "[a-z]{1,6}", "b": (true|false|[0-9]{1,3})\}'
    eager, lazy = fsm_for_regex(regex, gpt2_vocab), fsm_for_regex(regex, gpt2_vocab)
    done, complete = eager.precompute_rows(max_states=2)
    assert (done, complete) == (2, False) and not eager.rows_complete
    done, complete = eager.precompute_rows(deadline=0.0)  # already past
    assert (done, complete) == (0, False)
    done, complete = eager.precompute_rows()
    assert complete and eager.rows_complete and done == len(eager.state_to_row()[eager.state_to_row() >= 0])
    for s in np.flatnonzero(eager.state_to_row() >= 0).tolist():  # the same state of the same automaton, computed lazily
        assert np.array_equal(eager.mask_row(s), TokenFSM(eager.dfa, gpt2_vocab).mask_row(s))
    # both automata discover the same language: the same number of token-reachable states
    assert lazy.precompute_rows() == (done, True)
    n_rows = eager.num_rows
    cur = eager.cursor()
    for t in gpt2_vocab.encode_bytes(b'{"a": "xyz", "b": 12}'):
        cur.advance(t)  # every state served is already computed
    assert eager.num_rows == n_rows and cur.is_accepting()
    assert pickle.loads(pickle.dumps(eager)).rows_complete
    assert eager.precompute_rows() == (done, True)  # a complete FSM returns at once
    assert eager.materialize() == done
    with pytest.raises(ValueError, match="max_states must be >= 0"):
        lazy.precompute_rows(max_states=-1)
    with pytest.raises(ValueError, match="not a discovered automaton state"):
        eager.dfa.max_length(eager.num_states)


def test_mask_rows_shape_and_dedup(gpt2_vocab: Vocabulary) -> None:
    fsm = fsm_for_regex(r"[a-z]{0,3}", gpt2_vocab)
    n = fsm.materialize()
    rows = fsm.mask_rows()
    assert rows.dtype == np.int32 and rows.shape[1] == (gpt2_vocab.size + 31) // 32
    assert len(np.unique(rows, axis=0)) == len(rows) <= n
    states, indptr, tok, nxt = token_csr(fsm)
    assert len(indptr) == len(states) + 1 and len(tok) == len(nxt) == indptr[-1]
    for i, s in enumerate(states.tolist()):
        ids = tok[indptr[i] : indptr[i + 1]]
        assert list(ids) == sorted(ids)
        expected = set(fsm.allowed_token_ids(s).tolist()) - set(gpt2_vocab.eos_token_ids)
        assert set(ids.tolist()) == expected


def test_pickle_roundtrip(gpt2_vocab: Vocabulary) -> None:
    fsm = fsm_for_regex(r'\{"k": [0-9]+\}', gpt2_vocab)
    row = fsm.mask_row(fsm.initial).copy()
    clone = pickle.loads(pickle.dumps(fsm))
    assert np.array_equal(clone.mask_row(clone.initial), row)
    assert clone.vocab.fingerprint == gpt2_vocab.fingerprint
    ids = gpt2_vocab.encode_bytes(b'{"k": 42}')
    cur = clone.cursor()
    for t in ids:
        cur.advance(t)
    assert cur.is_accepting()


def test_forced_bytes_and_greedy_jump_forward(tiny_vocab: Vocabulary) -> None:
    fsm = fsm_for_regex(r'\{"a": (1|2)\}', tiny_vocab)
    assert fsm.forced_bytes(fsm.initial) == b'{"a": '
    cur = fsm.cursor()
    plan = cur.jump_forward()
    assert plan is not None and plan.rollback == 0
    assert tiny_vocab.decode_bytes(plan.token_ids) == b'{"a": '
    assert fsm.forced_bytes(cur.state) == b""


def test_jump_forward_back_off_keeps_mergeable_token(tiny_vocab: Vocabulary) -> None:
    # after the forced '{"a": ', "1" could continue as "12": the trailing forced token must not
    # swallow a byte that a longer token could take; here '1' is not forced at all.
    fsm = fsm_for_regex(r'\{"a": 12?\}', tiny_vocab)
    cur = fsm.cursor()
    plan = cur.jump_forward()
    assert plan is not None
    assert tiny_vocab.decode_bytes(plan.token_ids) in (b'{"a": ', b'{"a":')


def _simulate(fsm: TokenFSM, text: bytes, jump: bool) -> tuple[list[int], int, int]:
    """Decode ``text`` (a string of the language) token by token: sampled tokens follow the
    tokenizer's encoding of the remaining text; with ``jump`` forced runs use jump-forward.
    Returns (ids, forwards, forced tokens)."""
    vocab = fsm.vocab
    cur = fsm.cursor()
    ids: list[int] = []
    forwards = forced = 0
    while True:
        done = vocab.decode_bytes(ids)
        assert text.startswith(done)
        if jump:
            plan = cur.jump_forward(ids)
            if plan is not None:
                ctx_ids = ids[len(ids) - plan.rollback :] if plan.rollback else []
                ids = ids[: len(ids) - plan.rollback] + plan.token_ids
                forced += len(plan.token_ids)
                assert text.startswith(vocab.decode_bytes(ids))
                # canonical: some window that ends with the forced ids (and starts at most
                # max_rollback tokens before them) re-encodes to exactly itself
                n = len(plan.token_ids)
                assert any(vocab.encode_bytes(vocab.decode_bytes(ids[-m:])) == ids[-m:] for m in range(n, min(len(ids), n + 3) + 1))
                assert len(ctx_ids) <= 3
                forwards += 1
                continue
        done = vocab.decode_bytes(ids)
        if done == text:
            assert cur.is_accepting()
            return ids, forwards + 1, forced
        rest = vocab.encode_bytes(text[len(done) :])
        if rest is None:  # the remainder starts inside a UTF-8 character (after a byte token)
            remaining = text[len(done) :]
            cands = [t for t, b in enumerate(vocab.token_bytes) if b and remaining.startswith(b) and cur.is_allowed(t)]
            rest = [max(cands, key=lambda t: len(vocab.token_bytes[t]))]
        cur.advance(rest[0])
        ids.append(rest[0])
        forwards += 1


@pytest.mark.parametrize("seed", range(5))
def test_jump_forward_properties_gpt2(gpt2_vocab: Vocabulary, seed: int) -> None:
    rng = random.Random(seed)
    schema = {
        "type": "object",
        "properties": {
            "first_name": {"type": "string"},
            "last_name": {"type": "string"},
            "house": {"enum": ["Gryffindor", "Slytherin", "Ravenclaw", "Hufflepuff"]},
            "age": {"type": "integer"},
            "wand": {
                "type": "object",
                "properties": {"wood": {"type": "string"}, "length": {"type": "number"}},
                "required": ["wood", "length"],
            },
        },
        "required": ["first_name", "last_name", "house", "age", "wand"],
    }
    node, _ = schema_to_ir(schema)
    fsm = TokenFSM(compile_lazy(node), gpt2_vocab)
    value = {
        "first_name": rng.choice(["Harry", "Hermione", "Ron"]),
        "last_name": rng.choice(["Potter", "Granger", "Wé"]),
        "house": rng.choice(["Gryffindor", "Slytherin"]),
        "age": rng.randrange(11, 18),
        "wand": {"wood": "holly", "length": 11.5},
    }
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": ")).encode()
    ids_on, fwd_on, forced = _simulate(fsm, text, jump=True)
    ids_off, fwd_off, _ = _simulate(fsm, text, jump=False)
    assert gpt2_vocab.decode_bytes(ids_on) == gpt2_vocab.decode_bytes(ids_off) == text
    assert forced > 0 and fwd_on < fwd_off
    # Plans are memoized per FSM: a second request meets the same seams and gets the same plans.
    assert fsm._jump_plans
    assert _simulate(fsm, text, jump=True) == (ids_on, fwd_on, forced)
    fresh = TokenFSM(fsm.dfa, gpt2_vocab)  # empty memo
    assert _simulate(fresh, text, jump=True) == (ids_on, fwd_on, forced)


def test_unsupported_tokenizer_is_rejected(tmp_path: object) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "[SEP]": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="[SEP]")
    with pytest.raises(ValueError, match="supported are byte-level BPE"):
        Vocabulary.from_tokenizer(fast)


def test_missing_tokenizer_folder() -> None:
    with pytest.raises(FileNotFoundError):
        Vocabulary.from_tokenizer("/nonexistent/tokenizer")


def test_bad_token_ids_are_rejected_without_changing_the_cursor(tiny_vocab: Vocabulary) -> None:
    fsm = fsm_for_regex(r"ab", tiny_vocab)
    cur = fsm.cursor()
    for bad in (-1, tiny_vocab.size, 10**9, 0):  # 0 is EOS, not allowed before acceptance
        with pytest.raises(TokenRejectedError):
            cur.advance(bad)
        assert cur.num_tokens == 0 and not cur.finished


def test_jump_forward_checks_the_callers_history(tiny_vocab: Vocabulary) -> None:
    names = {b: i for i, b in enumerate(tiny_vocab.token_bytes)}
    fsm = fsm_for_regex(r'a\{"a": 1\}', tiny_vocab)
    cur = fsm.cursor()
    cur.peek_jump_forward([names[b"b"]])  # empty history: nothing to compare, no error
    cur.advance(names[b"a"])
    with pytest.raises(ValueError, match="do not match"):
        cur.jump_forward([names[b"b"]])
    assert cur.tokens() == [names[b"a"]]  # unchanged by the rejected call
    plan = cur.jump_forward([names[b"a"]])
    assert plan is not None and tiny_vocab.decode_bytes(cur.tokens()).endswith(b'{"a": 1}')


def test_apply_jump_forward_rejects_a_plan_that_does_not_fit(tiny_vocab: Vocabulary) -> None:
    """A plan for another position (too long a rollback, a token the state refuses) raises and
    leaves the cursor as it was; a peeked plan applies."""
    names = {b: i for i, b in enumerate(tiny_vocab.token_bytes)}
    fsm = fsm_for_regex(r'a\{"a": 1\}', tiny_vocab)
    cur = fsm.cursor()
    cur.advance(names[b"a"])
    before = (cur.tokens(), cur.state)
    with pytest.raises(ValueError, match="cannot roll back 2 tokens"):
        cur.apply_jump_forward(JumpForward(rollback=2, token_ids=[], state=cur.state))
    with pytest.raises(TokenRejectedError, match="not allowed"):
        cur.apply_jump_forward(JumpForward(rollback=0, token_ids=[names[b"{"], names[b"a"]], state=cur.state))
    assert (cur.tokens(), cur.state) == before
    plan = cur.peek_jump_forward()
    assert plan is not None
    cur.apply_jump_forward(plan)
    assert cur.state == plan.state and tiny_vocab.decode_bytes(cur.tokens()).endswith(b'{"a": 1}')


WALK_CONSTRAINTS = [
    r'\{"a": (1|12|é)\}',
    r"[^\n]*(\n[a-c]+)?",
    r"[a-z ]{0,12}(, [0-9]+)?",
    r'"([^"\\]|\\["\\/bfnrt])*"',
    r"([a-zA-Z0-9 .,;:!?()'-]|é|ü|中|\\[nt])*(; [0-9]+)?",  # a loop with UTF-8 and escape excursions (a body)
]


@pytest.mark.parametrize(
    "constraint",
    [
        {"type": "object", "properties": {"s": {"type": "string", "minLength": 1, "maxLength": 40}}, "required": ["s"]},
        {"type": "string", "pattern": "^[a-z0-9_ ]{2,30}$"},
        {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 4},
    ],
)
def test_chain_states_skip_their_short_body_tokens_exactly(constraint: dict, gpt2_vocab: Vocabulary) -> None:
    """Counted bodies (a string with maxLength) do not loop, so the loop skip cannot apply;
    the chain skip pre-sets the body tokens of at most CHAIN_DEPTH bytes from the body
    automaton's shape.  Every position of the counter gets the numpy reference walk's row."""
    from structgen.fsm.trie import VocabTrie, compiled_walk_available

    if not compiled_walk_available():
        pytest.skip("the C trie walk was not built (no compiler at install)")
    compiled = VocabTrie(gpt2_vocab.token_bytes, gpt2_vocab.special_ids)
    reference = VocabTrie(gpt2_vocab.token_bytes, gpt2_vocab.special_ids, use_compiled=False)
    dfa = compile_lazy(schema_to_ir(constraint)[0])
    fsm = TokenFSM(dfa, gpt2_vocab)
    rng = random.Random(0)
    for _ in range(6):  # random walks through the counter, drawn from the reference rows
        state = dfa.initial
        for _ in range(30):
            expected = reference.mask_bits(dfa, state)
            np.testing.assert_array_equal(compiled.mask_bits(dfa, state), expected)
            allowed = [t for t in range(gpt2_vocab.size) if expected[t >> 5] >> (t & 31) & 1]
            if not allowed:
                break
            state = fsm.next_state(state, rng.choice(allowed))
    assert getattr(compiled, "_chain_within_cache", None), "no chain state met"


@pytest.mark.parametrize("vocab_name", ["tiny", "gpt2"])
def test_compiled_walk_matches_numpy_walk(vocab_name: str, tiny_vocab: Vocabulary, gpt2_vocab: Vocabulary) -> None:
    """The C preorder walk and the numpy breadth-first walk give identical bits and end states."""
    from structgen.fsm.trie import VocabTrie, compiled_walk_available

    if not compiled_walk_available():
        pytest.skip("the C trie walk was not built (no compiler at install)")
    vocab = tiny_vocab if vocab_name == "tiny" else gpt2_vocab
    compiled = VocabTrie(vocab.token_bytes, vocab.special_ids)
    reference = VocabTrie(vocab.token_bytes, vocab.special_ids, use_compiled=False)
    assert compiled.use_compiled and not reference.use_compiled
    node, _ = schema_to_ir({"type": "object", "properties": {"s": {"type": "string", "maxLength": 6}, "n": {"type": "integer"}}})
    dfas = [compile_lazy(regex_to_ir(p)) for p in WALK_CONSTRAINTS] + [compile_lazy(node)]
    rng = np.random.default_rng(1)
    for dfa in dfas:
        state = dfa.initial
        for _ in range(12):
            ends_c = np.zeros(vocab.size, dtype=np.int32)
            ends_r = np.zeros(vocab.size, dtype=np.int32)
            bits_c = compiled.mask_bits(dfa, state, ends=ends_c)
            bits_r = reference.mask_bits(dfa, state, ends=ends_r)
            assert bits_c.dtype == np.uint32 and bits_c.shape == ((vocab.size + 31) // 32,)
            np.testing.assert_array_equal(bits_c, bits_r)
            np.testing.assert_array_equal(ends_c, ends_r)
            # without `ends` the C walk skips subtrees of bytes the state loops on (pre-set bits);
            # without `reached` too, the packed bits-only walk also skips its body subtrees
            np.testing.assert_array_equal(compiled.mask_bits(dfa, state), bits_r)
            reached = np.zeros(dfa.max_states, dtype=np.uint8)
            np.testing.assert_array_equal(compiled.mask_bits(dfa, state, reached=reached), bits_r)
            assert set(np.flatnonzero(reached).tolist()) == set(ends_r[ends_r != 0].tolist())
            np.testing.assert_array_equal(compiled.end_states(dfa, np.array([state])), reference.end_states(dfa, np.array([state])))
            live = np.flatnonzero(ends_c)
            if not live.size:
                break
            state = int(ends_c[rng.choice(live)])


def test_body_skip_matches_the_walk_and_falls_back(gpt2_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    """A JSON string's loop state: the body (its UTF-8 excursions) is found, its
    tokens are pre-set once per automaton shape, and the bits equal a plain walk's; with the
    body capped below its size the loop bytes alone are used, with the same bits."""
    from structgen.fsm import trie_bodies
    from structgen.fsm.trie import VocabTrie, compiled_walk_available

    if not compiled_walk_available():
        pytest.skip("the C trie walk was not built (no compiler at install)")
    trie = VocabTrie(gpt2_vocab.token_bytes, gpt2_vocab.special_ids)
    node, _ = schema_to_ir({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a", "b"]})
    dfa = compile_lazy(node)
    states = [dfa.walk(dfa.initial, b'{"a": "'), dfa.walk(dfa.initial, b'{"a": "x", "b": "')]
    for s in states:
        ends = np.zeros(gpt2_vocab.size, dtype=np.int32)
        plain = trie.mask_bits(dfa, s, ends=ends)  # the general walk, no skips
        row = np.asarray(dfa.expand(s))
        loop_bytes = row[np.asarray(dfa.class_of_byte)] == s
        body, _preset = trie._body(dfa, s, row, loop_bytes)
        assert body[0x80:].all() and not body[ord("\\")] and not body[ord('"')]  # UTF-8, not escapes, never the quote
        assert body.sum() > loop_bytes.sum()
        np.testing.assert_array_equal(trie.mask_bits(dfa, s), plain)
    assert len(trie._body_cache) == 1  # both strings' bodies have one shape: one body walk
    monkeypatch.setattr(trie_bodies, "BODY_MAX_STATES", 1)
    row = np.asarray(dfa.expand(states[0]))
    loop_bytes = row[np.asarray(dfa.class_of_byte)] == states[0]
    body, _ = trie._body(dfa, states[0], row, loop_bytes)
    np.testing.assert_array_equal(body, loop_bytes)
    np.testing.assert_array_equal(
        trie.mask_bits(dfa, states[0]), trie.mask_bits(dfa, states[0], ends=np.zeros(gpt2_vocab.size, dtype=np.int32))
    )


def test_packed_walk_helpers_refuse_bad_buffers() -> None:
    """walk_bits, pack_nodes, subtree_within and body_shape raise ValueError on inconsistent
    buffers instead of reading out of bounds."""
    from structgen.fsm.trie import PACKED_NODE, VocabTrie, compiled_walk_available

    if not compiled_walk_available():
        pytest.skip("the C trie walk was not built (no compiler at install)")
    from structgen.fsm import _trie_walk

    tokens = [b"", b"a", b"ab", b"b"]
    trie = VocabTrie(tokens, frozenset({0}))
    dfa = compile_lazy(regex_to_ir(r"ab?"))
    nodes = trie.packed_nodes(trie_order=False).view(np.uint8)
    cob = dfa.class_of_byte.astype(np.int32)
    stack = np.zeros(trie.max_depth + 1, dtype=np.int32)
    bits = np.zeros(1, np.uint32)
    pos = _trie_walk.walk_bits(dfa.table, dfa.num_classes, cob, nodes, dfa.initial, 0, stack, bits)  # well-formed
    assert pos == -1 or 0 <= pos < len(trie.pre_byte)
    with pytest.raises(ValueError, match="inconsistent"):
        _trie_walk.walk_bits(dfa.table, dfa.num_classes, cob, nodes[:-1], dfa.initial, 0, stack, bits)
    with pytest.raises(ValueError, match="inconsistent"):
        _trie_walk.walk_bits(dfa.table, dfa.num_classes, cob, nodes, dfa.table.shape[0], 0, stack, bits)
    with pytest.raises(ValueError, match="go together"):
        _trie_walk.walk_bits(dfa.table, dfa.num_classes, cob, nodes, dfa.initial, 0, stack, bits, None, np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match="class_of_byte out of range"):
        _trie_walk.walk_bits(dfa.table, dfa.num_classes, np.full(256, 99, np.int32), nodes, dfa.initial, 0, stack, bits)
    bad = np.zeros(len(trie.pre_byte), dtype=PACKED_NODE)
    with pytest.raises(ValueError, match="pack_nodes"):  # a depth of 0 and a skip of 0
        _trie_walk.pack_nodes(trie.pre_byte, np.zeros_like(trie.pre_depth), trie.pre_skip, trie.pre_token, bad.view(np.uint8))
    with pytest.raises(ValueError, match="subtree_within"):
        _trie_walk.subtree_within(trie.pre_byte, trie.pre_skip, np.zeros(255, np.uint8), np.zeros(len(trie.pre_byte), np.uint8))
    sig, shape_out, missing = np.ones(dfa.num_classes, np.uint8), np.zeros((4, dfa.num_classes), np.int32), np.zeros(4, np.int32)
    for bad in (
        (0, shape_out, 0, missing),  # the dead state
        (dfa.initial, shape_out, -1, missing),  # a negative depth cut
        (dfa.initial, shape_out, 0, np.zeros(0, np.int32)),  # nowhere to report unexpanded states
    ):
        with pytest.raises(ValueError, match="body_shape"):
            _trie_walk.body_shape(dfa.table, dfa.num_classes, sig, bad[0], bad[1], bad[2], bad[3])
    # the Python entry points name what is wrong
    with pytest.raises(ValueError, match=r"byte set must be uint64 \[4\]"):
        trie.loop_within(np.zeros(4, np.uint32))
    with pytest.raises(ValueError, match=r"byte set must be uint64 \[4\]"):
        trie.loop_tokens(np.zeros(3, np.uint64))
    good = np.zeros((2, 256), np.int32)
    good[1, ord("a")] = 1
    assert trie.body_tokens(good)[0] >> 1 & 1  # token 1 (b"a") loops in the body
    for table in (good.astype(np.int64), good[:1], np.ones((2, 256), np.int32), good * 5, good[:, :255].copy(), [[0] * 256]):
        with pytest.raises(ValueError, match="body table must be int32"):
            trie.body_tokens(table)  # type: ignore[arg-type]
    # a packed walk that meets an unexpanded state returns its position, as walk does
    fresh = compile_lazy(regex_to_ir(r"ab?"))
    got = np.zeros(1, np.uint32)
    trie._walk_bits(fresh, fresh.initial, got, trie.packed_nodes(trie_order=False), None, None)
    assert {t for t in range(len(tokens)) if got[0] >> t & 1} == {1, 2}


def test_compiled_walk_duplicate_tokens_and_bad_buffers() -> None:
    """Tokens with equal bytes get equal bits; inconsistent buffers raise ValueError, not a crash."""
    from structgen.fsm.trie import VocabTrie, compiled_walk_available

    if not compiled_walk_available():
        pytest.skip("the C trie walk was not built (no compiler at install)")
    tokens = [b"", b"a", b"ab", b"a", b"b", b"ab", b"c"]
    trie = VocabTrie(tokens, frozenset({0}))
    dfa = compile_lazy(regex_to_ir(r"ab?"))
    bits = trie.mask_bits(dfa, dfa.initial)
    allowed = {t for t in range(len(tokens)) if bits[t >> 5] >> (t & 31) & 1}
    assert allowed == {1, 2, 3, 5}
    from structgen.fsm import _trie_walk

    def walk(**override: object) -> int:
        args = {
            "table": dfa.table,
            "num_classes": dfa.num_classes,
            "class_of_byte": dfa.class_of_byte.astype(np.int32),
            "node_byte": trie.pre_byte,
            "node_depth": trie.pre_depth,
            "node_skip": trie.pre_skip,
            "node_token": trie.pre_token,
            "state": dfa.initial,
            "pos": 0,
            "stack": np.zeros(trie.max_depth + 1, dtype=np.int32),
            "bits": np.zeros(1, np.uint32),
            "ends": None,
        }
        args.update(override)
        return _trie_walk.walk(*args.values())

    assert walk() == -1  # the unmodified call is well-formed
    # the optional trailing arguments: sub, loop and lflag only together; a root row of C entries, not with them
    sub = trie.subtree_byte_sets()
    loop, lflag = np.zeros(4, dtype=np.uint64), np.zeros(trie.max_depth + 1, dtype=np.uint8)
    root_row = np.array(dfa.expand(dfa.initial), dtype=np.int32)
    assert walk(reached=None, sub=None, loop=None, lflag=None, vrow=root_row) == -1
    with pytest.raises(ValueError, match="go together"):
        walk(reached=None, sub=sub, loop=loop)
    with pytest.raises(ValueError, match="inconsistent"):
        walk(reached=None, sub=sub, loop=loop, lflag=lflag, vrow=root_row)
    with pytest.raises(ValueError, match="inconsistent"):
        walk(node_depth=trie.pre_depth[:-1])
    with pytest.raises(TypeError, match="items of 4 bytes"):
        walk(table=dfa.table.astype(np.int64))
    # the Python entry point names what is wrong
    with pytest.raises(ValueError, match="not a discovered automaton state"):
        trie.mask_bits(dfa, dfa.num_states)
    with pytest.raises(ValueError, match="ends must be int32"):
        trie.mask_bits(dfa, dfa.initial, ends=np.zeros(len(tokens), dtype=np.int64))
    # reached: the C walk refuses a buffer too short for a state it meets; the entry point
    # refuses a wrong dtype or a length below the state cap
    with pytest.raises(ValueError, match="out of range"):
        walk(reached=np.zeros(1, dtype=np.uint8))
    with pytest.raises(TypeError, match="items of 1 bytes"):
        walk(reached=np.zeros(64, dtype=np.int32))
    with pytest.raises(ValueError, match="reached must be uint8"):
        trie.mask_bits(dfa, dfa.initial, reached=np.zeros(dfa.max_states, dtype=np.int32))
    with pytest.raises(ValueError, match="reached must be uint8"):
        trie.mask_bits(dfa, dfa.initial, reached=np.zeros(1, dtype=np.uint8))
    reached = np.zeros(dfa.max_states, dtype=np.uint8)
    ends = np.zeros(len(tokens), dtype=np.int32)
    trie.mask_bits(dfa, dfa.initial, ends=ends, reached=reached)
    assert set(np.flatnonzero(reached).tolist()) == set(ends[ends != 0].tolist()) != set()


def _token_reachable_by_walks(fsm: TokenFSM) -> set[int]:
    """The states tokens reach from the initial one, found with the walk's ``reached`` (the
    precompute path for vocabularies that do not spell every byte)."""
    trie = fsm.vocab.trie
    seen, frontier = {fsm.initial}, [fsm.initial]
    while frontier:
        s = frontier.pop()
        reached = np.zeros(fsm.dfa.max_states, dtype=np.uint8)
        trie.mask_bits(fsm.dfa, s, reached=reached)
        for t in np.flatnonzero(reached).tolist():
            if t != DEAD and t not in seen:
                seen.add(t)
                frontier.append(t)
    return seen


SHARED_SCHEMAS = [  # free keys next to declared names (shared tails), strings with UTF-8, numbers
    {"type": "object", "properties": {"name": {"type": "string"}, "nick": {"type": "string", "maxLength": 4}}, "required": ["name"]},
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer", "minimum": -5}}, "é": {"enum": ["x", 2]}}},
    {  # bounded strings: the tails of their positions by arithmetic
        "type": "object",
        "properties": {"b": {"type": "string", "maxLength": 40}, "c": {"type": "string", "minLength": 1, "maxLength": 30}},
        "additionalProperties": False,
    },
]


@pytest.mark.parametrize("index", range(len(SHARED_SCHEMAS)))
def test_shared_precompute_equals_walk_per_state(gpt2_vocab: Vocabulary, index: int) -> None:
    """The precompute path with shared tails (trie order, byte-DFA search) computes, for the
    same automaton, the token-reachable states of the walk-per-state path and the same row
    for each."""
    from structgen.fsm.trie import compiled_walk_available

    if not compiled_walk_available():
        pytest.skip("the C trie walk was not built (no compiler at install)")
    assert gpt2_vocab.covers_every_byte
    node, _ = schema_to_ir(SHARED_SCHEMAS[index], SchemaOptions(allow_undeclared_properties=True))
    fsm = TokenFSM(compile_lazy(node), gpt2_vocab)
    done, complete = fsm.precompute_rows()
    assert complete
    computed = set(np.flatnonzero(fsm.state_to_row() >= 0).tolist())
    assert computed == _token_reachable_by_walks(fsm) and done == len(computed)
    for s in computed:
        ref = gpt2_vocab.trie.mask_bits(fsm.dfa, s)
        if fsm.is_accepting(s):
            for e in gpt2_vocab.eos_token_ids:
                ref[e >> 5] |= np.uint32(1 << (e & 31))
        np.testing.assert_array_equal(fsm.mask_row(s).view(np.uint32), ref, err_msg=f"state {s}")


@pytest.mark.parametrize("index", range(len(SHARED_SCHEMAS)))
def test_first_visit_rows_through_shared_tails_equal_the_walk(gpt2_vocab: Vocabulary, index: int) -> None:
    """Rows computed one at a time on first visit (the serving path) go through the grammar's
    shared tails where the vocabulary spells every byte: each equals its own trie walk, and
    the free-key states of the object schema copy a tail an earlier row bought."""
    from structgen.fsm.trie import compiled_walk_available

    if not compiled_walk_available():
        pytest.skip("the C trie walk was not built (no compiler at install)")
    node, _ = schema_to_ir(SHARED_SCHEMAS[index], SchemaOptions(allow_undeclared_properties=True))
    fsm = TokenFSM(compile_lazy(node), gpt2_vocab)
    for s in sorted(_token_reachable_by_walks(fsm)):
        ref = gpt2_vocab.trie.mask_bits(fsm.dfa, s)
        if fsm.is_accepting(s):
            for e in gpt2_vocab.eos_token_ids:
                ref[e >> 5] |= np.uint32(1 << (e & 31))
        np.testing.assert_array_equal(fsm.mask_row(s).view(np.uint32), ref, err_msg=f"state {s}")
    assert fsm._tails is not None
    if index == 0:
        assert fsm._tails.tails  # the free-key state's tails were bought and copied
    if index == 2:  # a bounded string's position: its tails by arithmetic, copied
        assert any(fsm.dfa.counted_row(q) is not None for q in fsm._tails.tails)


def test_trie_order_walk_and_bit_helpers(gpt2_vocab: Vocabulary) -> None:
    """A trie-order walk over a state's own row gives that state's tokens; a row sending every
    class to q gives per first byte the tokens whose tail q accepts; the bit helpers match numpy
    and refuse bad input."""
    from structgen.fsm import _trie_walk
    from structgen.fsm.trie import compiled_walk_available, copy_bit_ranges

    if not compiled_walk_available():
        pytest.skip("the C trie walk was not built (no compiler at install)")
    trie = gpt2_vocab.trie
    order = trie.trie_order
    words = (len(order.k_token) + 31) // 32
    dfa = compile_lazy(regex_to_ir(r'"([^"\\]|\\n)*", (ab|[0-9]+)'))
    for s in (dfa.initial, dfa.walk(dfa.initial, b'"x')):
        bits = np.zeros(words, dtype=np.uint32)
        trie.walk_trie_order(dfa, s, bits, np.array(dfa.expand(s), dtype=np.int32))
        np.testing.assert_array_equal(trie.to_token_order(bits), trie.mask_bits(dfa, s))
    q = dfa.walk(dfa.initial, b'"x", ')
    bits = np.zeros(words, dtype=np.uint32)
    trie.walk_trie_order(dfa, q, bits, np.full(dfa.num_classes, q, dtype=np.int32))
    allowed = np.flatnonzero(np.unpackbits(trie.to_token_order(bits).view(np.uint8), bitorder="little")[: gpt2_vocab.size])
    expect = [t for t, b in enumerate(gpt2_vocab.token_bytes) if b and t not in gpt2_vocab.special_ids and dfa.walk(q, b[1:]) != DEAD]
    assert allowed.tolist() == expect
    # copy_bit_ranges against a bool reference, unaligned ranges included
    rng = np.random.default_rng(0)
    src = rng.integers(0, 2**32, 10, dtype=np.uint32)
    dst = rng.integers(0, 2**32, 10, dtype=np.uint32)
    ranges = np.array([[0, 0], [3, 70], [95, 96], [100, 320]], dtype=np.int64)
    ref = np.unpackbits(dst.view(np.uint8), bitorder="little").astype(bool)
    src_b = np.unpackbits(src.view(np.uint8), bitorder="little").astype(bool)
    for lo, hi in ranges.tolist():
        ref[lo:hi] = src_b[lo:hi]
    copy_bit_ranges(dst, src, ranges)
    np.testing.assert_array_equal(np.unpackbits(dst.view(np.uint8), bitorder="little").astype(bool), ref)
    with pytest.raises(ValueError, match="copy_ranges"):
        copy_bit_ranges(dst, src, np.array([[5, 400]], dtype=np.int64))
    with pytest.raises(ValueError, match="permute_bits"):
        _trie_walk.permute_bits(np.array([3], np.uint32), np.array([0, 40], np.int32), np.zeros(1, np.uint32))
    with pytest.raises(ValueError, match="inconsistent"):  # a root row of the wrong length
        trie.walk_trie_order(dfa, dfa.initial, np.zeros(words, np.uint32), np.zeros(dfa.num_classes + 1, np.int32))


@pytest.mark.parametrize(
    "pattern",
    [
        r'"([^"\\]|\\["\\/bfnrt]|\\u[0-9a-f]{4})*"',  # a JSON string: escapes and UTF-8 in the body automaton
        r"([a-z0-9 ]|(é){40})*;",  # a body automaton past its state cap: the loop bytes alone
        r"([^x]|xy)*z",  # a loop leaving through one byte sequence
    ],
)
def test_loop_tails_equal_the_tail_walk(gpt2_vocab: Vocabulary, pattern: str) -> None:
    """``loop_tails`` (the tail walk that skips the loop state's body subtrees) equals the plain
    trie-order walk with every first byte sent to the loop state, for every loop state reached."""
    from structgen.fsm.trie import compiled_walk_available

    if not compiled_walk_available():
        pytest.skip("the C trie walk was not built (no compiler at install)")
    trie = gpt2_vocab.trie
    words = (len(trie.trie_order.k_token) + 31) // 32
    dfa = compile_lazy(regex_to_ir(pattern))
    checked = 0
    seen, frontier = {dfa.initial}, [dfa.initial]
    while frontier and len(seen) < 200:
        q = frontier.pop()
        got = trie.loop_tails(dfa, q)
        if got is not None:
            ref = np.zeros(words, dtype=np.uint32)
            trie.walk_trie_order(dfa, q, ref, np.full(dfa.num_classes, q, dtype=np.int32))
            np.testing.assert_array_equal(got, ref, err_msg=f"state {q}")
            checked += 1
        for t in set(dfa.expand(q).tolist()):
            if t != DEAD and t not in seen:
                seen.add(t)
                frontier.append(t)
    assert checked >= 1


# ----------------------------------------------------------------------------- budgets

BUDGET_SCHEMAS = [
    {  # pattern ∩ length (an And node), a bounded integer, an unbounded number array
        "type": "object",
        "properties": {
            "a": {"type": "string", "pattern": "^[a-z]+x$", "minLength": 3, "maxLength": 8},
            "b": {"type": "integer", "minimum": -50, "maximum": 12345},
            "c": {"type": "array", "items": {"type": "number"}, "minItems": 2},
        },
        "required": ["b", "c"],
    },
    {"type": "object", "properties": {"x": {"type": "string", "format": "date-time"}, "y": {"enum": ["ab", "abcdef", 3]}}},
    {  # nested required string, extra members
        "type": "object",
        "properties": {"n": {"type": "object", "properties": {"q": {"type": "string", "minLength": 5}}, "required": ["q"]}},
        "additionalProperties": {"type": "integer"},
    },
    {"type": "array", "items": {"type": "string", "format": "email"}, "minItems": 1, "maxItems": 3},
    {"anyOf": [{"type": "string", "format": "uuid"}, {"type": "number", "minimum": 0.5, "exclusiveMaximum": 100}]},
]


def _bfs_distance(dfa: object, state: int, cap: int = 2000) -> int | None:
    """Independent oracle: breadth-first search over the byte automaton (None past ``cap`` states)."""
    if dfa.acc[state]:  # type: ignore[attr-defined]
        return 0
    seen, frontier, depth = {state}, [state], 0
    while frontier and len(seen) < cap:
        depth += 1
        nxt = []
        for q in frontier:
            for t in set(dfa.expand(q).tolist()):  # type: ignore[attr-defined]
                if t != DEAD and t not in seen:
                    if dfa.acc[t]:  # type: ignore[attr-defined]
                        return depth
                    seen.add(t)
                    nxt.append(t)
        frontier = nxt
    return None


def check_distances(dfa: Any, rng: random.Random, *, walks: int, max_steps: int, oracle_share: float) -> int:
    """Random byte walks through ``dfa``: at every state distance_to_accept ≤ distance_bound,
    and at a share of them it equals the BFS oracle.  Returns how many oracle checks ran."""
    checked = 0
    for _ in range(walks):
        s = dfa.initial
        for _ in range(rng.randrange(1, max_steps)):
            d = dfa.distance_to_accept(s)
            assert d <= dfa.distance_bound, (s, d)
            if rng.random() < oracle_share and (ref := _bfs_distance(dfa, s)) is not None:
                assert d == ref, (s, d, ref)
                checked += 1
            live = [t for t in dfa.expand(s).tolist() if t != DEAD]
            if not live:
                break
            s = rng.choice(live)
    return checked


@pytest.mark.parametrize("index", range(len(BUDGET_SCHEMAS)))
def test_distance_is_exact_and_bounded(index: int) -> None:
    """distance_to_accept equals a BFS over the automaton at random states, queried while the
    lazy automaton grows (the incremental NFA distances), and never exceeds distance_bound."""
    dfa = compile_lazy(schema_to_ir(BUDGET_SCHEMAS[index], SchemaOptions())[0])
    bound = dfa.distance_bound
    assert bound is not None
    assert check_distances(dfa, random.Random(index), walks=30, max_steps=100, oracle_share=0.5) > 50
    with pytest.raises(ValueError, match="not a discovered automaton state"):
        dfa.distance_to_accept(dfa.num_states)
    # the length bound: None only where it may be unbounded, else at least the longest string
    longest = dfa.max_length()
    assert dfa.length_bound is None or (longest is not None and longest <= dfa.length_bound)
    assert (longest is None) <= (dfa.length_bound is None)


def _sample(fsm: TokenFSM, rng: random.Random, budget: int) -> tuple[list[int], bool]:
    """Uniform random tokens from budget-restricted rows; returns (tokens, ended accepting)."""
    cur = fsm.cursor()
    vocab = fsm.vocab
    for i in range(budget):
        row = fsm.row(cur.budget_row_index(budget - i))
        allowed = np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")[: vocab.size])
        assert allowed.size
        tok = int(rng.choice(allowed.tolist()))
        if tok in vocab.eos_token_ids:
            break
        cur.advance(tok)
        if cur.is_accepting() and not fsm.can_continue(cur.state):
            break
    return cur.tokens(), cur.is_accepting()


def test_budget_rows_always_end_accepting(gpt2_vocab: Vocabulary) -> None:
    """Uniformly random tokens (the worst model) from budget rows end accepted within any
    budget ≥ the shortest output's bytes; without the budget they are usually cut."""
    assert gpt2_vocab.covers_every_byte
    props = {"a": {"type": "number"}, "b": {"type": "array", "items": {"type": "string"}}}
    schema = {"type": "object", "properties": props, "required": ["a", "b"]}
    fsm = TokenFSM(compile_lazy(schema_to_ir(schema, SchemaOptions())[0]), gpt2_vocab)
    shortest = fsm.distance(fsm.initial)
    assert shortest == len(b'{"a": 0, "b": []}')
    rng = random.Random(0)
    for budget in [shortest, shortest + 1, 24, 40, 64]:
        for _ in range(6):
            toks, ok = _sample(fsm, rng, budget)
            assert ok and len(toks) <= budget, (budget, gpt2_vocab.decode_bytes(toks))
            assert fsm.dfa.accepts(gpt2_vocab.decode_bytes(toks))
    # the plain rows at the same budget: random tokens rarely finish a number and an array
    cut = 0
    for _ in range(10):
        cur = fsm.cursor()
        for _ in range(24):
            allowed = fsm.allowed_token_ids(cur.state)
            tok = int(rng.choice(allowed.tolist()))
            if tok in gpt2_vocab.eos_token_ids:
                break
            cur.advance(tok)
        cut += not cur.is_accepting()
    assert cut > 0


def test_budget_row_contract(gpt2_vocab: Vocabulary) -> None:
    fsm = TokenFSM(compile_lazy(schema_to_ir(BUDGET_SCHEMAS[2], SchemaOptions())[0]), gpt2_vocab)
    s = fsm.initial
    bound = fsm.dfa.distance_bound
    assert bound is not None
    # a loose budget is the plain row, with no successor walk
    assert fsm.budgets.row_index(s, bound + 1) == fsm.mask_row_index(s) and s not in fsm.budgets
    # a tight one is a subset of it; a hopeless one keeps the tokens nearest to acceptance
    plain = fsm.allowed_token_ids(s)
    for left in (1, 2, 5, fsm.budgets.successor_distance(s)):
        row = fsm.row(fsm.budgets.row_index(s, left))
        got = np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")[: gpt2_vocab.size])
        assert got.size and set(got.tolist()) <= set(plain.tolist())
        for t in got.tolist():
            assert fsm.distance(fsm.next_state(s, t)) <= max(left - 1, fsm.distance(s) - 1)
    assert fsm.budgets.row_index(s, fsm.budgets.successor_distance(s) + 1) == fsm.mask_row_index(s)
    with pytest.raises(ValueError, match="tokens_left must be >= 1"):
        fsm.budgets.row_index(s, 0)
    # budget rows travel with the pickle
    r = fsm.budgets.row_index(s, 3)
    clone = pickle.loads(pickle.dumps(fsm))
    assert clone.budgets.row_index(s, 3) == r and np.array_equal(clone.row(r), fsm.row(r))


def test_extension_allowed_matches_the_mask_row(gpt2_vocab: Vocabulary) -> None:
    """Jump-forward's back-off question, answered by the targeted walk, equals the answer
    read off the full mask row, for every allowed token of states along a real path."""
    from bisect import bisect_left

    from structgen.fsm.cursor import prefix_successor

    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6}, "n": {"enum": [1, 12, 123]}}}
    from structgen.fsm import Constraint, compile

    fsm = compile(Constraint.json_schema(schema), gpt2_vocab)
    order, sorted_bytes = gpt2_vocab.sorted_order
    ids = gpt2_vocab.encode_bytes(b'{"name": "ab", "n": 12}')
    assert ids is not None
    cur = fsm.cursor()
    checked = 0
    for tok in [*ids, None]:
        before = cur.state
        row = fsm.mask_row(before)
        for t in fsm.allowed_token_ids(before).tolist()[:400]:
            last = gpt2_vocab.token_bytes[t]
            if not last:
                continue
            lo = bisect_left(sorted_bytes, last) + 1
            succ = prefix_successor(last)
            hi = len(sorted_bytes) if succ is None else bisect_left(sorted_bytes, succ)
            if lo >= hi:
                continue
            cand = order[lo:hi]
            want = bool(((row[cand >> 5] >> (cand & 31)) & 1).any())
            assert fsm.extension_allowed(fsm.next_state(before, t), len(last), lo, hi) == want, (before, last)
            checked += 1
        if tok is not None:
            cur.advance(tok)
    assert checked > 100


def test_within_distance_is_exact_and_free_under_the_bound(gpt2_vocab: Vocabulary) -> None:
    """``within_distance`` answers ``distance(state) <= limit`` for every state and limit, and
    builds no automaton state when the bound on every state's distance settles it."""
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}, "n": {"type": "integer"}}, "required": ["name"]}
    node = schema_to_ir(schema, SchemaOptions())[0]
    fsm = TokenFSM(compile_lazy(node), gpt2_vocab)
    bound = fsm.dfa.distance_bound
    assert bound is not None
    built = fsm.num_states
    assert fsm.within_distance(fsm.initial, bound) and fsm.num_states == built
    cur = fsm.cursor()
    for t in gpt2_vocab.encode_bytes(b'{"name": "Ada Lovelace", "n": 36}') or []:
        cur.advance(t)
        d = fsm.distance(cur.state)
        for limit in range(max(d - 2, 0), d + 3):
            assert fsm.within_distance(cur.state, limit) == (d <= limit)


def test_built_fragments_change_no_row_and_no_state(gpt2_vocab: Vocabulary) -> None:
    """An FSM whose NFA fragments were built ahead (as a compile process ships it) serves the
    same rows and states as a lazy copy, token by token, and builds no fragment while serving
    but the pairs of its bounded string (a plain length product, built as they are reached)."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20}, "tags": {"type": "array", "items": {"enum": ["a", "bc"]}}},
        "required": ["name"],
    }
    node = schema_to_ir(schema, SchemaOptions())[0]
    lazy = TokenFSM(compile_lazy(node), gpt2_vocab)
    eager = pickle.loads(pickle.dumps(lazy))
    eager.vocab = gpt2_vocab
    assert eager.build_fragments(float("inf")) > 0
    pending = eager.dfa.builder.pending
    assert pending and all(isinstance(node, CountedState) for node, _exit in pending.values())
    built = len(eager.dfa.eps)
    a, b = lazy.cursor(), eager.cursor()
    for t in gpt2_vocab.encode_bytes(b'{"name": "Ada L.", "tags": ["a", "bc", "a"]}') or []:
        assert np.array_equal(lazy.mask_row(a.state), eager.mask_row(b.state))
        assert lazy.is_accepting(a.state) == eager.is_accepting(b.state)
        a.advance(t)
        b.advance(t)
    assert a.is_accepting() and b.is_accepting()
    assert all(isinstance(node, CountedState) for node, _exit in eager.dfa.builder.pending.values())
    assert any(eager.dfa.counted_row(s) is not None for s in range(1, eager.num_states))
    # every NFA state made while serving is a pair's: its character layer, the exit made just
    # before the layer, or the stub of a pair at the next count
    products = eager.dfa.builder.length_products
    assert products is not None
    layers, stubs = set(products._entries), set(products._stubs.values())
    new = set(range(built, len(eager.dfa.eps)))
    assert new and new <= layers | stubs | {q - 1 for q in layers}


def test_a_fragment_that_fails_to_build_stays_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build that raises (a state cap hit while a lazy fragment is built) leaves the stub
    pending, so the automaton never loses the strings through it: the next expansion retries."""
    from structgen.fsm.errors import GrammarCompileError

    dfa = compile_lazy(regex_to_ir("a(b|c)d[0-9]{1,3}"))
    assert dfa.builder.pending
    q = next(iter(dfa.builder.pending))

    def failing_build(node: Any) -> tuple[int, int]:
        raise GrammarCompileError("automaton exceeds max_nfa_states")

    monkeypatch.setattr(dfa.builder, "build", failing_build)
    with pytest.raises(GrammarCompileError):
        dfa.builder.expand_stub(q)
    assert q in dfa.builder.pending
    monkeypatch.undo()
    assert dfa.accepts(b"acd12") and dfa.accepts(b"abd7") and not dfa.accepts(b"ad1")


def test_a_dropped_grammar_is_freed_without_the_cyclic_collector(gpt2_vocab: Vocabulary) -> None:
    """A grammar that served (first-visit rows, shared tails, a cursor) goes by reference
    counting alone once dropped: the engine freezes serving grammars out of the cyclic
    collector (``gc.freeze``), so one held only by a reference cycle would never be freed."""
    import gc
    import weakref

    from structgen.fsm.compiler import GrammarCompiler
    from structgen.fsm.compiler_config import CompilerConfig
    from structgen.fsm.constraint import Constraint

    schema = {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}}}
    compiler = GrammarCompiler(gpt2_vocab, CompilerConfig(cache_size=0))
    fsm = compiler.compile(Constraint.json_schema(schema, SchemaOptions()))
    cur = fsm.cursor()
    ids = gpt2_vocab.encode_bytes(b'{"name": "abc", "tags": ["x", "yz"]}')
    assert ids is not None
    for t in ids:
        fsm.mask_row(cur.state)
        cur.advance(t)
    assert cur.is_accepting()
    ref = weakref.ref(fsm)
    builder = fsm.dfa.builder  # the lazy automaton's NFA builder, which holds the NFA
    assert builder is not None
    bref, lref = weakref.ref(builder), weakref.ref(builder.lengths)
    del builder
    was = gc.isenabled()
    gc.disable()
    try:
        del fsm, cur
        assert ref() is None
        assert bref() is None and lref() is None  # no builder ↔ length analyses cycle either
    finally:
        if was:
            gc.enable()


def test_encode_bytes_remembers_texts_and_ships_without_them(gpt2_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    """Jump-forward re-tokenizes the same short texts again and again: the vocabulary answers
    a text it has encoded from memory (the tokenizer's own ids, a fresh list each time, the
    refusals too), keeps at most ``ENCODE_MEMO`` texts, and a pickled copy carries none."""
    import pickle

    from structgen.fsm import vocab as vocab_module

    texts = [b'", "age": ', b"caf\xc3\xa9", b"\xff not UTF-8", b""]
    first = [gpt2_vocab.encode_bytes(t) for t in texts]
    calls: list[bytes] = []
    real = vocab_module.Vocabulary._encode_uncached
    monkeypatch.setattr(vocab_module.Vocabulary, "_encode_uncached", lambda self, data: calls.append(data) or real(self, data))
    again = [gpt2_vocab.encode_bytes(t) for t in texts]
    assert again == first and not calls  # from memory
    assert first[2] is None and gpt2_vocab.decode_bytes(first[0] or []) == texts[0]
    again[0].append(0)  # type: ignore[union-attr]
    assert gpt2_vocab.encode_bytes(texts[0]) == first[0]  # callers get their own list
    copy = pickle.loads(pickle.dumps(gpt2_vocab))
    assert copy._encoded == {} and copy.encode_bytes(texts[1]) == first[1] and calls == [texts[1]]
    monkeypatch.setattr(vocab_module, "ENCODE_MEMO", 3)
    for i in range(5):
        gpt2_vocab.encode_bytes(b"x" * (i + 1))
    assert len(gpt2_vocab._encoded) <= 3
