"""The cross-compile cache of eager sub-automata: bounded by bytes, shared only between
structurally equal nodes, and invisible in what a compile produces."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from structgen.fsm.compiler import GrammarCompiler
from structgen.fsm.compiler_config import CompilerConfig
from structgen.fsm.constraint import Constraint
from structgen.fsm.dfa import ByteDFA
from structgen.fsm.product_cache import ProductCache, structural_key
from structgen.fsm.token_fsm import TokenFSM
from structgen.fsm.vocab import Vocabulary
from structgen.schemas.charset import CharSet
from structgen.schemas.ir import Alt, Chars, Lit, Minus, Node, Rep, Seq
from structgen.schemas.schema_options import SchemaOptions


def _dfa(states: int) -> ByteDFA:
    table = np.zeros((states, 256), dtype=np.int32)  # [S, 256]
    return ByteDFA(table=table, accepting=np.zeros(states, dtype=bool), initial=0, forced=(b"",) * states)


def test_the_cache_evicts_least_recently_used_past_its_bytes() -> None:
    one = _dfa(4).table.nbytes + 4  # 4 states: 4 KiB of table, 4 bytes of flags
    cache = ProductCache(max_bytes=4 * one + 10)
    for k in range(4):
        cache.put(("k", k), _dfa(4))
    assert cache.get(("k", 0)) is not None  # now the most recently used
    cache.put(("k", 4), _dfa(4))
    assert cache.get(("k", 1)) is None  # the least recently used went
    assert cache.get(("k", 0)) is not None and cache.get(("k", 4)) is not None
    stats = cache.stats()
    assert stats.entries == 4 and stats.bytes == 4 * one and stats.evictions == 1
    assert stats.hits == 3 and stats.misses == 1


def _key(node: Node) -> bytes:
    return structural_key(node, {}, [])


def test_structural_keys_tell_structures_apart_and_not_builders() -> None:
    def build(word: bytes, hi: int) -> Node:
        return Minus(Rep(Chars(CharSet(((97, 122),))), 0, hi), Alt((Lit(word), Seq((Lit(b"x"), Lit(b"y"))))))

    assert _key(build(b"ab", 8)) == _key(build(b"ab", 8))  # separate objects, one structure
    keys = {_key(build(b"ab", 8)), _key(build(b"ab", 9)), _key(build(b"ac", 8)), _key(Lit(b"ab")), _key(Seq((Lit(b"ab"),)))}
    assert len(keys) == 5


def test_a_structural_key_hashes_each_shared_sub_tree_once() -> None:
    node: Node = Lit(b"a")
    for _ in range(64):  # a DAG of 65 nodes, 2**64 paths: nested tuples would never finish hashing
        node = Seq((node, node))
    key = _key(node)
    assert isinstance(key, bytes) and len(key) == 20
    cache = ProductCache(max_bytes=1 << 20)
    cache.put(("product", key), _dfa(2))
    assert cache.get(("product", _key(node))) is not None


def test_a_dfa_over_a_quarter_of_the_cache_is_not_kept() -> None:
    cache = ProductCache(max_bytes=3 * (_dfa(4).table.nbytes + 4))
    cache.put(("big",), _dfa(4))
    assert cache.get(("big",)) is None and cache.stats().entries == 0
    with pytest.raises(ValueError, match="max_bytes"):
        ProductCache(-1)
    with pytest.raises(ValueError, match="product_cache_mb"):
        CompilerConfig(product_cache_mb=-1)


def _object(keys: list[str], extra_pattern: str) -> Constraint:
    """Objects with the declared ``keys`` and undeclared ones of a patterned, bounded shape:
    each compile intersects a pattern with a length bound and subtracts the declared names."""
    schema = {
        "type": "object",
        "properties": {k: {"type": "string", "format": "email", "maxLength": 40} for k in keys},
        "additionalProperties": {"type": "integer"},
        "propertyNames": {"pattern": extra_pattern, "maxLength": 12},
    }
    return Constraint.json_schema(schema, SchemaOptions(allow_undeclared_properties=True))


def _rows_along(fsm: TokenFSM, vocab: Vocabulary, text: str) -> list[bytes]:
    cur = fsm.cursor()
    rows = [fsm.mask_row(cur.state).tobytes()]
    ids = vocab.encode_bytes(text.encode())
    assert ids is not None
    for t in ids:
        cur.advance(t)
        rows.append(fsm.mask_row(cur.state).tobytes())
    assert cur.is_accepting()
    return rows


def test_a_second_schema_reuses_the_first_ones_sub_automata_and_compiles_the_same(gpt2_vocab: Vocabulary) -> None:
    shared = GrammarCompiler(gpt2_vocab, CompilerConfig(cache_size=0))
    alone = GrammarCompiler(gpt2_vocab, CompilerConfig(cache_size=0, product_cache_mb=0))
    assert shared.products is not None and alone.products is None
    shared.compile(_object(["a", "b"], "^[a-z]+$"))
    before = shared.products.stats()
    second = _object(["a", "c"], "^[a-z]+$")  # another schema: same formats and key shape, other names
    fsm = shared.compile(second)
    after = shared.products.stats()
    assert after.hits > before.hits  # the email and key automata came from the first compile
    ref = alone.compile(second)
    text = '{"a": "x@y.io", "c": "p@q.org", "zz": 5}'
    assert _rows_along(fsm, gpt2_vocab, text) == _rows_along(ref, gpt2_vocab, text)
    assert fsm.num_states == ref.num_states


def test_a_pickled_grammar_leaves_the_cache_behind(gpt2_vocab: Vocabulary) -> None:
    compiler = GrammarCompiler(gpt2_vocab, CompilerConfig(cache_size=0))
    fsm = compiler.compile(_object(["a"], "^[a-z]+$"))
    state = fsm.__getstate__()
    state.pop("vocab")
    back = TokenFSM.__new__(TokenFSM)
    back.__setstate__({**pickle.loads(pickle.dumps(state)), "vocab": gpt2_vocab})
    text = '{"a": "x@y.io", "q": 1}'
    assert _rows_along(back, gpt2_vocab, text) == _rows_along(fsm, gpt2_vocab, text)
    builder = getattr(getattr(back, "dfa", None), "builder", None)
    assert builder is None or builder.shared is None


def test_a_pickled_grammar_carries_no_object_ids_and_keeps_its_language(tiny_vocab: Vocabulary) -> None:
    """A grammar shipped to another process (pickled, as compile processes, row workers and the
    disk cache do) drops the builder's ``id(node)`` keys, which would name other objects there,
    and its copy, expanding its stubs and products afresh, accepts exactly what the original
    does."""
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "maxLength": 4, "not": {"enum": ["ab", "b"]}},
            "b": {"oneOf": [{"type": "integer", "maximum": 9}, {"type": "integer", "minimum": 5}]},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    fsm = GrammarCompiler(tiny_vocab, CompilerConfig()).compile(Constraint.json_schema(schema))
    builder = fsm.dfa.builder
    assert builder is not None and builder._node_ids and builder._keep  # ids of this process
    copy = pickle.loads(pickle.dumps(fsm))
    shipped = copy.dfa.builder
    assert shipped._node_ids == {} and shipped._keep == []
    assert shipped.lengths._shortest == builder.lengths._shortest  # structural memos travel
    assert shipped.lengths._nullable == builder.lengths._nullable
    # operand DFAs stay behind, and products only the fragments built already embedded
    assert shipped.child_dfas == {} and builder.child_dfas
    kept = set(shipped._products)
    assert kept <= set(builder._products)
    texts = [
        '{"a": "ab", "b": 3}', '{"a": "abc", "b": 3}', '{"a": "b", "b": 12}', '{"a": "", "b": 12}',
        '{"a": "abcd", "b": 7}', '{"a": "abcd", "b": 4}', '{"a": "abcde", "b": 1}', '{"a": "ba", "b": 10}',
    ]  # fmt: skip
    got = [copy.dfa.accepts(t.encode()) for t in texts]
    assert got == [fsm.dfa.accepts(t.encode()) for t in texts]
    assert got == [False, True, False, True, False, True, False, True]  # 5..9 match both branches
    assert copy.dfa.distance_to_accept(copy.dfa.initial) == fsm.dfa.distance_to_accept(fsm.dfa.initial)
    assert set(shipped._products) == kept and shipped.child_dfas == {}  # the copy rebuilt none


def test_structural_ids_are_equal_exactly_for_equal_structures() -> None:
    from structgen.fsm.dfa import Budget
    from structgen.fsm.nfa import NFABuilder
    from structgen.schemas.ir import And, Join, Members

    def build(word: bytes, hi: int, required: bool) -> list[Node]:
        a = Chars(CharSet(((97, 122),)))
        return [
            Lit(word),
            Seq((Lit(word), a)),
            Alt((Lit(word), a)),
            And((Lit(word), a)),
            Rep(a, 0, hi),
            Join(a, Lit(b","), 1, hi),
            Members(((Lit(word), required), (a, True)), Lit(b","), None),
            Members(((Lit(word), required), (a, True)), Lit(b","), a),
            Minus(Rep(a, 0, hi), Lit(word)),
        ]

    builder = NFABuilder(Budget())
    ids = [builder.structural_id(n) for n in build(b"ab", 8, True)]
    assert ids == [builder.structural_id(n) for n in build(b"ab", 8, True)]  # separate objects, one structure
    assert len(set(ids)) == len(ids)  # a Seq, an Alt and an And of the same children differ
    word = [builder.structural_id(n) for n in build(b"ac", 8, True)]
    assert [x != y for x, y in zip(ids, word)] == [True] * 4 + [False, False] + [True] * 3
    bound = [builder.structural_id(n) for n in build(b"ab", 9, True)]
    assert [x != y for x, y in zip(ids, bound)] == [False, False, False, False, True, True, False, False, True]
    optional = [builder.structural_id(n) for n in build(b"ab", 8, False)]
    assert [x != y for x, y in zip(ids, optional)] == [False] * 6 + [True, True, False]


def test_prune_keeps_nodes_with_nothing_to_prune_and_rewrites_the_rest() -> None:
    from structgen.fsm.dfa import Budget
    from structgen.fsm.nfa import NFABuilder
    from structgen.fsm.prune import prune
    from structgen.schemas.ir import NOTHING, Join, Members

    a = Chars(CharSet(((97, 122),)))
    members = Members(((a, True), (a, False)), Lit(b","), None)
    whole = Seq((Lit(b"{"), Alt((a, Lit(b"x"))), Rep(a, 1, 3), Join(a, Lit(b","), 0, None), members))
    assert prune(whole, NFABuilder(Budget()), {}) is whole  # nothing empty: the very node, so memos by identity hold
    empty = Chars(CharSet(()))
    pruned = prune(Seq((Lit(b"{"), Alt((a, empty)), Members(((a, True), (empty, False)), Lit(b","), None))), NFABuilder(Budget()), {})
    assert _key(pruned) == _key(Seq((Lit(b"{"), a, Members(((a, True),), Lit(b","), None))))
    assert prune(Seq((Lit(b"{"), empty)), NFABuilder(Budget()), {}) is NOTHING


def test_a_shipped_unfinished_automaton_loads_its_nfa_only_when_it_needs_it(tiny_vocab: Vocabulary) -> None:
    """The NFA side of an unfinished automaton travels as one blob: states already built serve
    without it, the first expansion loads it, and a copy of a copy (loaded or not) behaves the
    same as the original."""
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 6}, "b": {"type": "integer"}}, "required": ["a"]}
    fsm = GrammarCompiler(tiny_vocab, CompilerConfig()).compile(Constraint.json_schema(schema))
    assert not fsm.dfa.complete and fsm.dfa.nfa_loaded
    built = fsm.dfa.num_states
    copy = pickle.loads(pickle.dumps(fsm))
    dfa = copy.dfa
    assert not dfa.nfa_loaded and dfa.num_states == built  # the built states come without the NFA
    assert dfa.table.shape[0] == built < fsm.dfa.table.shape[0]  # and without the table's spare capacity
    again = pickle.loads(pickle.dumps(copy))  # passed on unloaded: the blob travels as it is
    assert not dfa.nfa_loaded and not again.dfa.nfa_loaded
    texts = ['{"a": "abcdef"}', '{"a": "abcdefg"}', '{"a": "", "b": -12}', '{"b": 1}', '{"a": "x", "b": 1.5}']
    want = [fsm.dfa.accepts(t.encode()) for t in texts]
    assert want == [True, False, True, False, False]
    assert [dfa.accepts(t.encode()) for t in texts] == want  # walking new states loads the NFA on the way
    assert dfa.nfa_loaded and dfa.builder is not None and dfa.edges is dfa.builder.nfa.edges  # one NFA, shared as before
    assert [again.dfa.accepts(t.encode()) for t in texts] == want
    third = pickle.loads(pickle.dumps(copy))  # a loaded copy ships its NFA as a blob again
    assert not third.dfa.nfa_loaded and [third.dfa.accepts(t.encode()) for t in texts] == want
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = dfa.nothing  # type: ignore[attr-defined]
