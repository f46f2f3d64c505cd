"""The compiled expansion step (fsm/_lazy_expand.c) against the Python subset construction."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from structgen.fsm import lazy_dfa
from structgen.fsm.lazy_compile import compile_lazy
from structgen.fsm.lazy_dfa import LazyDFA
from structgen.schemas.ir import Node
from structgen.schemas.json_schema import schema_to_ir
from structgen.schemas.regex_assertions import regex_to_ir

from .test_dfa_compiled import paired_walk
from .test_regex import _regex

pytestmark = pytest.mark.skipif(lazy_dfa._c_expand_state is None, reason="the compiled expansion was not built (no compiler at install)")


def _pair(node: Node) -> tuple[LazyDFA, LazyDFA]:
    compiled, python = compile_lazy(node), compile_lazy(node)
    python.use_compiled = False
    return compiled, python


def assert_isomorphic(a: LazyDFA, b: LazyDFA, limit: int = 3000) -> int:
    """Walk both automata breadth-first from their initial states, expanding as they go, and
    check that the state pairing is a bijection that keeps acceptance and every transition (the
    NFA sets may differ where fragments were built in another order).  Returns the states
    paired."""
    assert a.num_classes == b.num_classes
    return paired_walk(a.initial, b.initial, lambda s: (a.acc[s], a.expand(s).tolist()), lambda s: (b.acc[s], b.expand(s).tolist()), limit)


@settings(max_examples=120, deadline=None, derandomize=True)
@given(_regex())
def test_compiled_expansion_builds_the_same_automaton(pattern: str) -> None:
    a, b = _pair(regex_to_ir(pattern))
    assert_isomorphic(a, b)


@pytest.mark.parametrize(
    "schema",
    [
        {
            "type": "object",
            "properties": {"s": {"type": "string", "minLength": 1, "maxLength": 40}, "n": {"type": "integer", "maximum": 10**6}},
            "required": ["s"],
        },
        {"type": "array", "items": {"enum": ["junior", "mid", "senior", {"a": [1, 2]}]}, "maxItems": 5},
        {"type": "object", "additionalProperties": {"type": "number"}, "minProperties": 1, "maxProperties": 3},
        {"anyOf": [{"type": "string", "pattern": "^[a-z]{2,8}@[a-z]+\\.com$"}, {"type": "null"}, {"type": "boolean"}]},
    ],
)
def test_compiled_expansion_on_json_schemas(schema: dict) -> None:
    """Schemas whose lazily built fragments are met by the compiled step's closures (built by
    the caller between its calls): the automata still agree state for state."""
    node, _ = schema_to_ir(schema)
    a, b = _pair(node)
    assert assert_isomorphic(a, b) > 10


def test_closures_past_the_compiled_limit_go_through_the_memoizing_search() -> None:
    """``x{0,n}`` chains closures far past C_CLOSURE NFA states: the compiled step hands each
    such seed to the SCC search (which memoizes the whole chain), goes on in C, and the
    language stays exact; shorter chains (past SMALL_CLOSURE only) stay in C."""
    for n in (600, 150):
        node = regex_to_ir(f"(?:a|bc){{0,{n}}}d(?:e*f)*")
        a, b = _pair(node)
        for k in (0, 1, 64, n - 1, n):
            assert a.accepts(b"a" * k + b"d") and a.accepts(b"bc" * k + b"def" + b"eef")
            assert not a.accepts(b"a" * k + b"b" + b"d")
        assert not a.accepts(b"a" * (n + 1) + b"d")
        if n > lazy_dfa.C_CLOSURE:
            assert len(a._closures) > 5 * n  # every exit of the chain memoized, not only the seeds
        else:
            assert n > 2 * lazy_dfa.SMALL_CLOSURE
        assert_isomorphic(a, b)


def test_expand_state_writes_the_row_hands_back_what_it_cannot_do_and_rejects_bad_input() -> None:
    """The row and new states as the Python step makes them; s for a closure through the
    pending stub s and -(s + 1) for a closure of s past ``small_limit`` (the caller builds or
    searches, then calls again); False past ``max_states``; ValueError for malformed input."""
    from structgen.fsm._lazy_expand import expand_state

    def fresh() -> LazyDFA:
        d = compile_lazy(regex_to_ir("(?:a|bc){0,40}d"))
        d.build_fragments(time.perf_counter() + 60)
        assert not d.builder.pending
        d._grow(64)
        return d

    def call(d: LazyDFA, **over: object) -> object:
        args = {
            "state": d.initial, "sets": d.sets, "acc": d.acc, "index": d.index, "table": d.table, "edges": d.edges,
            "class_of_byte": d.class_of_byte, "num_classes": d.num_classes, "eps": d.eps, "has_edges": d.has_edges,
            "pending": d.builder.pending, "final": d.final, "memo": d._closures, "small_limit": 64, "max_states": 1000,
        }  # fmt: skip
        args.update(over)
        return expand_state(*args.values())

    c, p = fresh(), fresh()
    p.use_compiled = False
    assert call(c) is None
    np.testing.assert_array_equal(c.table[c.initial], p.expand(p.initial))
    assert c.num_states == p.num_states and c.sets[1:] == p.sets[1:] and c.acc == p.acc

    d = fresh()
    large = call(d, small_limit=8, memo={})  # after "a": the closure holds the chain's exits
    assert isinstance(large, int) and large < 0 and d.table[d.initial][0] == -1  # no row written
    target = next(t for q in d.sets[d.initial] for _lo, _hi, t in d.edges[q])
    assert call(d, pending={target: None}, memo={}) == target  # the target is a stub (memo empty)
    assert call(fresh(), max_states=2) is False
    with pytest.raises(ValueError, match="class_of_byte"):
        call(d, class_of_byte=np.zeros(255, dtype=np.int32))
    with pytest.raises(ValueError, match="room"):
        call(d, table=np.full((2, d.num_classes), -1, dtype=np.int32))
    bad_edges = [list(e) for e in d.edges]
    bad_edges[next(iter(d.sets[d.initial]))] = [(5, 300, 1)]
    with pytest.raises(ValueError, match="byte range"):
        call(d, edges=bad_edges)
    with pytest.raises(ValueError, match="outside the automaton"):
        call(d, sets=[*d.sets[:-1], frozenset({len(d.edges) + 5})], state=len(d.sets) - 1)


def test_expand_ahead_runs_the_step_over_discovered_states_and_stops_where_told() -> None:
    """``expand_ahead`` expands discovered states in order, skips those already expanded,
    stops at ``count``, at ``limit`` and when the table has no room, hands back what
    ``expand_state`` cannot do with the state it stopped at, and rejects a negative count."""
    from structgen.fsm._lazy_expand import expand_ahead

    def call(d: LazyDFA, first: int, count: int, limit: int, **over: object) -> object:
        args = {
            "first": first, "count": count, "limit": limit, "sets": d.sets, "acc": d.acc, "index": d.index,
            "table": d.table, "edges": d.edges, "class_of_byte": d.class_of_byte, "num_classes": d.num_classes,
            "eps": d.eps, "has_edges": d.has_edges, "pending": d.builder.pending, "final": d.final, "memo": d._closures,
            "small_limit": 64, "max_states": 1000,
        }  # fmt: skip
        args.update(over)
        return expand_ahead(*args.values())

    d = compile_lazy(regex_to_ir("(?:a|bc){0,5}d"))
    d.build_fragments(time.perf_counter() + 60)
    d._grow(256)
    p = compile_lazy(regex_to_ir("(?:a|bc){0,5}d"))
    p.use_compiled = False
    assert call(d, 1, 1, 10_000) == (2, None) and int(d.table[1].min()) >= 0  # one state, then the count
    s, got = call(d, 2, 10_000, 10_000)
    assert got is None and s == d.num_states  # every discovered state, in order
    q = 1
    while q < p.num_states:
        p.expand(q)
        q += 1
    assert d.num_states == p.num_states and all(d.is_accepting(q) == p.is_accepting(q) for q in range(d.num_states))
    assert call(d, 1, 10_000, 10_000) == (d.num_states, None)  # all expanded: nothing to do
    fresh = compile_lazy(regex_to_ir("(?:a|bc){0,5}d"))
    fresh.build_fragments(time.perf_counter() + 60)
    fresh._grow(256)
    assert call(fresh, 1, 10_000, 2 + fresh.num_classes - 1) == (1, None)  # past the limit before the first
    small = compile_lazy(regex_to_ir("(?:a|bc){0,5}d"))
    small.build_fragments(time.perf_counter() + 60)
    assert call(small, 1, 10_000, 10_000, table=np.full((2, small.num_classes), -1, dtype=np.int32)) == (1, None)  # no room
    assert call(fresh, 1, 10_000, 10_000, max_states=2)[1] is False
    with pytest.raises(ValueError, match="negative"):
        call(fresh, 1, -1, 10_000)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(_regex())
def test_fragments_built_whole_before_shipping_give_the_same_automaton(pattern: str) -> None:
    """``build_fragments`` builds a pending fragment whole (no stubs inside) where it fits in
    the NFA cap, one level at a time where it does not: either way the automaton is the one
    built lazily, state for state."""
    node = regex_to_ir(pattern)
    whole, tight, lazy = compile_lazy(node), compile_lazy(node), compile_lazy(node)
    whole.build_fragments(float("inf"))
    tight.build_fragments(float("inf"), max_nfa_states=len(tight.eps) + 8)  # most fragments too large to build whole
    assert not whole.builder.pending
    assert_isomorphic(whole, lazy)
    assert_isomorphic(tight, lazy)


@pytest.mark.parametrize(
    "pattern",
    ["abc", "[a-z]{3,9}", "(ab|c[0-9]){2,}", '[^"\\\\]{0,40}', "x(y|zz)*w?", "", "(a{2}b{0,3}){1,4}|\\u00e9+"],
)
def test_eager_states_counts_what_an_eager_build_makes(pattern: str) -> None:
    """The size :meth:`NodeLengths.eager_states` gives is what an eager build of the node
    makes (never fewer: a fragment judged to fit does), past ``limit`` it says so, and its memo
    holds the nodes it counted, so that no id is reused while the memo lives."""
    from structgen.fsm.dfa import Budget
    from structgen.fsm.nfa import NFABuilder

    node = regex_to_ir(pattern)
    builder = NFABuilder(Budget())
    memo: dict = {}
    want = builder.lengths.eager_states(node, 10**9, memo)
    before = len(builder.nfa.eps)
    builder.build(node)
    assert len(builder.nfa.eps) - before == want
    assert all(held is not None and id(held) == key for key, (held, _n) in memo.items())
    assert builder.lengths.eager_states(node, want - 1, {}) > want - 1
