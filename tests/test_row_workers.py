"""Row workers: first-visit mask rows computed in worker processes are the rows computed
inline, state by state, on a real tokenizer; a dead, evicted or closed worker changes where a
row is computed, never the row."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from structgen.fsm import CompilerConfig, Constraint, GrammarCompiler, TokenFSM, Vocabulary, fill_rows

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "city": {"type": "string"},
        "tags": {"type": "array", "items": {"enum": ["a", "b c", "d"]}, "maxItems": 3},
    },
    "required": ["name", "age"],
}
INSTANCES = [
    {"name": "Ada Lovelace", "age": 36, "city": "London", "tags": ["a", "b c"]},
    {"name": "José O'Neil-Ng", "age": 7},
    {"name": "x", "age": 150, "tags": []},
]


@pytest.fixture(scope="module")
def compiler(gpt2_vocab: Vocabulary) -> Iterator[GrammarCompiler]:
    comp = GrammarCompiler(gpt2_vocab, CompilerConfig(processes=1, row_processes=2))
    comp.start_workers()
    yield comp
    comp.close()


def _ids(vocab: Vocabulary, text: str) -> list[int]:
    got = vocab.encode_bytes(text.encode())
    assert got is not None
    return got


def _walk_with_workers(fsm: TokenFSM, ids: list[int]) -> list[tuple[int, np.ndarray]]:
    """Advance through ``ids`` asking the workers for each new state's row first."""
    cur = fsm.cursor()
    out = []
    for tok in [*ids, None]:
        fill_rows([(fsm, cur.state, None)])
        out.append((cur.state, fsm.mask_row(cur.state).copy()))
        if tok is not None:
            cur.advance(tok)
    return out


def test_worker_rows_are_the_inline_rows(compiler: GrammarCompiler, gpt2_vocab: Vocabulary) -> None:
    """State by state along real token paths (GPT-2), the rows the workers computed equal the
    rows an in-process compile computes inline; the workers did compute them."""
    c = Constraint.json_schema(PERSON)
    fsm = compiler.submit(c).result(timeout=120)
    assert fsm.row_source is not None
    local = GrammarCompiler(gpt2_vocab).compile(c)
    workers = compiler.row_workers
    assert workers is not None
    before, stats = workers.rows_served, workers.stats()
    for ids in [_ids(gpt2_vocab, json.dumps(x, ensure_ascii=False)) for x in INSTANCES]:
        cur = local.cursor()
        for _state, row in _walk_with_workers(fsm, ids):
            assert np.array_equal(row, local.mask_row(cur.state))
            if len(cur.tokens()) < len(ids):
                cur.advance(ids[len(cur.tokens())])
        assert cur.is_accepting()
    assert workers.rows_served - before >= 20
    run = workers.stats().minus(stats)  # the counters a profile reads
    assert run.rows == workers.rows_served - before and run.budget_rows == 0 and run.fills > 0
    assert run.reply_bytes == run.rows * fsm.mask_words * 4
    assert 0 < run.critical_s <= run.busy_s and run.wait_s >= 0


def test_a_batch_over_several_grammars_is_filled_at_once(compiler: GrammarCompiler, gpt2_vocab: Vocabulary) -> None:
    """One fill over cursors of different grammars (on different workers) stores every row."""
    schemas = [{"type": "object", "properties": {f"k{i}": {"type": "integer"}}, "required": [f"k{i}"]} for i in range(4)]
    fsms = [compiler.submit(Constraint.json_schema(s)).result(timeout=120) for s in schemas]
    assert len({f.row_source.index for f in fsms}) == 2  # type: ignore[union-attr]
    curs = [f.cursor() for f in fsms]
    for cur, i in zip(curs, range(4)):
        for tok in _ids(gpt2_vocab, f'{{"k{i}": 1'):
            cur.advance(tok)
    wanted = [(c.fsm, c.state, None) for c in curs]
    assert not any(f.has_row(s) for f, s, _left in wanted)
    assert fill_rows(wanted) == 4
    for (f, s, _left), schema in zip(wanted, schemas):
        local = GrammarCompiler(gpt2_vocab).compile(Constraint.json_schema(schema))
        lc = local.cursor()
        for tok in _ids(gpt2_vocab, f'{{"{next(iter(schema["properties"]))}": 1'):
            lc.advance(tok)
        assert np.array_equal(f.mask_row(s), local.mask_row(lc.state))


def test_dead_worker_falls_back_inline(gpt2_vocab: Vocabulary) -> None:
    """A worker killed mid-service: its grammars' rows are computed inline, and equal."""
    comp = GrammarCompiler(gpt2_vocab, CompilerConfig(processes=1, row_processes=1))
    try:
        comp.start_workers()
        c = Constraint.json_schema(PERSON)
        fsm = comp.submit(c).result(timeout=120)
        workers = comp.row_workers
        assert workers is not None
        workers._procs[0].kill()
        workers._procs[0].join(timeout=10)
        local = GrammarCompiler(gpt2_vocab).compile(c)
        ids = _ids(gpt2_vocab, json.dumps(INSTANCES[0], ensure_ascii=False))
        got = _walk_with_workers(fsm, ids)
        cur = local.cursor()
        for i, (_state, row) in enumerate(got):
            assert np.array_equal(row, local.mask_row(cur.state))
            if i < len(ids):
                cur.advance(ids[i])
        assert not workers.alive(0) and workers.rows_served == 0
    finally:
        comp.close()


def test_closed_workers_and_evicted_grammars_lose_nothing(gpt2_vocab: Vocabulary) -> None:
    """After close (shutdown with grammars in use), and for a grammar a worker no longer
    holds, rows are still served (inline) and equal the inline ones."""
    comp = GrammarCompiler(gpt2_vocab, CompilerConfig(processes=1, row_processes=1))
    comp.start_workers()
    c = Constraint.json_schema(PERSON)
    fsm = comp.submit(c).result(timeout=120)
    src = fsm.row_source
    assert src is not None
    other = GrammarCompiler(gpt2_vocab).compile(Constraint.regex(r"[a-z]{1,8}"))
    other.track_witnesses()
    other.row_source = type(src)(src.workers, 0, "never-loaded", other.initial)
    cur = other.cursor()
    cur.advance(_ids(gpt2_vocab, "ab")[0])
    assert fill_rows([(other, cur.state, None)]) == 0 and other.row_source is None  # inline from now on
    assert other.mask_row(cur.state).any()
    comp.close()
    local = GrammarCompiler(gpt2_vocab).compile(c)
    ids = _ids(gpt2_vocab, json.dumps(INSTANCES[1], ensure_ascii=False))
    lc = local.cursor()
    for i, (_state, row) in enumerate(_walk_with_workers(fsm, ids)):
        assert np.array_equal(row, local.mask_row(lc.state))
        if i < len(ids):
            lc.advance(ids[i])


def test_witness_paths_and_put_row(gpt2_vocab: Vocabulary) -> None:
    """Witness paths lead from a known state through the tokens that first reached each
    state; put_row checks its length, never replaces a known row and keeps a new one as given."""
    fsm = GrammarCompiler(gpt2_vocab).compile(Constraint.regex(r"(ab|cd)(ab|cd)(ab|cd)x"))
    assert fsm.witness_path(fsm.initial, set()) is None  # not tracking yet
    fsm.track_witnesses()
    ids = _ids(gpt2_vocab, "abcdab")
    cur = fsm.cursor()
    for t in ids:
        cur.advance(t)
    path = fsm.witness_path(cur.state, {fsm.initial})
    assert path is not None and [t for _s, _p, t in path] == ids and path[-1][0] == cur.state
    assert fsm.witness_path(cur.state, {cur.state}) == []
    with pytest.raises(ValueError, match="bytes"):
        fsm.put_row(cur.state, b"\0" * 3)
    row = fsm.mask_row(fsm.initial).tobytes()
    fsm.put_row(fsm.initial, bytes(len(row)))
    assert fsm.mask_row(fsm.initial).tobytes() == row
    other = bytearray(len(row))
    other[0] = 0b10  # token 1 only
    fsm.put_row(cur.state, bytes(other))
    got = fsm.mask_row(cur.state)
    assert got.tobytes() == bytes(other) and not got.flags.writeable  # a read-only view of the bytes put, no copy
    assert fsm.allowed_token_ids(cur.state).tolist() == [1]
    with pytest.raises(ValueError, match="row_processes"):
        CompilerConfig(row_processes=2)
    with pytest.raises(ValueError, match="row_processes"):
        CompilerConfig(processes=1, row_processes=-1)


def test_rows_asked_early_are_collected_at_fill(compiler: GrammarCompiler, gpt2_vocab: Vocabulary) -> None:
    """request_rows starts the workers without waiting; fill_rows collects every row asked
    for (a state asked twice is sent once), and the rows are the inline ones."""
    from structgen.fsm import request_rows

    schema = {"type": "object", "properties": {"q": {"type": "string", "maxLength": 9}}, "required": ["q"]}
    fsm = compiler.submit(Constraint.json_schema(schema)).result(timeout=120)
    local = GrammarCompiler(gpt2_vocab).compile(Constraint.json_schema(schema))
    ids = _ids(gpt2_vocab, '{"q": "hello wor')
    cur, lc = fsm.cursor(), local.cursor()
    states, local_states = [], []
    for tok in ids:
        cur.advance(tok)
        lc.advance(tok)
        states.append(cur.state)
        local_states.append(lc.state)
    asked = request_rows([(fsm, s, None) for s in states])
    assert asked == len(set(states)) and request_rows([(fsm, states[-1], None)]) == 0
    assert fill_rows([(fsm, states[-1], None)]) == asked
    for s, ls in zip(states, local_states):
        assert fsm.has_row(s) and np.array_equal(fsm.mask_row(s), local.mask_row(ls))


def test_budget_rows_from_the_workers_are_the_inline_ones(compiler: GrammarCompiler, gpt2_vocab: Vocabulary) -> None:
    """Where a budget binds, the workers compute the state's budget rows too: along a real
    token path at tight budgets the engine's copy serves them without walking successors, and
    every budget row equals the one an in-process compile computes inline."""
    from structgen.fsm import request_rows

    c = Constraint.json_schema(PERSON)  # unbounded ("city"): budgets can bind
    fsm = compiler.submit(c).result(timeout=120)
    local = GrammarCompiler(gpt2_vocab).compile(c)
    cur, lc = fsm.cursor(), local.cursor()
    walked = 0
    for tok in [*_ids(gpt2_vocab, json.dumps(INSTANCES[0])), None]:
        for left in (3, 9, 40):
            need = fsm.budgets.walk_needed(cur.state, left)
            if need:
                assert request_rows([(fsm, cur.state, left)]) == 1
                assert fill_rows([(fsm, cur.state, left)]) == 1
                assert cur.state in fsm.budgets  # answered by the worker, not walked here
                walked += 1
            assert not fsm.budgets.walk_needed(cur.state, left)
            assert np.array_equal(fsm.row(cur.budget_row_index(left)), local.row(lc.budget_row_index(left)))
        if tok is not None:
            cur.advance(tok)
            lc.advance(tok)
    assert walked > 5
    assert not fsm.budgets.walk_needed(cur.state, None)
    assert compiler.row_workers is not None and compiler.row_workers.stats().budget_rows >= walked


def test_a_grammar_loads_while_a_large_answer_waits_to_be_read(gpt2_vocab: Vocabulary, tmp_path: Path) -> None:
    """The engine may send a worker a new grammar (the path of the file a compile process
    wrote) while that worker's answer to an earlier ask (many rows) waits for the engine
    thread to read it: the load completes at once, the worker reads and removes the file, and
    the answer is collected afterwards.  A worker that only read between answers deadlocked
    here (both sides writing a full pipe, the engine thread waiting behind the load for the
    worker's send lock)."""
    import threading

    from structgen.fsm.compile_process import ship_blob
    from structgen.fsm.row_workers import RowWorkers

    big = {"type": "object", "properties": {f"field_{i}": {"type": "string", "maxLength": 40} for i in range(40)}}
    text = json.dumps({f"field_{i}": f"value {i} " + "lorem ipsum dolor sit amet" for i in range(12)})
    workers = RowWorkers(gpt2_vocab, 1)
    workers.start()
    try:
        comp = GrammarCompiler(gpt2_vocab, CompilerConfig(cache_size=0))
        first = comp.compile(Constraint.json_schema(big))
        path = tmp_path / "first.pkl"
        path.write_bytes(ship_blob(comp.compile(Constraint.json_schema(big))))
        assert workers.attach(first, "first", str(path))
        cur = first.cursor()
        states = []
        for tok in _ids(gpt2_vocab, text):
            cur.advance(tok)
            states.append(cur.state)
        assert workers.request([(first, s, None) for s in states]) >= 100  # an answer of ≥ 100 rows: more than a socket holds
        second = comp.compile(Constraint.json_schema(big))
        path2 = tmp_path / "second.pkl"
        path2.write_bytes(ship_blob(comp.compile(Constraint.json_schema(big))))
        loader = threading.Thread(target=workers.attach, args=(second, "second", str(path2)), daemon=True)
        loader.start()
        loader.join(timeout=20)
        assert not loader.is_alive(), "the load waited for the engine to read the worker's answer"
        assert workers.fill([(first, s, None) for s in states]) >= 100
        assert all(first.has_row(s) for s in states) and second.row_source is not None
        deadline = time.monotonic() + 20
        while path2.exists() and time.monotonic() < deadline:  # the worker reads the load after the answer it sent
            time.sleep(0.01)
        assert not path.exists() and not path2.exists()
    finally:
        workers.close()


def test_a_late_row_is_reported_outstanding_until_its_answer_is_in(gpt2_vocab: Vocabulary) -> None:
    """rows_outstanding asks for missing rows and, without ``until``, never waits: while the
    worker holding the grammar is stopped its rows stay outstanding (with ``until``, until that
    is true); once it runs again they come in, and they are the inline rows."""
    import os
    import signal

    from structgen.fsm import rows_outstanding

    comp = GrammarCompiler(gpt2_vocab, CompilerConfig(processes=1, row_processes=1))
    comp.start_workers()
    try:
        schema = {"type": "object", "properties": {"w": {"type": "string", "maxLength": 7}}, "required": ["w"]}
        fsm = comp.submit(Constraint.json_schema(schema)).result(timeout=120)
        local = GrammarCompiler(gpt2_vocab).compile(Constraint.json_schema(schema))
        cur, lc = fsm.cursor(), local.cursor()
        for tok in _ids(gpt2_vocab, '{"w": "ab'):
            cur.advance(tok)
            lc.advance(tok)
        assert fsm.row_source is not None and not fsm.has_row(cur.state)
        pid = fsm.row_source.workers.pids()[fsm.row_source.index]
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            assert rows_outstanding([(fsm, cur.state, None), (local, lc.state, None)]) == [True, False]
            t0 = time.monotonic()
            still = rows_outstanding([(fsm, cur.state, None)], until=lambda: time.monotonic() > t0 + 0.1)
            assert still == [True] and time.monotonic() >= t0 + 0.1  # waited for `until`, asked once, unanswered
        finally:
            os.kill(pid, signal.SIGCONT)
        deadline = time.monotonic() + 60
        assert rows_outstanding([(fsm, cur.state, None)], until=lambda: time.monotonic() > deadline) == [False]
        assert fsm.has_row(cur.state) and np.array_equal(fsm.mask_row(cur.state), local.mask_row(lc.state))
    finally:
        comp.close()
