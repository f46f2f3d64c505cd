"""A lazy automaton expanded whole before shipping (``LazyDFA.complete_ahead``, what a compile
process does): the same language, rows, forced strings and distances as the lazy one, no NFA
left, nothing expanded while serving; an expansion cut by its limits stays lazy and correct."""

from __future__ import annotations

import bisect
import pickle
import random

import numpy as np
import pytest
from structgen.fsm import CompilerConfig, Constraint, GrammarCompiler
from structgen.fsm.dfa_paths import NO_PATH, distances_to_accept, extend_nfa_distances, reach_max
from structgen.fsm.lazy_compile import compile_lazy
from structgen.fsm.token_fsm import TokenFSM
from structgen.fsm.vocab import Vocabulary
from structgen.schemas.json_schema import schema_to_ir
from structgen.schemas.regex_assertions import regex_to_ir
from structgen.schemas.schema_options import SchemaOptions

CASES = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "tags": {"type": "array", "items": {"enum": ["a", "bc"]}, "maxItems": 3},
        },
        "required": ["name"],
    },
    {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 2},
    r"(ab|a[0-9]{2,4})+x?",
]


def _fsm(case: object, vocab: Vocabulary) -> TokenFSM:
    node = regex_to_ir(case) if isinstance(case, str) else schema_to_ir(case, SchemaOptions())[0]
    return TokenFSM(compile_lazy(node), vocab)


def _copy(fsm: TokenFSM, vocab: Vocabulary) -> TokenFSM:
    state = fsm.__getstate__()
    state.pop("vocab")
    out = TokenFSM.__new__(TokenFSM)
    out.__setstate__({**pickle.loads(pickle.dumps(state)), "vocab": vocab})
    return out


@pytest.mark.parametrize("case", CASES, ids=["object", "array", "regex"])
def test_a_complete_table_serves_what_the_lazy_automaton_serves(case: object, gpt2_vocab: Vocabulary) -> None:
    """Token by token along random allowed paths, the shipped complete copy gives the lazy
    copy's rows, acceptance, forced bytes and distances; its distances and forced strings equal
    the NFA's state by state; it holds no NFA and expands nothing while serving."""
    lazy = _fsm(case, gpt2_vocab)
    full = _copy(lazy, gpt2_vocab)
    ref = _copy(lazy, gpt2_vocab)
    assert full.complete_dfa(float("inf"), 1 << 24)
    dfa = full.dfa
    assert dfa.complete and dfa.sets is None and dfa.builder is None
    n = dfa.num_states
    assert dfa.table.shape[0] == n and int(dfa.table.min()) >= 0
    s = 1
    while s < n:  # the same expansion order numbers the same states
        if s == ref.dfa.num_states:  # every reachable state expanded: the row plans add relaxed states, in order
            for k in range(1, s):
                ref.dfa.counted_row(k)
            assert ref.dfa.num_states > s
        ref.dfa.expand(s)
        s += 1
    assert ref.dfa.num_states == n
    assert all(ref.dfa.distance_to_accept(s) == dfa.distance_to_accept(s) for s in range(n))
    assert all(ref.dfa.forced(s) == dfa.forced(s) for s in range(n))  # the table's own forced bytes
    shipped = _copy(full, gpt2_vocab)
    assert shipped.dfa.complete and np.array_equal(shipped.dfa.table, dfa.table)
    rng = random.Random(0)
    for _ in range(8):
        a, b = lazy.cursor(), shipped.cursor()
        for _step in range(40):
            ra, rb = lazy.mask_row(a.state), shipped.mask_row(b.state)
            assert np.array_equal(ra, rb)
            assert lazy.is_accepting(a.state) == shipped.is_accepting(b.state)
            assert lazy.forced_bytes(a.state) == shipped.forced_bytes(b.state)
            assert lazy.distance(a.state) == shipped.distance(b.state)
            allowed = [t for t in lazy.allowed_token_ids(a.state).tolist() if t not in gpt2_vocab.special_ids]
            if not allowed:
                break
            t = rng.choice(allowed)
            a.advance(t)
            b.advance(t)
    assert shipped.dfa.num_states == n and shipped.build_fragments(float("inf")) == 0


def test_an_expansion_cut_by_its_limits_stays_lazy(gpt2_vocab: Vocabulary) -> None:
    """Past the deadline or the state limit the automaton keeps its NFA and what it expanded,
    and serves the same language."""
    lazy = _fsm(CASES[0], gpt2_vocab)
    for deadline, most in ((0.0, 1 << 24), (float("inf"), 64 * 4)):
        cut = _copy(lazy, gpt2_vocab)
        assert not cut.complete_dfa(deadline, most)
        assert not cut.dfa.complete and cut.dfa.sets is not None
        for text in (b'{"name": "Ada", "age": 36, "tags": ["bc"]}', b'{"name": ""}'):
            assert cut.dfa.accepts(text) and lazy.dfa.accepts(text)
        assert not cut.dfa.accepts(b'{"age": 3}')


def test_the_whole_expansion_stops_short_of_the_state_cap() -> None:
    """An automaton larger than half its own state cap is left lazy, never refused: the
    expansion ahead stops before the cap, and serving still reaches the states it needs."""
    from structgen.fsm.dfa import Budget

    dfa = compile_lazy(regex_to_ir("[ab]*a[ab]{9}"), Budget(max_states=300))  # 2^10 states in all
    assert not dfa.complete_ahead(float("inf"), 1 << 30)
    assert not dfa.complete and 1 < dfa.num_states <= 150
    assert dfa.accepts(b"ba" + b"b" * 9) and dfa.accepts(b"a" * 10) and not dfa.accepts(b"b" * 11)


@pytest.mark.parametrize("use_compiled", [True, False], ids=["compiled", "numpy"])
def test_distances_of_a_table(use_compiled: bool) -> None:
    """Backward breadth-first distances on a hand-made table; bad tables are named."""
    table = np.array([[0, 0], [2, 0], [3, 1], [3, 3]], dtype=np.int32)
    acc = np.array([False, False, False, True])
    assert distances_to_accept(table, acc, use_compiled=use_compiled).tolist() == [NO_PATH, 2, 1, 0]
    with pytest.raises(ValueError, match="expanded"):
        distances_to_accept(np.array([[0, 0], [-1, 1]], dtype=np.int32), np.array([False, True]), use_compiled=use_compiled)
    with pytest.raises(ValueError, match="agree"):
        distances_to_accept(table, acc[:2], use_compiled=use_compiled)


def test_compiled_nfa_distances_equal_the_python_search() -> None:
    """The C Dijkstra over an NFA's new states and the Python one agree, grown in random
    batches of states (epsilon and byte edges within and across batches, pending stubs with a
    cost, unreachable states, the final state in a later batch); malformed arguments are
    named."""
    from structgen.fsm import dfa_paths

    if dfa_paths._c_extend is None:
        pytest.skip("the C extension fsm/_paths.c is not built")
    rng = random.Random(7)
    for trial in range(40):
        n = rng.randint(1, 300)
        cuts = sorted(rng.sample(range(1, n), min(n - 1, rng.randint(0, 4)))) + [n]
        final = rng.randrange(n)
        eps: list[list[int]] = []
        edges: list[list[tuple[int, int, int]]] = []
        pending: dict[int, tuple[str, int]] = {}
        costs: dict[str, int] = {}
        got: list[int] = []
        want: list[int] = []
        n0 = 0
        for n1 in cuts:  # states n0 .. n1 - 1 join, their edges into any state below n1
            for q in range(n0, n1):
                eps.append([rng.randrange(n1) for _ in range(rng.choice((0, 0, 1, 2)))])
                edges.append([(97, 98, rng.randrange(n1)) for _ in range(rng.choice((0, 1, 1, 2, 3)))])
                if rng.random() < 0.1:
                    node = f"n{trial}.{q}"
                    costs[node] = rng.choice((0, 3, 17, NO_PATH))
                    pending[q] = (node, rng.randrange(n1))
            extend_nfa_distances(got, eps, edges, final, n0, pending, costs.__getitem__)
            extend_nfa_distances(want, eps, edges, final, n0, pending, costs.__getitem__, use_compiled=False)
            assert got == want, (trial, n0, n1)
            n0 = n1
    with pytest.raises(ValueError, match="target"):
        extend_nfa_distances([], [[5]], [[]], 0, 0, {}, len)
    with pytest.raises(TypeError, match="triples"):
        extend_nfa_distances([], [[]], [[(97, 0)]], 0, 0, {}, len)  # type: ignore[list-item]


def test_compiled_distances_equal_the_numpy_search() -> None:
    """The C search and the numpy one agree on random tables (states that reach no accepting
    one included) and on a real automaton's table."""
    rng = np.random.default_rng(0)
    for (n, c), dead in zip(((1, 1), (2, 3), (50, 4), (400, 17), (400, 60)), (0.0, 0.0, 0.0, 0.0, 0.95)):
        table = rng.integers(0, n, size=(n, c), dtype=np.int32)
        table[0] = 0
        table[rng.random((n, c)) < dead] = 0  # the last: mostly dead edges, as real tables have
        acc = rng.random(n) < 0.05
        acc[0] = False
        assert np.array_equal(distances_to_accept(table, acc), distances_to_accept(table, acc, use_compiled=False))
    dfa = compile_lazy(schema_to_ir(CASES[0], SchemaOptions())[0])
    assert dfa.complete_ahead(float("inf"), 1 << 24)
    acc = np.array(dfa.acc if dfa.acc is not None else [dfa.is_accepting(s) for s in range(dfa.num_states)], dtype=bool)
    assert np.array_equal(distances_to_accept(dfa.table, acc), distances_to_accept(dfa.table, acc, use_compiled=False))


@pytest.mark.parametrize("use_compiled", [True, False], ids=["compiled", "python"])
def test_reach_of_a_table(use_compiled: bool) -> None:
    """The largest distance among reachable states on a hand-made table with a cycle; bad
    tables are named."""
    table = np.array([[0, 0], [2, 0], [3, 1], [4, 0], [0, 0]], dtype=np.int32)
    dist = distances_to_accept(table, np.array([False, False, False, False, True]))
    assert dist.tolist() == [NO_PATH, 3, 2, 1, 0]
    assert reach_max(table, dist, use_compiled=use_compiled).tolist() == [NO_PATH, 3, 3, 1, 0]
    with pytest.raises(ValueError, match="expanded"):
        reach_max(np.array([[0, 0], [-1, 1]], dtype=np.int32), dist[:2], use_compiled=use_compiled)
    with pytest.raises(ValueError, match="agree"):
        reach_max(table, dist[:2], use_compiled=use_compiled)


def test_compiled_reach_equals_a_search_from_every_state() -> None:
    """On random tables (cycles, unreachable parts) the C components, the Python ones and a
    breadth-first search from every state give the same bounds."""
    rng = np.random.default_rng(1)
    for (n, c), dead in zip(((1, 1), (2, 2), (30, 2), (60, 3), (300, 5), (300, 40)), (0.3,) * 5 + (0.97,)):
        table = rng.integers(0, n, size=(n, c), dtype=np.int32)
        table[0] = 0
        table[rng.random((n, c)) < dead] = 0  # sparse rows: long chains and small components (runs of dead edges)
        dist = rng.integers(0, 50, size=n).astype(np.int64)
        expect = []
        for s in range(n):
            seen, todo = {s}, [s]
            while todo:
                for t in table[todo.pop()].tolist():
                    if t and t not in seen:
                        seen.add(t)
                        todo.append(t)
            expect.append(max(int(dist[t]) for t in seen) if s else int(dist[0]))
        assert reach_max(table, dist).tolist() == expect
        assert reach_max(table, dist, use_compiled=False).tolist() == expect


@pytest.mark.parametrize("case", CASES, ids=["object", "array", "regex"])
def test_budget_rows_of_a_complete_automaton(case: object, gpt2_vocab: Vocabulary) -> None:
    """A complete copy gives the lazy copy's budget rows at every budget along random paths,
    and where its reach bound is within the budget it answers the plain row without a
    successor walk."""
    lazy = _fsm(case, gpt2_vocab)
    full = _copy(lazy, gpt2_vocab)
    assert full.complete_dfa(float("inf"), 1 << 24)
    rng = random.Random(5)
    skipped = 0
    for _ in range(6):
        state, other = full.initial, lazy.initial  # the same path in each copy's numbering
        for _ in range(12):
            reach = full.dfa.reach_bound(state)
            assert reach is not None and reach >= full.distance(state)
            for left in (1, 2, 3, 5, 8, 13, 40):
                got = full.row(full.budgets.row_index(state, left))
                assert np.array_equal(got, lazy.row(lazy.budgets.row_index(other, left))), (state, left)
                if reach <= left - 1 and state not in full.budgets:
                    skipped += 1
            allowed = [t for t in full.allowed_token_ids(state).tolist() if t not in gpt2_vocab.eos_token_ids]
            if not allowed:
                break
            token = rng.choice(allowed)
            state, other = full.next_state(state, token), lazy.next_state(other, token)
    assert skipped > 0
    assert lazy.dfa.reach_bound(lazy.initial) is None


@pytest.mark.parametrize("case", CASES, ids=["object", "array", "regex"])
def test_the_compiled_whole_expansion_builds_the_python_table(case: object) -> None:
    """``complete_ahead`` in batches of compiled steps builds the automaton the Python subset
    construction builds one state at a time: the same states up to numbering (an isomorphism
    from the initial state, class by class, and from each bounded string position to its
    relaxed state), acceptance and distances."""
    node = regex_to_ir(case) if isinstance(case, str) else schema_to_ir(case, SchemaOptions())[0]
    compiled, python = compile_lazy(node), compile_lazy(node)
    python.use_compiled = False
    assert compiled.complete_ahead(float("inf"), 1 << 24) and python.complete_ahead(float("inf"), 1 << 24)
    assert compiled.table.shape == python.table.shape
    to_python = {0: 0, 1: 1}
    todo = [1]
    while todo:
        s = todo.pop()
        p = to_python[s]
        assert compiled.is_accepting(s) == python.is_accepting(p)
        assert compiled.distance_to_accept(s) == python.distance_to_accept(p)
        pairs = list(zip(compiled.table[s].tolist(), python.table[p].tolist()))
        plan, plan_py = compiled.counted_row(s), python.counted_row(p)
        assert (plan is None) == (plan_py is None)
        if plan is not None and plan_py is not None:  # a bounded string's position: its relaxed state too
            assert plan.room == plan_py.room
            pairs.append((plan.relaxed, plan_py.relaxed))
        for a, b in pairs:
            if a not in to_python:
                to_python[a] = b
                todo.append(a)
            assert to_python[a] == b
    assert len(to_python) == compiled.num_states == len(set(to_python.values()))


def test_a_negative_table_limit_is_named(gpt2_vocab: Vocabulary) -> None:
    with pytest.raises(ValueError, match="max_entries must be >= 0, got -1"):
        _fsm(CASES[2], gpt2_vocab).complete_dfa(float("inf"), -1)


def test_a_compile_process_ships_a_complete_automaton(gpt2_vocab: Vocabulary) -> None:
    """A small schema compiled on a compile process arrives whole: no NFA, nothing to expand."""
    comp = GrammarCompiler(gpt2_vocab, CompilerConfig(processes=1))
    try:
        fsm = comp.submit(Constraint.json_schema({"type": "object", "properties": {"k": {"type": "integer"}}})).result(timeout=120)
    finally:
        comp.close()
    assert fsm.dfa.complete and fsm.dfa.sets is None
    cur = fsm.cursor()
    for t in gpt2_vocab.encode_bytes(b'{"k": 12}') or []:
        cur.advance(t)
    assert cur.is_accepting()


def test_compiled_byte_walk_of_a_table() -> None:
    """walk_bytes: the state after the bytes, 0 once dead, -1 - s at an unexpanded state s,
    a ValueError for a table that does not fit its classes."""
    walk_bytes = pytest.importorskip("structgen.fsm._trie_walk").walk_bytes
    table = np.array([[0, 0], [2, 0], [3, 1], [-1, -1]], dtype=np.int32)  # [S, C]
    cob = np.zeros(256, dtype=np.int32)
    cob[ord("b")] = 1
    assert walk_bytes(table, 2, cob, 1, b"ab") == 1
    assert walk_bytes(table, 2, cob, 1, b"aa") == 3
    assert walk_bytes(table, 2, cob, 1, b"b") == 0 and walk_bytes(table, 2, cob, 1, b"bab") == 0
    assert walk_bytes(table, 2, cob, 1, b"aaa") == -4
    assert walk_bytes(table, 2, cob, 2, b"") == 2
    with pytest.raises(ValueError, match="outside the table"):
        walk_bytes(table, 2, cob, 9, b"a")
    with pytest.raises(ValueError, match="outside the table"):
        walk_bytes(table, 1, cob, 1, b"a")
    with pytest.raises(ValueError, match="outside the table"):
        walk_bytes(table, 2, cob, -1, b"")


@pytest.mark.parametrize("case", CASES, ids=["object", "array", "regex"])
def test_compiled_back_off_question_matches_the_walk(case: object, gpt2_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    """extension_allowed over a complete table (one compiled scan of the sorted run) answers as
    the byte-by-byte walk does, for every state and every token-prefix run of one and two bytes."""
    import structgen.fsm.token_fsm as token_fsm

    if token_fsm._c_any_live is None:
        pytest.skip("the compiled walk is not built")
    full = _fsm(case, gpt2_vocab)
    assert full.complete_dfa(float("inf"), 1 << 24)
    sorted_bytes = gpt2_vocab.sorted_order[1]
    prefixes = sorted({b[:n] for b in sorted_bytes for n in (1, 2) if len(b) > n})
    rng = random.Random(1)
    states = list(range(1, full.dfa.num_states))
    asks = []
    for prefix in rng.sample(prefixes, 300):
        lo = bisect.bisect_right(sorted_bytes, prefix)
        hi = bisect.bisect_left(sorted_bytes, prefix + b"\xff\xff\xff\xff")
        for s in rng.sample(states, min(6, len(states))):
            after = full.dfa.walk(s, prefix)
            if after != 0:
                asks.append((after, len(prefix), lo, hi))
    compiled = [full.extension_allowed(*a) for a in asks]
    monkeypatch.setattr(token_fsm, "_c_any_live", None)  # the byte-by-byte walk
    assert compiled == [full.extension_allowed(*a) for a in asks]
    assert len(asks) > 20 and any(compiled) and not all(compiled)


@pytest.mark.parametrize("case", CASES, ids=["object", "array", "regex"])
def test_compiled_walks_over_a_lazy_table_match_the_byte_walk(
    case: object, gpt2_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On an automaton still lazy, ``next_state`` and ``extension_allowed`` walk the expanded
    part of the table in C and fall back to the expanding walk at a state not expanded yet:
    along random token paths, step by step, they answer as the byte-by-byte walk of a second
    lazy copy (expanded in the same order, so its state ids agree)."""
    import structgen.fsm.token_fsm as token_fsm

    if token_fsm._c_walk_bytes is None or token_fsm._c_any_live is None:
        pytest.skip("the compiled walk is not built")
    lazy = _fsm(case, gpt2_vocab)
    ref = _copy(lazy, gpt2_vocab)
    sorted_bytes = gpt2_vocab.sorted_order[1]
    rng = random.Random(2)

    def ask(fsm: TokenFSM, state: int, tok: int) -> tuple[int, bool | None]:
        data = gpt2_vocab.token_bytes[tok]
        lo = bisect.bisect_right(sorted_bytes, data)
        hi = bisect.bisect_left(sorted_bytes, data + b"\xff\xff\xff\xff")
        nxt = fsm.next_state(state, tok)
        return nxt, fsm.extension_allowed(nxt, len(data), lo, hi) if nxt > 0 else None

    got = []
    for _ in range(6):
        state = lazy.initial
        for _step in range(30):
            allowed = [t for t in lazy.allowed_token_ids(state).tolist() if t not in gpt2_vocab.special_ids]
            if not allowed:
                break
            assert ref.allowed_token_ids(state).tolist() == lazy.allowed_token_ids(state).tolist()
            tok = rng.choice(allowed + rng.sample(range(gpt2_vocab.size), 3))  # some tokens the state refuses
            answer = ask(lazy, state, tok)
            with monkeypatch.context() as m:  # the byte-by-byte walk
                m.setattr(token_fsm, "_c_walk_bytes", None)
                m.setattr(token_fsm, "_c_any_live", None)
                assert ask(ref, state, tok) == answer
            got.append(answer)
            if answer[0] > 0 and tok in allowed:
                state = answer[0]
    assert not lazy.dfa.complete
    assert any(n == -1 for n, _ in got) and any(n > 0 for n, _ in got)


def test_ship_blob_ships_a_complete_automaton_and_names_bad_input(gpt2_vocab: Vocabulary) -> None:
    """What a compile process sends loads as a complete table without an NFA; anything but a
    TokenFSM is refused by name."""
    from structgen.fsm.compile_process import ship_blob

    blob = ship_blob(_fsm(CASES[1], gpt2_vocab))
    loaded = TokenFSM.__new__(TokenFSM)
    loaded.__setstate__({**pickle.loads(blob), "vocab": gpt2_vocab})
    assert loaded.dfa.complete and loaded.dfa.sets is None and loaded.dfa.accepts(b"[1, 2.5]")
    with pytest.raises(TypeError, match="ship_blob takes a TokenFSM, got dict"):
        ship_blob({})  # type: ignore[arg-type]


@pytest.mark.parametrize("index", range(len(CASES)))
def test_distance_bound_is_worked_out_when_asked_and_exact_once_complete(index: int) -> None:
    """The compile leaves the distance bound to its first use: before completion the IR's worst
    distance (at least every state's distance), after it the largest exact distance; a pickled
    copy of either keeps the answer, and a copy asked first works it out as its original did."""
    case = CASES[index]
    node = regex_to_ir(case) if isinstance(case, str) else schema_to_ir(case, SchemaOptions())[0]
    lazy, complete = compile_lazy(node), compile_lazy(node)
    shipped = pickle.loads(pickle.dumps(compile_lazy(node)))  # asked for only after the trip
    loose = lazy.distance_bound
    assert loose is not None and shipped.distance_bound == loose
    assert complete.complete_ahead(float("inf"), 1 << 24)
    exact = [complete.distance_to_accept(s) for s in range(1, complete.num_states)]
    assert complete.distance_bound == max(exact) <= loose
    assert pickle.loads(pickle.dumps(complete)).distance_bound == max(exact)
