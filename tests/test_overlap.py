"""The overlap scheduler (CPU, tiny random Llama): a step launches its forward on placeholder ids
before the previous step's sampled ids are processed; results must equal synchronous steps."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
import torch

from structgen import Constraint, Engine, EngineConfig, GenerateRequest, SamplingParams
from structgen.engine.sampling import FutureIds
from structgen.engine.scheduler import SchedulerConfig
from structgen.runtime.memory import MemoryConfig

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "house": {"enum": ["Gryffindor", "Slytherin", "Ravenclaw"]},
        "n": {"type": "integer", "minimum": 0, "maximum": 999},
    },
    "required": ["name", "house", "n"],
    "additionalProperties": False,
}


def _engine(path: str, *, overlap: bool, tokens: int = 8192, **sched: Any) -> Engine:
    mem = MemoryConfig(max_total_tokens=tokens, max_context=512)
    sched_cfg = SchedulerConfig(max_running_requests=32, overlap_schedule=overlap, **sched)
    return Engine(path, EngineConfig(memory=mem, scheduler=sched_cfg))


def _requests() -> list[GenerateRequest]:
    c = Constraint.json_schema(SCHEMA)
    return [
        GenerateRequest("Describe a wizard as JSON.", SamplingParams(max_tokens=60), c),
        GenerateRequest("Another wizard, please.", SamplingParams(max_tokens=60, jump_forward=False), c),
        GenerateRequest("Free text one", SamplingParams(max_tokens=9)),
        GenerateRequest("Free text two", SamplingParams(max_tokens=25, temperature=0.8, top_p=0.9, seed=7)),
        GenerateRequest("Free text three", SamplingParams(max_tokens=17, stop=("e",))),
        GenerateRequest("x", SamplingParams(max_tokens=40), Constraint.regex("(yes|no)")),
        GenerateRequest("Seeded wizard", SamplingParams(max_tokens=60, temperature=1.0, seed=3), c),
    ]


class _InputSpy:
    """Counts forwards whose input ids hold placeholders (launched before the host saw the ids)."""

    def __init__(self, engine: Engine) -> None:
        self.placeholder_forwards = 0
        self.forwards = 0
        forward = engine.runner.forward

        def spy(batch: Any) -> torch.Tensor:
            self.forwards += 1
            self.placeholder_forwards += bool((batch.input_ids_cpu < 0).any())
            return forward(batch)

        engine.runner.forward = spy  # type: ignore[method-assign]


def _check_drained(engine: Engine) -> None:
    """Every request finished: no KV slot or row is held (the last launched step may still be
    in flight, holding only stale samples), and one more step drains it."""
    radix = engine.cache.radix
    if radix is not None:
        radix.check()
        assert radix.protected_size == 0
        radix.evict(10**9)
    assert engine.runner.pools_empty()
    while engine.has_unfinished():
        assert engine.step() == []
    assert engine.scheduler.inflight is None


def _outputs(engine: Engine, reqs: list[GenerateRequest]) -> list[tuple[list[int], str, str | None]]:
    return [(o.token_ids, o.text, o.finish_reason) for o in engine.generate(reqs)]


def test_future_ids_resolve_placeholders() -> None:
    fut = FutureIds(4, torch.device("cpu"))
    fut.ids_gpu.copy_(torch.tensor([11, 22, 33, 44]))
    ids = torch.tensor([5, FutureIds.placeholder(2), 0, FutureIds.placeholder(0), 7])
    assert fut.resolve(ids).tolist() == [5, 33, 0, 11, 7]
    with pytest.raises(ValueError, match="size"):
        FutureIds(0, torch.device("cpu"))
    with pytest.raises(ValueError, match="overlap_schedule"):
        SchedulerConfig(overlap_schedule=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prefill_while_compiling must be a bool, got 'yes'"):
        SchedulerConfig(prefill_while_compiling="yes")  # type: ignore[arg-type]


def test_overlap_matches_synchronous_steps(tiny_llama_dir: str) -> None:
    """Same tokens, texts and finish reasons: jump-forward (with re-tokenization), stop strings,
    length, EOS-free completion, seeded draws; stale samples are dropped and their KV freed."""
    reqs = _requests()
    with _engine(tiny_llama_dir, overlap=False) as sync:
        expected = _outputs(sync, reqs)
        _check_drained(sync)
    with _engine(tiny_llama_dir, overlap=True) as eng:
        spy = _InputSpy(eng)
        got = _outputs(eng, reqs)
        _check_drained(eng)
    assert got == expected
    assert spy.placeholder_forwards > 0  # the overlap really launched forwards on unseen ids
    for (_ids, text, reason), r in zip(got, reqs):
        if r.constraint is not None and r.constraint.kind == "json_schema":
            assert reason == "stop"
            jsonschema.validate(json.loads(text), SCHEMA)
    assert expected[4][2] == "stop" and "e" not in expected[4][1]


def test_jump_forward_under_overlap_costs_one_forward_per_jump(tiny_llama_dir: str) -> None:
    c = Constraint.json_schema(SCHEMA)
    req = GenerateRequest("Describe a wizard as JSON.", SamplingParams(max_tokens=60), c)
    runs = {}
    for overlap in (False, True):
        with _engine(tiny_llama_dir, overlap=overlap) as eng:
            jumps = 0
            orig = eng.scheduler._on_token

            def counting(r: Any, tok: int, orig: Any = orig) -> None:
                nonlocal jumps
                before = r.version
                orig(r, tok)
                jumps += r.version != before and r.status.value != "finished"

            eng.scheduler._on_token = counting  # type: ignore[method-assign]
            runs[overlap] = (eng.generate([req])[0], jumps)
    (sync, sync_jumps), (ovl, ovl_jumps) = runs[False], runs[True]
    assert ovl.token_ids == sync.token_ids and ovl.usage.forced_tokens > 0
    assert ovl_jumps == sync_jumps > 0
    # each jump wastes the decode launched meanwhile; so does the end (the decode after the last token)
    assert ovl.usage.forwards == sync.usage.forwards + ovl_jumps + 1, (ovl.usage.forwards, sync.usage.forwards, ovl_jumps)


def test_overlap_under_kv_pressure_retracts_and_matches(tiny_llama_dir: str) -> None:
    c = Constraint.json_schema(SCHEMA)
    reqs = [GenerateRequest(f"Wizard {i} as JSON, with detail {i * 7}.", SamplingParams(max_tokens=48), c) for i in range(24)]
    with _engine(tiny_llama_dir, overlap=False) as ample:
        expected = _outputs(ample, reqs)
    with _engine(tiny_llama_dir, overlap=True, tokens=200, decode_reserve_tokens=2) as tight:
        got = _outputs(tight, reqs)
        assert tight.stats().retractions > 0
        _check_drained(tight)
    assert [g[1] for g in got] == [e[1] for e in expected]


def test_abort_with_a_sample_in_flight(tiny_llama_dir: str) -> None:
    with _engine(tiny_llama_dir, overlap=True) as eng:
        victim = eng.submit(GenerateRequest("abort me", SamplingParams(max_tokens=50)))
        keep = eng.submit(GenerateRequest("keep me", SamplingParams(max_tokens=20)))
        for _ in range(3):
            eng.step()
        assert eng.scheduler.inflight is not None
        assert eng.abort(victim)
        while eng.has_unfinished():
            eng.step()
        assert eng.output(victim).finish_reason == "abort"
        assert eng.output(keep).finish_reason == "length" and len(eng.output(keep).token_ids) == 20
        _check_drained(eng)
