"""Eager DFAs built with the compiled steps (subset construction through fsm/_lazy_expand.c,
Hopcroft minimization in fsm/_minimize.c) against the Python and numpy reference, and the
vectorized helpers they use (byte classes, byte runs, Python's Unicode classes)."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from structgen.fsm import dfa as dfa_mod
from structgen.fsm.dfa import Budget, ByteDFA, _grouped, byte_classes, trim_and_minimize
from structgen.fsm.lazy_dfa import has_compiled_expansion
from structgen.fsm.nfa import compile_dfa, table_runs
from structgen.schemas.json_schema import schema_to_ir
from structgen.schemas.regex import _python_class
from structgen.schemas.regex_assertions import regex_to_ir

from .test_regex import _regex

compiled = pytest.mark.skipif(
    dfa_mod._c_minimize is None or not has_compiled_expansion(), reason="the compiled steps were not built (no compiler at install)"
)


Step = Callable[[int], tuple[bool, list[int]]]


def paired_walk(a: int, b: int, step_a: Step, step_b: Step, limit: int = 1 << 30) -> int:
    """Walk two automata breadth-first from initial states ``a`` and ``b`` (``step``: a state's
    acceptance and row of targets, 0 = dead) and check that their states pair one to one,
    keeping acceptance and every transition.  Returns the states paired (up to ``limit``)."""
    pair, back = {a: b}, {b: a}
    queue = deque([a])
    while queue and len(pair) < limit:
        s = queue.popleft()
        t = pair[s]
        (acc_s, row_s), (acc_t, row_t) = step_a(s), step_b(t)
        assert acc_s == acc_t and len(row_s) == len(row_t)
        for x, y in zip(row_s, row_t):
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


def assert_isomorphic(a: ByteDFA, b: ByteDFA) -> int:
    """The two eager automata are isomorphic (as minimal DFAs of one language are)."""
    if a.is_empty() or b.is_empty():
        assert a.is_empty() and b.is_empty()
        return 0
    return paired_walk(
        a.initial, b.initial, lambda s: (bool(a.accepting[s]), a.table[s].tolist()), lambda s: (bool(b.accepting[s]), b.table[s].tolist())
    )


@compiled
@settings(max_examples=150, deadline=None, derandomize=True)
@given(_regex())
def test_compiled_eager_dfa_is_the_reference_automaton(pattern: str) -> None:
    node = regex_to_ir(pattern)
    assert_isomorphic(compile_dfa(node), compile_dfa(node, use_compiled=False))


@compiled
@pytest.mark.parametrize(
    "schema",
    [
        {"allOf": [{"type": "string", "pattern": "^[a-z]{1,12}$"}, {"not": {"enum": ["ab", "abc"]}}]},
        {"type": "string", "pattern": "^(?:\\S+\\s+){0,20}\\S+$", "maxLength": 60},
        {"oneOf": [{"type": "integer", "minimum": 3}, {"type": "integer", "maximum": 10}]},
    ],
)
def test_compiled_eager_dfa_on_products(schema: dict) -> None:
    """Intersections and differences (eager product automata of eager children) agree too."""
    node, _ = schema_to_ir(schema)
    assert assert_isomorphic(compile_dfa(node), compile_dfa(node, use_compiled=False)) > 3


@compiled
@settings(max_examples=100, deadline=None, derandomize=True)
@given(_regex())
def test_compiled_forced_strings_are_the_reference(pattern: str) -> None:
    for dfa in (compile_dfa(regex_to_ir(pattern)), compile_dfa(regex_to_ir(f'"key": "{pattern}", "next"'))):
        assert dfa_mod.forced_strings(dfa.table, dfa.accepting) == dfa_mod.forced_strings(dfa.table, dfa.accepting, use_compiled=False)


@compiled
def test_compiled_forced_strings_reject_bad_tables() -> None:
    with pytest.raises(ValueError, match="int32 \\[n >= 1, 256\\]"):
        dfa_mod._c_forced_strings(np.zeros((2, 255), dtype=np.int32), np.zeros(2, dtype=bool))
    with pytest.raises(ValueError, match="out of range"):
        dfa_mod._c_forced_strings(np.full((2, 256), 2, dtype=np.int32), np.zeros(2, dtype=bool))
    with pytest.raises(TypeError, match=r"forced_strings takes 2 arguments \(1 given\)"):
        dfa_mod._c_forced_strings(np.zeros((2, 256), dtype=np.int32))
    table = np.zeros((4, 256), dtype=np.int32)
    table[1, ord("a")], table[2, ord("b")] = 2, 3  # 1 -a-> 2 -b-> 3 (accepting)
    assert dfa_mod._c_forced_strings(table, np.array([False, False, False, True])) == (b"", b"ab", b"b", b"")


def _planted(rng: np.random.Generator, n: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    """A random table [2n, C] whose second half copies the first (every state has a twin), with
    some transitions missing (-1) and random acceptance, copied to the twins."""
    base = rng.integers(-1, 2 * n, size=(n, c)).astype(np.int32)
    acc = rng.random(n) < 0.3
    return np.concatenate([base, base]), np.concatenate([acc, acc])


@compiled
def test_hopcroft_minimization_is_moore_minimization() -> None:
    """The compiled partition refinement gives the same minimal automaton as numpy's Moore
    refinement, on random tables with planted twins and on long chains (many refinement
    rounds); the twins always merge."""
    rng = np.random.default_rng(7)
    cob = np.arange(256, dtype=np.int32) % 4
    for _ in range(200):
        n, c = int(rng.integers(1, 60)), 4
        trans, acc = _planted(rng, n, c)
        a = trim_and_minimize(trans, acc, cob, 0, Budget(), True)
        b = trim_and_minimize(trans, acc, cob, 0, Budget(), True, use_compiled=False)
        assert_isomorphic(a, b)
        assert a.num_states <= n + 1
    chain = np.full((200, 4), -1, dtype=np.int32)  # a{0,199}: 200 states, none equivalent
    chain[:-1, 0] = np.arange(1, 200)
    cob = np.ones(256, dtype=np.int32)  # class 0 is "a" alone
    cob[ord("a")] = 0
    a = trim_and_minimize(chain, np.ones(200, dtype=bool), cob, 0, Budget(), True)
    assert a.num_states == 201 and a.accepts(b"a" * 199) and not a.accepts(b"a" * 200)


@compiled
def test_minimize_rejects_incomplete_tables_and_short_buffers() -> None:
    labels = np.zeros(2, dtype=np.int64)
    out = np.empty(2, dtype=np.int64)
    with pytest.raises(ValueError, match="out of range"):
        dfa_mod._c_minimize(np.array([[0], [-1]], dtype=np.int32), 2, 1, labels, out)
    with pytest.raises(ValueError, match="smaller than their shapes"):
        dfa_mod._c_minimize(np.array([[0], [1]], dtype=np.int32), 2, 2, labels, out)
    assert dfa_mod._c_minimize(np.array([[1], [1]], dtype=np.int32), 2, 1, np.array([0, 1], dtype=np.int64), out) == 2
    assert out.tolist() == [0, 1]


def test_byte_classes_group_bytes_whose_columns_agree_in_every_table() -> None:
    rng = np.random.default_rng(3)
    for k in range(60):
        columns = rng.integers(0, [6, 40, 256][k % 3], size=256)  # few, many or all-distinct column shapes
        tables = [rng.integers(-1, 4, size=(int(rng.integers(1, 30)), 256))[:, columns] for _ in range(1 + k % 3)]
        exact_reps, exact_cob = _grouped(np.concatenate(tables, axis=0).T)
        for use_compiled in (True, False):  # the C refinement (where built) and the column hashes
            reps, cob = byte_classes(*tables, use_compiled=use_compiled)
            assert reps.tolist() == exact_reps.tolist() and cob.tolist() == exact_cob.tolist()
            assert reps.tolist() == sorted(reps.tolist()) and cob[reps].tolist() == list(range(len(reps)))


def test_coreachable_states_compiled_and_numpy_agree() -> None:
    rng = np.random.default_rng(11)
    for k in range(40):
        n, c = int(rng.integers(1, 60)), int(rng.integers(1, 9))
        trans = rng.integers(-1, n, size=(n, c)).astype(np.int32)
        trans[rng.random((n, c)) < 0.5] = -1  # sparse: some states reach nothing
        accepting = rng.random(n) < [0.0, 0.05, 0.3][k % 3]
        want = {s for s in range(n) if accepting[s]}  # fixpoint over the forward edges
        while True:
            more = {s for s in range(n) if s not in want and any(t in want for t in trans[s].tolist() if t >= 0)}
            if not more:
                break
            want |= more
        for use_compiled in (True, False):  # the C search (where built) and the numpy one
            assert set(np.flatnonzero(dfa_mod._coreachable(trans, accepting, use_compiled=use_compiled)).tolist()) == want
        if dfa_mod._c_coreachable is not None:
            live = np.empty(n, dtype=bool)
            assert dfa_mod._c_coreachable(trans, n, c, accepting, live) == len(want)
            assert set(np.flatnonzero(live).tolist()) == want


@compiled
def test_coreachable_rejects_out_of_range_targets_and_short_buffers() -> None:
    live = np.empty(2, dtype=bool)
    with pytest.raises(ValueError, match="out of range"):
        dfa_mod._c_coreachable(np.array([[0], [2]], dtype=np.int32), 2, 1, np.zeros(2, dtype=bool), live)
    with pytest.raises(ValueError, match="smaller than their shapes"):
        dfa_mod._c_coreachable(np.array([[0], [1]], dtype=np.int32), 2, 1, np.zeros(1, dtype=bool), live)


@compiled
def test_refine_byte_classes_rejects_bad_shapes_and_class_ids() -> None:
    cls = np.zeros(256, dtype=np.int32)
    with pytest.raises(ValueError, match="int32 \\[S, 256\\]"):
        dfa_mod._c_refine_byte_classes(np.zeros((2, 255), dtype=np.int32), cls)
    with pytest.raises(ValueError, match="int32 \\[S, 256\\]"):
        dfa_mod._c_refine_byte_classes(np.zeros((2, 256), dtype=np.int32), cls[:100])
    bad = cls.copy()
    bad[7] = 256
    with pytest.raises(ValueError, match=r"outside 0\.\.255"):
        dfa_mod._c_refine_byte_classes(np.zeros((2, 256), dtype=np.int32), bad)
    table = np.zeros((1, 256), dtype=np.int32)
    table[0, 200:] = 1
    assert dfa_mod._c_refine_byte_classes(table, cls) == 2 and cls[199] == 0 and cls[200] == 1


def test_table_runs_are_each_rows_maximal_runs() -> None:
    rng = np.random.default_rng(5)
    table = np.sort(rng.integers(0, 4, size=(30, 256)), axis=1)
    table[::3] = rng.integers(0, 3, size=(10, 256))
    rows, los, his, targets = table_runs(table)
    got = list(zip(rows.tolist(), los.tolist(), his.tolist(), targets.tolist()))
    want = []
    for r, row in enumerate(table.tolist()):
        lo = 0
        for b in range(1, 257):
            if b == 256 or row[b] != row[lo]:
                if row[lo] != 0:
                    want.append((r, lo, b - 1, row[lo]))
                lo = b
    assert got == want


def test_python_classes_are_what_re_matches() -> None:
    """``\\d``, ``\\w``, ``\\s`` read from runs over all code points agree with ``re`` code point
    by code point (every one below U+3100, a sample above)."""
    points = [*range(0x3100), *range(0x3100, 0xD800, 7), *range(0xE000, 0x110000, 97)]
    for escape in ("\\d", "\\w", "\\s"):
        cs, rx = _python_class(escape), re.compile(escape)
        for cp in points:
            assert (cp in cs) == (rx.match(chr(cp)) is not None), (escape, hex(cp))
