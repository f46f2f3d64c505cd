"""The compiled expansion step (fsm/_lazy_expand.c) against the Python subset construction."""

from __future__ import annotations

import time
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from structgen.fsm import lazy_dfa
from structgen.fsm.lazy_dfa import LazyDFA, compile_lazy
from structgen.schemas.ir import Node
from structgen.schemas.json_schema import schema_to_ir
from structgen.schemas.regex import regex_to_ir

from .test_regex import _regex

pytestmark = pytest.mark.skipif(lazy_dfa._c_expand_row is None, reason="the compiled expansion was not built (no compiler at install)")


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
    pair = {a.initial: b.initial}
    back = {b.initial: a.initial}
    queue = deque([a.initial])
    while queue and len(pair) < limit:
        s = queue.popleft()
        t = pair[s]
        assert a.acc[s] == b.acc[t]
        for x, y in zip(a.expand(s).tolist(), b.expand(t).tolist()):
            assert (x == 0) == (y == 0)
            if x == 0:
                continue
            if x in pair:
                assert pair[x] == y
            else:
                assert y not in back
                pair[x], back[y] = y, x
                queue.append(x)
    return len(pair)


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


def test_closures_past_the_small_limit_go_through_the_memoizing_search() -> None:
    """``x{0,n}`` chains closures far past SMALL_CLOSURE NFA states: the compiled step hands
    each such seed to the SCC search (which memoizes the whole chain), goes on in C, and the
    language stays exact."""
    n = 192
    assert n > 2 * lazy_dfa.SMALL_CLOSURE
    node = regex_to_ir(f"(?:a|bc){{0,{n}}}d(?:e*f)*")
    a, b = _pair(node)
    for k in (0, 1, 64, n - 1, n):
        assert a.accepts(b"a" * k + b"d") and a.accepts(b"bc" * k + b"def" + b"eef")
        assert not a.accepts(b"a" * k + b"b" + b"d")
    assert not a.accepts(b"a" * (n + 1) + b"d")
    assert len(a._closures) > 5 * n  # every exit of the chain memoized, not only the seeds
    assert_isomorphic(a, b)


def test_expand_row_hands_back_what_it_cannot_do_and_rejects_bad_input() -> None:
    """-(s + 1) for a closure of s past ``small_limit`` (searched by the caller), s for a closure
    through the pending stub s (built by the caller); ValueError for malformed automaton
    structures."""
    from structgen.fsm._lazy_expand import expand_row

    d = compile_lazy(regex_to_ir("(?:a|bc){0,40}d"))
    d.build_fragments(time.perf_counter() + 60)
    assert not d.builder.pending
    s = d.initial
    args = [d.sets[s], d.edges, d.class_of_byte, d.num_classes, d.eps, d.has_edges, d.builder.pending, d.final, {}, 4096]
    index, keys = expand_row(*args)
    row = np.frombuffer(index, dtype=np.int32)
    assert row.shape == (d.num_classes,) and row.max() == len(keys) - 1
    assert all(isinstance(k, tuple) and isinstance(k[0], frozenset) for k in keys)
    large = expand_row(*args[:-2], {}, 8)  # after "a": the closure holds the chain's exits
    assert isinstance(large, int) and large < 0 and len(d._closure_one(-large - 1)[0]) >= 1
    target = next(t for q in d.sets[s] for _lo, _hi, t in d.edges[q])
    assert expand_row(*args[:6], {target: None}, d.final, {}, 4096) == target  # the target is a stub (memo empty)
    with pytest.raises(ValueError, match="class_of_byte"):
        expand_row(args[0], args[1], np.zeros(255, dtype=np.int32), *args[3:])
    bad_edges = [list(e) for e in d.edges]
    q = next(iter(d.sets[s]))
    bad_edges[q] = [(5, 300, 1)]
    with pytest.raises(ValueError, match="byte range"):
        expand_row(args[0], bad_edges, *args[2:])
    with pytest.raises(ValueError, match="outside the automaton"):
        expand_row(frozenset({len(d.edges) + 5}), *args[1:])
