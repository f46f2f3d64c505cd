"""The compile processes' pool: driven from the caller's thread, a burst of submits never blocks,
every answer arrives (polled or waited on), a dead worker fails what it left unanswered and the
compiler starts a new pool, and nothing is left on disk."""

from __future__ import annotations

import os
import shutil
import time
from concurrent.futures import CancelledError
from typing import Any

import numpy as np
import pytest
from structgen.fsm.compile_pool import CompilePool
from structgen.fsm.compiler import GrammarCompiler
from structgen.fsm.compiler_config import CompilerConfig
from structgen.fsm.constraint import Constraint
from structgen.fsm.errors import CompileWorkerError
from structgen.fsm.vocab import Vocabulary


def _schema(i: int, pad: int = 0) -> Constraint:
    return Constraint.json_schema(
        {"type": "object", "description": "x" * pad, "properties": {f"k{i}": {"type": "integer"}, "s": {"type": "string", "maxLength": 3}}}
    )


def test_a_burst_of_submits_is_queued_without_blocking_and_all_answered(tiny_vocab: Vocabulary) -> None:
    """Submits whose tasks outgrow the task pipe return at once (the rest waits in the pool
    and is written as the workers take tasks); each answer is the grammar an in-process
    compile gives; answers are taken in by poll on this thread; the grammars' files are gone
    once taken, and the pool's folder after close."""
    comp = GrammarCompiler(tiny_vocab, CompilerConfig(processes=2, cache_size=0))
    try:
        constraints = [_schema(i, pad=40_000) for i in range(40)]  # 1.6 MB of tasks: more than the pipe holds
        futs = [comp.submit(c) for c in constraints]
        pool = comp._procs
        assert isinstance(pool, CompilePool) and pool._out  # not all written yet: left for later polls
        deadline = time.monotonic() + 120
        while not all(f.done() for f in futs) and time.monotonic() < deadline:
            comp.poll()
            time.sleep(0.005)
        assert all(f.done() for f in futs)
        local = GrammarCompiler(tiny_vocab, CompilerConfig(cache_size=0))
        for c, f in zip(constraints, futs):
            got, want = f.result(), local.compile(c)
            assert got.vocab is tiny_vocab and np.array_equal(got.mask_row(got.initial), want.mask_row(want.initial))
            assert got.dfa.accepts(b'{"k0": 1}') == want.dfa.accepts(b'{"k0": 1}')
        assert os.listdir(pool.folder) == []  # each file removed once its grammar was read
        assert comp.stats().misses == 40
    finally:
        comp.close()
    assert not os.path.exists(pool.folder)


def test_a_dead_worker_fails_what_it_left_and_the_next_submit_gets_a_new_pool(tiny_vocab: Vocabulary) -> None:
    """A compile worker killed with a task outstanding (before it even started): the future
    fails with ``CompileWorkerError`` (not cached: the same constraint compiles on the next
    submit, on a new pool); a worker that dies idle is replaced at the next submit too."""
    comp = GrammarCompiler(tiny_vocab, CompilerConfig(processes=1, cache_size=8))
    try:
        fut = comp.submit(_schema(1))
        first = comp._procs
        assert first is not None
        first._procs[0].kill()
        with pytest.raises(CompileWorkerError, match="stopped"):
            fut.result(timeout=60)
        again = comp.submit(_schema(1)).result(timeout=120)
        second = comp._procs
        assert second is not first and again.dfa.accepts(b'{"k1": 2}')
        assert comp.stats().failures == 1 and comp.stats().misses == 2
        second._procs[0].kill()  # idle
        second._procs[0].join(timeout=10)
        assert comp.submit(_schema(2)).result(timeout=120).dfa.accepts(b'{"k2": 3}')
        assert comp._procs is not second
    finally:
        comp.close()


def test_a_grammar_the_folder_cannot_take_comes_back_on_the_answer_pipe(tiny_vocab: Vocabulary) -> None:
    """A worker that cannot write the grammar's file (its folder full, or gone as here) sends
    the grammar on the answer pipe instead: the compile is answered, not lost."""
    comp = GrammarCompiler(tiny_vocab, CompilerConfig(processes=1, cache_size=0))
    try:
        comp.start_workers()
        pool = comp._procs
        assert pool is not None
        shutil.rmtree(pool.folder)
        got = comp.submit(_schema(3)).result(timeout=120)
        assert got.dfa.accepts(b'{"k3": 4}') and not got.dfa.accepts(b'{"k3": "x"}')
    finally:
        comp.close()


def test_close_cancels_what_is_not_answered(tiny_vocab: Vocabulary) -> None:
    """A wait on a compile not answered yet ends at its timeout; closing the compiler with
    compiles queued: their futures raise ``CancelledError`` instead of waiting forever."""
    comp = GrammarCompiler(tiny_vocab, CompilerConfig(processes=1, cache_size=0))
    futs = [comp.submit(_schema(i)) for i in range(5)]  # before the worker has started: none answered
    with pytest.raises(TimeoutError):
        futs[0].result(timeout=0.01)  # waits its timeout once, polling, then says so
    comp.close()
    for f in futs:
        with pytest.raises(CancelledError):
            f.result(timeout=10)


def test_pool_rejects_no_processes() -> None:
    with pytest.raises(ValueError, match="processes"):
        CompilePool(0, print, (), print)


def _cold_requests(n: int, tiny_llama_dir: str) -> tuple[list[dict[str, Any]], list[Any], Any, list[str]]:
    """``n`` requests, each with an object schema of its own; the engine's memory config; and
    their greedy outputs on an engine compiling on threads (the reference)."""
    from structgen import Constraint as ApiConstraint
    from structgen import Engine, EngineConfig, GenerateRequest, SamplingParams
    from structgen.runtime.memory import MemoryConfig

    schemas = [
        {"type": "object", "properties": {f"f{i}": {"type": "string", "maxLength": 5}, "n": {"type": "integer"}}, "required": [f"f{i}"]}
        for i in range(n)
    ]
    params = SamplingParams(max_tokens=40)
    reqs = [GenerateRequest(f"item {i} as JSON", params, ApiConstraint.json_schema(s)) for i, s in enumerate(schemas)]
    memory = MemoryConfig(max_total_tokens=4096, max_context=256)
    with Engine(tiny_llama_dir, EngineConfig(memory=memory)) as threads:
        want = [o.text for o in threads.generate(reqs)]
    return schemas, reqs, memory, want


def test_an_engine_on_compile_and_row_processes_answers_as_on_threads(tiny_llama_dir: str) -> None:
    """An engine whose grammars compile on a compile process (answers taken in by its step
    loop's poll) and whose rows come from a row worker: every request, each with a schema of
    its own, gets the greedy output of the same engine on compile threads, valid."""
    import json

    import jsonschema

    from structgen import Engine, EngineConfig

    schemas, reqs, memory, want = _cold_requests(6, tiny_llama_dir)
    config = EngineConfig(memory=memory, compiler=CompilerConfig(processes=1, row_processes=1))
    with Engine(tiny_llama_dir, config) as procs:
        got = procs.generate(reqs)
        stats = procs.scheduler.grammar.compiler.stats()  # type: ignore[union-attr]
        assert procs.scheduler.num_deferred == 0  # defer_late_rows is off by default: a sample waits for its rows
    assert [o.text for o in got] == want
    assert stats.misses == len(schemas) and stats.failures == 0
    for o, s in zip(got, schemas):
        if o.finish_reason == "stop":
            jsonschema.validate(json.loads(o.text), s)


def test_requests_whose_rows_are_late_sample_later_with_the_same_output(tiny_llama_dir: str) -> None:
    """With ``defer_late_rows`` and one of two row workers stopped for a while, the requests
    whose grammar it holds keep their logits and sample in later steps while the others go on;
    every output is the greedy output of an engine computing rows on its own thread."""
    import os
    import signal
    import threading

    from structgen import Engine, EngineConfig
    from structgen.engine import SchedulerConfig

    _schemas, reqs, memory, want = _cold_requests(4, tiny_llama_dir)
    compiler = CompilerConfig(processes=1, row_processes=2)
    config = EngineConfig(memory=memory, scheduler=SchedulerConfig(defer_late_rows=True), compiler=compiler)
    with Engine(tiny_llama_dir, config) as procs:
        workers = procs.scheduler.grammar.compiler.row_workers  # type: ignore[union-attr]
        assert workers is not None
        pid = workers.pids()[0]
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        timer = threading.Timer(1.5, os.kill, (pid, signal.SIGCONT))
        timer.start()
        try:
            got = procs.generate(reqs)
        finally:
            timer.cancel()
            os.kill(pid, signal.SIGCONT)
        deferred = procs.scheduler.num_deferred
    assert [o.text for o in got] == want
    assert deferred > 0
