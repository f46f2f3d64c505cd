"""Lazy length products (``fsm/length_product.py``): a string pattern or format under a length
bound, built pair by pair, against the eager product on the same IR (exhaustively over small
alphabets), and on the real-world bounds that pass the state cap eagerly."""

from __future__ import annotations

import itertools
import json
import pickle
import random
from typing import Any

import jsonschema
import numpy as np
import pytest
from structgen.fsm import CompilerConfig, GrammarCompiler, TokenFSM, Vocabulary
from structgen.fsm import length_product as lp
from structgen.fsm.compile_process import ship_blob
from structgen.fsm.constraint import Constraint
from structgen.fsm.counted_rows import CharNeeds
from structgen.fsm.dfa import DEAD
from structgen.fsm.dfa_paths import distances_to_accept
from structgen.fsm.lazy_compile import compile_lazy
from structgen.fsm.nfa import NFABuilder, compile_dfa
from structgen.schemas.json_schema import schema_to_ir

from structgen.bench.conformance import accepts_tokens, sample_strings

from .conftest import GPT2_DIR

# (schema, alphabet of the strings tried exhaustively, longest string tried)
EXHAUSTIVE: list[tuple[Any, str, int]] = [
    ({"type": "string", "pattern": "^[a-z]+( [a-z]+)*$", "maxLength": 5}, "ab ", 6),
    ({"type": "string", "pattern": r"^(\S+\s+){0,2}\S+$", "maxLength": 5, "minLength": 1}, "a \t", 6),
    ({"type": "string", "pattern": "^ab+$", "maxLength": 5, "minLength": 2}, "ab", 6),  # lo implied by the pattern
    ({"type": "string", "pattern": '^[a"\\\\\\n]+$', "maxLength": 4}, 'a"\\\n', 5),  # escapes count one character
    ({"type": "string", "pattern": "^[aé€😀]+$", "maxLength": 4}, "aé€😀", 5),  # 1- to 4-byte characters
    ({"type": "string", "format": "email", "maxLength": 7}, "a@.b", 8),
]


def _validator(schema: Any) -> Any:
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


@pytest.fixture
def always_lazy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lp, "LAZY_MIN_PRODUCT", 0)  # every bounded content built lazily, however small


@pytest.mark.parametrize(("schema", "alphabet", "longest"), EXHAUSTIVE)
def test_the_lazy_product_is_the_eager_one(always_lazy: None, schema: Any, alphabet: str, longest: int) -> None:
    ir = schema_to_ir(schema)[0]
    lazy = compile_lazy(ir)
    eager = compile_dfa(ir)  # a builder without stubs: the eager product
    validator = _validator(schema)
    for n in range(longest + 1):
        for chars in itertools.product(alphabet, repeat=n):
            text = json.dumps("".join(chars), ensure_ascii=False).encode()
            expected = eager.walk(eager.initial, text) != DEAD and bool(eager.accepting[eager.walk(eager.initial, text)])
            assert lazy.accepts(text) == expected, text
            if expected or "format" not in schema:  # a format is a narrowing of what its checker accepts
                assert validator.is_valid(json.loads(text)) == expected, text
    rng = random.Random(0)
    for text in sample_strings(lazy, 60, rng):
        assert validator.is_valid(json.loads(text)), text
    assert lazy.builder.length_products is not None and lazy.builder.length_products.occurrences, "not built lazily"


@pytest.mark.parametrize(("schema", "alphabet", "longest"), EXHAUSTIVE[:3])
def test_distances_to_acceptance_are_exact(always_lazy: None, schema: Any, alphabet: str, longest: int) -> None:
    """The shortest way out of every state a walk reaches equals the eager automaton's (the
    pairs' shortest strings are exact, not bounds)."""
    ir = schema_to_ir(schema)[0]
    lazy = compile_lazy(ir)
    eager = compile_dfa(ir)
    eager_dist = distances_to_accept(eager.table, eager.accepting)
    for n in range(longest):
        for chars in itertools.product(alphabet, repeat=n):
            text = json.dumps("".join(chars), ensure_ascii=False).encode()[:-1]  # the open string
            e = eager.walk(eager.initial, text)
            s = lazy.walk(lazy.initial, text)
            assert (e == DEAD) == (s == DEAD), text
            if e != DEAD:
                assert lazy.distance_to_accept(s) == int(eager_dist[e]), text


def test_a_bound_the_pattern_does_not_imply_keeps_the_eager_product(always_lazy: None) -> None:
    schema = {"type": "string", "pattern": "^a+$", "minLength": 3, "maxLength": 5}
    lazy = compile_lazy(schema_to_ir(schema)[0])
    for n in range(7):
        assert lazy.accepts(json.dumps("a" * n).encode()) == (3 <= n <= 5)
    assert lazy.builder.length_products is not None and not lazy.builder.length_products.occurrences


def test_an_unreachable_bound_is_the_empty_language(always_lazy: None) -> None:
    from structgen.fsm.errors import GrammarCompileError

    with pytest.raises(GrammarCompileError, match="empty"):
        GrammarCompiler(Vocabulary.from_tokenizer(GPT2_DIR), CompilerConfig()).compile(
            Constraint.json_schema({"type": "string", "pattern": "^abcdef$", "maxLength": 3})
        )


REAL_WORLD = [
    ({"type": "string", "format": "email", "maxLength": 254}, "x" * 242 + "@example.com"),
    ({"type": "string", "format": "uri", "maxLength": 2048}, "https://example.com/" + "p" * 2028),
    ({"type": "string", "format": "hostname", "maxLength": 253}, ".".join(["a" * 62] * 4) + ".b"),
    ({"type": "string", "pattern": r"^(?:\S+\s+){0,49}\S+$", "maxLength": 500}, " ".join(["word"] * 50) + "x" * 300),
]


@pytest.mark.parametrize(("schema", "longest"), REAL_WORLD, ids=["email-254", "uri-2048", "hostname-253", "words-500"])
def test_long_bounds_compile_and_are_exact_at_the_bound(schema: Any, longest: str) -> None:
    """Bounds whose eager product passes the state cap compile; the longest valid string is
    accepted and one character more is not; random strings validate."""
    lazy = compile_lazy(schema_to_ir(schema)[0])
    validator = _validator(schema)
    at_bound = longest[: schema["maxLength"]]
    assert len(at_bound) == schema["maxLength"] and validator.is_valid(at_bound)
    over = at_bound[:1] + at_bound  # one more character, still matching the format or pattern
    assert not validator.is_valid(over)
    assert lazy.accepts(json.dumps(at_bound).encode())
    assert not lazy.accepts(json.dumps(over).encode())
    for text in sample_strings(lazy, 40, random.Random(1)):
        assert validator.is_valid(json.loads(text)), text


def test_a_shipped_grammar_keeps_expanding_pairs() -> None:
    """A compile process ships the grammar with its pairs still lazy; the copy (the engine's)
    builds the rest as tokens arrive, and accepts exactly what the original does."""
    vocab = Vocabulary.from_tokenizer(GPT2_DIR)
    compiler = GrammarCompiler(vocab, CompilerConfig(cache_size=0))
    schema = {"type": "object", "properties": {"email": {"type": "string", "format": "email", "maxLength": 254}}, "required": ["email"]}
    fsm = compiler.compile(Constraint.json_schema(schema))
    from structgen.fsm.compile_process import state_without_vocab

    blob = ship_blob(fsm)
    assert len(blob) < 4 << 20  # the pairs were not built whole before shipping
    state = pickle.loads(pickle.dumps(state_without_vocab(fsm)))
    copy = type(fsm).__new__(type(fsm))
    copy.__setstate__({**state, "vocab": vocab})
    assert isinstance(copy.dfa.builder, NFABuilder)
    assert any(isinstance(node, lp.CountedState) for node, _exit in copy.dfa.builder.pending.values())
    products = copy.dfa.builder.length_products
    assert products is not None and products.ahead == 0  # far positions are built ahead only during a whole expansion
    for local in ("a" * 230, "first.last", "a" * 243):
        text = json.dumps({"email": local + "@example.com"})
        ids = vocab.encode_bytes(text.encode())
        assert ids is not None
        expected = len(local) + len("@example.com") <= 254
        assert accepts_tokens(copy, ids) == expected == accepts_tokens(fsm, ids), local[:12]


def test_a_content_automaton_past_the_cap_names_its_subschema() -> None:
    """The content automaton is built to decide whether to go lazy; past the cap there, the
    error names the subschema as an eager product's would."""
    from structgen.fsm.errors import GrammarCompileError

    schema = {"type": "object", "properties": {"p": {"type": "string", "pattern": "^(a|b)*a(a|b){20}$", "maxLength": 60}}}
    with pytest.raises(GrammarCompileError, match="max_states") as info:
        GrammarCompiler(Vocabulary.from_tokenizer(GPT2_DIR), CompilerConfig()).compile(Constraint.json_schema(schema))
    assert str(info.value).endswith("of the subschema at #/properties/p")


@pytest.mark.parametrize("bound", [4, 30])
def test_mask_rows_far_from_the_bound_are_the_eager_rows(monkeypatch: pytest.MonkeyPatch, tiny_vocab: Vocabulary, bound: int) -> None:
    """Far from the bound a pair's row is read off its count-0 pair (one walk for all
    positions); every row met on random walks equals the eager product's, near the bound too."""
    schema = {"type": "string", "pattern": "^[ab]+( [ab]+)*$", "maxLength": bound}
    monkeypatch.setattr(lp, "LAZY_MIN_PRODUCT", 1 << 40)
    eager = GrammarCompiler(tiny_vocab, CompilerConfig(cache_size=0)).compile(Constraint.json_schema(schema))
    monkeypatch.setattr(lp, "LAZY_MIN_PRODUCT", 0)
    lazy = GrammarCompiler(tiny_vocab, CompilerConfig(cache_size=0)).compile(Constraint.json_schema(schema))
    assert lazy.dfa.builder.length_products is not None and not eager.dfa.builder.length_products.occurrences  # type: ignore[union-attr]
    rng = random.Random(bound)
    shared = 0
    for _walk in range(20):
        cl, ce = lazy.cursor(), eager.cursor()
        while not ce.finished:
            allowed = eager.allowed_token_ids(ce.state)
            assert np.array_equal(lazy.allowed_token_ids(cl.state), allowed)
            shared += lazy.dfa.row_representative(cl.state, tiny_vocab.max_token_bytes) != cl.state
            token = int(rng.choice(allowed.tolist()))
            if token in tiny_vocab.eos_token_ids:
                break
            cl.advance(token)
            ce.advance(token)
    assert (shared > 0) == (bound == 30)  # far pairs only exist under the longer bound


PLAIN = [
    {"type": "string", "maxLength": 12},
    {"type": "string", "minLength": 3, "maxLength": 40},
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 9}, "b": {"type": "string", "maxLength": 300}}},
    {"type": "array", "items": {"anyOf": [{"type": "string", "maxLength": 6}, {"type": "string", "maxLength": 20}]}, "maxItems": 3},
]


def _shipped_copy(fsm: TokenFSM, vocab: Vocabulary) -> TokenFSM:
    """``fsm`` as a compile process ships it (fragments built whole, expanded whole where that
    fits) and the engine or a row worker loads it."""
    state = pickle.loads(ship_blob(fsm))
    copy = TokenFSM.__new__(TokenFSM)
    copy.__setstate__({**state, "vocab": vocab})
    return copy


@pytest.mark.parametrize("shipped", [False, True], ids=["lazy", "shipped"])
@pytest.mark.parametrize("schema", PLAIN, ids=["short", "min-max", "object", "any-of"])
def test_plain_bounded_strings_cut_their_rows_from_the_relaxed_row(gpt2_vocab: Vocabulary, schema: Any, shipped: bool) -> None:
    """A ``maxLength`` alone is a plain length product; each position's row, cut from its
    relaxed state's row by the tokens' character needs, is the row a trie walk of that very
    state gives, at every position of random walks (near the bound, inside escapes and UTF-8
    sequences, where two bounds overlap); instances at and past the bound go as JSON Schema says.
    The same in a shipped copy, whose fragments the compile process built whole: its bounded
    strings are plain products too, not counters unrolled one state per position."""
    fsm = GrammarCompiler(gpt2_vocab, CompilerConfig(cache_size=0)).compile(Constraint.json_schema(schema))
    if shipped:
        fsm = _shipped_copy(fsm, gpt2_vocab)
    rng = random.Random(7)
    planned = 0
    for _walk in range(12):
        cur = fsm.cursor()
        for _step in range(60):
            state = cur.state
            walked = gpt2_vocab.trie.mask_bits(fsm.dfa, state)
            if fsm.is_accepting(state):
                walked[gpt2_vocab.eos_token_ids[0] >> 5] |= np.uint32(1 << (gpt2_vocab.eos_token_ids[0] & 31))
            planned += fsm.dfa.counted_row(state) is not None
            assert np.array_equal(fsm.mask_row(state).view(np.uint32), walked)
            allowed = [t for t in fsm.allowed_token_ids(state).tolist() if t not in gpt2_vocab.special_ids]
            if not allowed:
                break
            cur.advance(rng.choice(allowed))
    assert planned > 0
    if not fsm.dfa.complete:
        products = fsm.dfa.builder.length_products
        assert products is not None and products.has_plain
    validator = _validator(schema)
    for value in ("", "ab", "é" * 12, 'a"\\\n' * 3, "\u0001" * 7, "x" * 40, "😀" * 41, ["a" * 6, "b" * 20, "c" * 21]):
        text = json.dumps({"a": value, "b": value} if schema.get("type") == "object" else value, ensure_ascii=False)
        ids = gpt2_vocab.encode_bytes(text.encode())
        assert ids is not None
        if schema.get("type") == "array" and not isinstance(value, list):
            continue
        assert accepts_tokens(fsm, ids) == validator.is_valid(json.loads(text)), text


def test_character_needs_of_tokens(tiny_vocab: Vocabulary) -> None:
    """A token's need: the characters it completes before the string's closing quote (when a
    character boundary is there), else those it completes plus one left open; special tokens 0."""
    fsm = GrammarCompiler(tiny_vocab, CompilerConfig(cache_size=0)).compile(Constraint.json_schema({"type": "string", "maxLength": 30}))
    automaton = next(a for a, _x in fsm.dfa.builder.length_products.occurrences if a.plain)  # type: ignore[union-attr]
    needs = tiny_vocab.char_needs.needs(automaton)
    by_bytes = {b: int(needs[i]) for i, b in enumerate(tiny_vocab.token_bytes)}
    assert by_bytes[b"<eos>"] == 0  # special
    assert by_bytes[b'"'] == 0 and by_bytes[b'":'] == 0  # the quote closes at once
    assert by_bytes[b"{"] == 1 and by_bytes[b" "] == 1
    for token, need in by_bytes.items():
        if token.startswith(b"\xc3") and len(token) == 1:
            assert need == 1  # a lead byte: one character left open
    within = tiny_vocab.char_needs.within(automaton, 0)
    bits = np.unpackbits(within.view(np.uint8), bitorder="little")[: tiny_vocab.size]
    assert bits.tolist() == [int(n <= 0) for n in needs.tolist()]
    # a tail's need (the bytes after the first) is the need of the tail as a token of its own
    tails = CharNeeds([b[1:] for b in tiny_vocab.token_bytes], tiny_vocab.special_ids).needs(automaton)
    order = np.arange(tiny_vocab.size, dtype=np.int32)[::-1].copy()
    for room in (0, 1, 3):
        cut = tiny_vocab.char_needs.tail_within(automaton, room, order)
        bits = np.unpackbits(cut.view(np.uint8), bitorder="little")[: tiny_vocab.size]
        assert bits.tolist() == [int(tails[t] <= room) for t in order.tolist()]


def test_prepare_computes_the_one_need_table_bounded_strings_use(gpt2_vocab: Vocabulary) -> None:
    """``Vocabulary.prepare`` computes the character needs of the plain automaton's shape (of
    the tokens and of their tails), the tables every bounded string's rows are cut with: a
    compile and a cut row after it add none."""
    gpt2_vocab.prepare()
    needs = gpt2_vocab.char_needs
    tables = dict(needs._needs)
    assert len(tables) == 2  # the tokens' needs and their tails'
    fsm = GrammarCompiler(gpt2_vocab, CompilerConfig(cache_size=0)).compile(Constraint.json_schema({"type": "string", "maxLength": 30}))
    cur = fsm.cursor()
    cur.advance(gpt2_vocab.encode_bytes(b'"')[0])  # type: ignore[index]
    assert fsm.dfa.counted_row(cur.state) is not None
    fsm.mask_row(cur.state)
    assert needs._needs.keys() == tables.keys()


@pytest.mark.parametrize(
    "schema",
    [
        {
            "type": "object",
            "properties": {"a": {"type": "string", "maxLength": 12}, "b": {"type": "string", "maxLength": 30}},
            "required": ["a", "b"],
        },
        {"type": "string", "pattern": "^[a-z]+( [a-z]+)*$", "maxLength": 40},
        {"type": "string", "pattern": "^[aé€😀 ]+$", "maxLength": 24},
    ],
)
def test_positions_far_from_the_bound_build_the_per_pair_automaton(always_lazy: None, monkeypatch: pytest.MonkeyPatch, schema: Any) -> None:
    """A position far from the bound is built from its automaton's layer (all pairs at once);
    the completed automaton is the one built pair by pair, state for state."""
    ir = schema_to_ir(schema)[0]

    def complete() -> Any:
        dfa = compile_lazy(ir)
        assert dfa.builder.length_products is not None and dfa.complete_ahead(1e18, 1 << 20)
        return dfa

    calls = {"ahead": 0}
    build_ahead = lp.LengthProducts._build_ahead

    def counting(self: lp.LengthProducts, *args: Any) -> None:
        calls["ahead"] += 1
        build_ahead(self, *args)

    monkeypatch.setattr(lp.LengthProducts, "_build_ahead", counting)
    layered = complete()
    assert calls["ahead"] > 0 or "properties" not in schema  # the plain strings' far positions were built ahead
    monkeypatch.setattr(lp.CountedAutomaton, "far_layer", lambda self, count: False)
    per_pair = complete()
    assert layered.table.shape == per_pair.table.shape and np.array_equal(layered.table, per_pair.table)
    assert layered.acc == per_pair.acc


def test_a_layer_holds_one_character_position() -> None:
    """The plain automaton's layer from its start: the start first, one accepting state (the
    character boundary), and every run that completes a character leads back to the start."""
    chars = compile_dfa(lp.ANY_STRING_ENCODED, minimize=True)
    plain = lp.counted_automaton(chars, chars, 0, 50, plain=True)
    assert plain is not None
    layer = plain.layer(plain.initial)
    assert layer.states[0] == plain.initial and plain.layer(plain.initial) is layer
    assert [layer.states[i] for i in layer.accepting] == [plain.initial]
    assert {to for _i, _lo, _hi, to, completes in layer.runs if completes} == {plain.initial}
    assert plain.far_layer(lp.RELAXED) and plain.far_layer(0) and not plain.far_layer(50)


def test_plain_automata_are_made_once_and_pickled_without_their_layers() -> None:
    """Every compile of a process shares one plain automaton per bound, all bounds the same
    runs; a pickled copy (a shipped grammar's) carries no layers, and makes the same ones."""
    plain = lp.plain_automaton(40)
    assert lp.plain_automaton(40) is plain and lp.plain_automaton(7).edges is plain.edges and plain.hi == 40
    layer = plain.layer(plain.initial)
    copy = pickle.loads(pickle.dumps(plain))
    assert copy._layers == {} and plain._layers  # a cache, not shipped
    assert copy.layer(copy.initial) == layer and copy.shape_key() == plain.shape_key()
