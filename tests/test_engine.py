"""Engine behaviour on a tiny random Llama (CPU): scheduling, KV pressure, jump-forward, radix
reuse, chunked prefill, streaming, seeds, stop rules and bad input."""

from __future__ import annotations

import dataclasses
import json

import jsonschema
import pytest
import torch
from pydantic import BaseModel, Field
from structgen.schemas import SchemaError, UnsupportedSchemaError

import structgen
from structgen import Constraint, Engine, EngineConfig, GenerateRequest, RequestError, SamplingParams
from structgen.engine.request import RequestOutput, Status, StreamChunk
from structgen.engine.scheduler import SchedulerConfig
from structgen.models import ModelLoadError, UnsupportedModelError
from structgen.runtime.memory import MemoryConfig
from structgen.server.engine_client import engine_snapshot

ENUMS = {
    "type": "object",
    "properties": {
        "house": {"enum": ["Gryffindor", "Slytherin", "Ravenclaw", "Hufflepuff"]},
        "alive": {"type": "boolean"},
        "status": {"enum": ["Pure-blood", "Half-blood", "Muggle-born"]},
        "wand": {
            "type": "object",
            "properties": {
                "length": {"type": "integer", "minimum": 9, "maximum": 14},
                "core": {"enum": ["phoenix feather", "dragon heartstring"]},
            },
            "required": ["length", "core"],
            "additionalProperties": False,
        },
    },
    "required": ["house", "alive", "status", "wand"],
    "additionalProperties": False,
}
SMALL = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 6}, "n": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["name", "n"],
    "additionalProperties": False,
}


def make_engine(path: str, *, memory: MemoryConfig | None = None, **sched: object) -> Engine:
    return Engine(
        path,
        EngineConfig(
            memory=memory or MemoryConfig(max_total_tokens=8192, max_context=512),
            scheduler=SchedulerConfig(**{"max_running_requests": 64, **sched}),
        ),
    )  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def engine(tiny_llama_dir: str) -> Engine:
    eng = make_engine(tiny_llama_dir)
    yield eng  # type: ignore[misc]
    eng.close()


def _prompts(n: int) -> list[str]:
    return [f"Character {i}: describe them as JSON with some detail {i * 7}." for i in range(n)]


def test_memory_pressure_retracts_and_matches_ample_run(tiny_llama_dir: str) -> None:
    reqs = [GenerateRequest(p, SamplingParams(max_tokens=48), Constraint.json_schema(SMALL)) for p in _prompts(64)]
    with make_engine(tiny_llama_dir) as ample:
        expected = ample.generate(reqs)
    for radix in (True, False):
        tight = make_engine(
            tiny_llama_dir,
            memory=MemoryConfig(max_total_tokens=160, max_context=512),
            radix_cache=radix,
            decode_reserve_tokens=2,
        )
        got = tight.generate(reqs)
        assert [o.text for o in got] == [o.text for o in expected]
        assert all(o.finish_reason == "stop" for o in got)
        for o in got:
            jsonschema.validate(json.loads(o.text), SMALL)
        assert tight.stats().retractions > 0
        if tight.cache.radix is not None:
            tight.cache.radix.check()
            assert tight.cache.radix.protected_size == 0  # nothing pinned once all requests finished
            tight.cache.radix.evict(10**9)
        assert tight.runner.allocator.available == tight.runner.allocator.capacity  # no leaked slot
        assert tight.runner.req_to_token.available == 64
        tight.close()


def test_jump_forward_on_vs_off(tiny_llama_dir: str) -> None:
    reqs = [GenerateRequest(p, SamplingParams(max_tokens=120), Constraint.json_schema(ENUMS)) for p in _prompts(6)]
    results = {}
    for jf in (True, False):
        with make_engine(tiny_llama_dir, jump_forward=jf) as eng:
            outs = eng.generate(reqs)
            results[jf] = (outs, eng.stats().forwards, eng.tokenizer)
        for o in outs:
            jsonschema.validate(json.loads(o.text), ENUMS)
            u = o.usage
            assert u.completion_tokens == u.sampled_tokens + u.forced_tokens - u.rolled_back_tokens
            # token_ids leave out an EOS that ended the output; completion_tokens count it (a
            # grammar that can only end is finished without sampling one)
            assert u.completion_tokens - len(o.token_ids) in (0, 1) and 50256 not in o.token_ids  # the tiny model's EOS
    on, off = results[True], results[False]
    assert on[1] < off[1]
    assert sum(o.usage.forwards for o in on[0]) < sum(o.usage.forwards for o in off[0])
    assert all(o.usage.forced_tokens > 0 for o in on[0]) and all(o.usage.forced_tokens == 0 for o in off[0])
    tok = on[2]
    for o in on[0]:  # canonical: re-encoding the text gives the same ids
        assert tok(o.text, add_special_tokens=False)["input_ids"] == o.token_ids, o.text


def test_per_request_jump_forward_switch(engine: Engine) -> None:
    c = Constraint.json_schema(ENUMS)
    on, off = engine.generate(
        [
            GenerateRequest("a", SamplingParams(max_tokens=120), c),
            GenerateRequest("a", SamplingParams(max_tokens=120, jump_forward=False), c),
        ]
    )
    assert on.usage.forced_tokens > 0 and off.usage.forced_tokens == 0 and on.usage.forwards < off.usage.forwards


UNBOUNDED = {
    "type": "object",
    "properties": {"x": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string"}}, "k": {"enum": ["alpha", "beta"]}},
    "required": ["x", "tags", "k"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("jump_forward", [True, False])
def test_budget_completion_ends_valid_within_max_tokens(engine: Engine, jump_forward: bool) -> None:
    """A random model in an infinite language (unbounded numbers, strings, arrays) is cut by
    max_tokens; with budget completion (the default) every output is valid and within budget."""
    c = Constraint.json_schema(UNBOUNDED)
    budgets = [33, 36, 40, 56]  # the shortest valid output has 33 bytes
    reqs = [
        GenerateRequest(p, SamplingParams(max_tokens=m, temperature=1.5, seed=i, jump_forward=jump_forward), c)
        for i, (p, m) in enumerate(zip(_prompts(16), budgets * 4))
    ]
    outs = engine.generate(reqs)
    for o, r in zip(outs, reqs):
        assert o.finish_reason in ("stop", "length") and o.usage.completion_tokens <= r.params.max_tokens, o
        jsonschema.validate(json.loads(o.text), UNBOUNDED)
    # closing early to fit max_tokens shapes the values: reported as "length", never as a complete "stop"
    assert sum(o.finish_reason == "length" for o in outs) >= 4
    cut = engine.generate([dataclasses.replace(r, params=dataclasses.replace(r.params, budget_completion=False)) for r in reqs])
    assert sum(o.finish_reason == "length" for o in cut) >= 8
    invalid = 0
    for o in cut:
        try:
            jsonschema.validate(json.loads(o.text), UNBOUNDED)
        except (ValueError, jsonschema.ValidationError):
            invalid += 1
    assert invalid >= 8


def test_radix_cache_reuses_prompt_prefix(engine: Engine) -> None:
    prompt = "A long shared system prompt about wizards and their wands. " * 6
    first = engine.generate([GenerateRequest(prompt + "Harry", SamplingParams(max_tokens=20))])[0]
    second = engine.generate([GenerateRequest(prompt + "Ron", SamplingParams(max_tokens=20))])[0]
    again = engine.generate([GenerateRequest(prompt + "Harry", SamplingParams(max_tokens=20))])[0]
    assert first.usage.cached_tokens == 0 and second.usage.cached_tokens >= 60
    assert again.usage.cached_tokens == again.usage.prompt_tokens - 1 and again.text == first.text


def test_chunked_prefill_matches_unchunked(tiny_llama_dir: str, engine: Engine) -> None:
    prompt = "Chunk me into pieces please, " * 12
    reqs = [
        GenerateRequest(prompt, SamplingParams(max_tokens=24), Constraint.json_schema(SMALL)),
        GenerateRequest("short one", SamplingParams(max_tokens=24)),
    ]
    whole = engine.generate(reqs)
    with make_engine(tiny_llama_dir, max_batch_tokens=16, radix_cache=False) as chunked:
        parts = chunked.generate(reqs)
        assert chunked.stats().forwards > 8
    assert [o.text for o in parts] == [o.text for o in whole]
    assert parts[0].usage.forwards > whole[0].usage.forwards


def test_stream_deltas_rebuild_text_without_repeats(engine: Engine) -> None:
    reqs = [GenerateRequest(p, SamplingParams(max_tokens=120), Constraint.json_schema(ENUMS)) for p in _prompts(4)]
    texts = ["", "", "", ""]
    finals: dict[int, object] = {}
    for i, chunk in engine.stream(reqs):
        assert not finals.get(i), "chunk after the final one"
        texts[i] += chunk.delta
        if chunk.finished:
            finals[i] = chunk
    outs = engine.generate(reqs)
    assert texts == [o.text for o in outs]
    assert any(o.usage.rolled_back_tokens > 0 for o in outs)  # rollbacks happened and were not shown twice
    for o in outs:  # the incremental text cache survived the rollbacks
        assert o.text == b"".join(engine.vocab.token_bytes[t] for t in o.token_ids).decode("utf-8", errors="replace")


def test_seeded_sampling_is_reproducible_across_batches(engine: Engine) -> None:
    p = SamplingParams(max_tokens=30, temperature=1.0, top_p=0.9, top_k=50, seed=1234)
    alone = engine.generate([GenerateRequest("Once upon a time", p)])[0]
    crowd = engine.generate(
        [
            GenerateRequest("noise", dataclasses.replace(p, seed=1)),
            GenerateRequest("Once upon a time", p),
            GenerateRequest("more noise", SamplingParams(max_tokens=5, temperature=0.7)),
        ]
    )
    assert crowd[1].token_ids == alone.token_ids
    other = engine.generate([GenerateRequest("Once upon a time", dataclasses.replace(p, seed=99))])[0]
    assert other.token_ids != alone.token_ids


def test_stop_rules(engine: Engine) -> None:
    free = engine.generate([GenerateRequest("hello", SamplingParams(max_tokens=7))])[0]
    assert free.finish_reason in ("length", "stop") and free.usage.completion_tokens <= 7
    if free.finish_reason == "length":
        assert len(free.token_ids) == 7
    stop_word = free.text[2:4]
    stopped = engine.generate([GenerateRequest("hello", SamplingParams(max_tokens=7, stop=(stop_word,)))])[0]
    assert stopped.finish_reason == "stop" and stop_word not in stopped.text and free.text.startswith(stopped.text)
    done = engine.generate([GenerateRequest("x", SamplingParams(max_tokens=50), Constraint.regex("(yes|no)"))])[0]
    assert done.finish_reason == "stop" and done.text in ("yes", "no") and done.usage.forwards <= 2


def test_abort(engine: Engine) -> None:
    rid = engine.submit(GenerateRequest("abort me", SamplingParams(max_tokens=100)))
    engine.step()
    assert engine.abort(rid)
    chunks = engine.step()
    assert any(c.rid == rid and c.finished and c.finish_reason == "abort" for c in chunks) or engine.output(rid).finish_reason == "abort"
    assert not engine.has_unfinished()


def test_step_emits_the_previous_steps_chunks_first_and_streams_the_same_text(engine: Engine) -> None:
    """``step(emit=…)``: the chunks of the previous step's tokens reach ``emit`` before the step
    returns the rest; over a whole run every request streams the text it streams without it."""

    def run(early: bool) -> dict[int, str]:
        rids = [engine.submit(GenerateRequest(p, SamplingParams(max_tokens=24), Constraint.json_schema(SMALL))) for p in _prompts(6)]
        text = {r: "" for r in rids}
        finished: set[int] = set()
        emitted: list[list[StreamChunk]] = []
        early_steps = 0
        while engine.has_unfinished():
            emitted.clear()
            returned = engine.step(emit=emitted.append) if early else engine.step()
            for c in [c for part in emitted for c in part] + returned:
                assert c.rid not in finished
                text[c.rid] += c.delta
                if c.finished:
                    finished.add(c.rid)
            early_steps += bool(emitted)
        assert finished == set(rids)
        assert early_steps > 0 if early and engine.scheduler.overlap else early_steps == 0
        return {i: text[r] for i, r in enumerate(rids)}

    streamed = run(early=True)
    assert streamed == run(early=False) and all(streamed.values())
    rid = engine.submit(GenerateRequest("x", SamplingParams(max_tokens=2)))
    with pytest.raises(TypeError, match="emit must be a callable taking a list of StreamChunk, got list"):
        engine.step(emit=[])  # type: ignore[arg-type]
    while engine.has_unfinished():  # the refused call changed nothing: the request submitted before it still runs
        engine.step()
    assert engine.output(rid).finish_reason == "length" and len(engine.output(rid).token_ids) == 2


def test_one_context_check(engine: Engine) -> None:
    """``check_context``: None takes the room left; beyond it ``submit`` clips and the strict
    form (the server's) refuses; a prompt that leaves no room is refused both ways."""
    ctx = min(engine.runner.max_context, engine.runner.allocator.capacity)
    assert engine.check_context(10, SamplingParams(max_tokens=None)).max_tokens == ctx - 10
    assert engine.check_context(10, SamplingParams(max_tokens=5)).max_tokens == 5
    assert engine.check_context(10, SamplingParams(max_tokens=10**6), clip=True).max_tokens == ctx - 10
    with pytest.raises(RequestError, match="at most") as info:
        engine.check_context(10, SamplingParams(max_tokens=10**6))
    assert info.value.param == "max_tokens" and info.value.code == "context_length_exceeded"
    for clip in (False, True):
        with pytest.raises(RequestError, match="at least one must be left") as info:
            engine.check_context(ctx, SamplingParams(), clip=clip)
        assert info.value.param == "prompt" and info.value.code == "context_length_exceeded"
    rid = engine.submit(GenerateRequest(list(range(100, 110)), SamplingParams(max_tokens=10**6)))
    assert engine.abort(rid)


def test_bad_input_errors_and_engine_keeps_serving(tiny_llama_dir: str, tmp_path, engine: Engine) -> None:
    with pytest.raises(ModelLoadError, match="does not exist"):
        Engine(str(tmp_path / "nope"))
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": 1}))
    with pytest.raises(UnsupportedModelError, match="supported: LlamaForCausalLM"):
        Engine(str(tmp_path / "gpt2"))
    with pytest.raises(RequestError, match="context is 512 tokens"):
        engine.submit(GenerateRequest("word " * 600))
    with pytest.raises(RequestError, match="max_tokens"):
        SamplingParams(max_tokens=0)
    with pytest.raises(RequestError, match="temperature"):
        SamplingParams(temperature=-0.5)
    with pytest.raises(RequestError, match="top_p"):
        SamplingParams(top_p=0)
    with pytest.raises(RequestError, match="prompt"):
        engine.submit(GenerateRequest(""))
    with pytest.raises(RequestError, match="chat messages"):
        engine.submit(GenerateRequest([{"role": "user"}, 3]))
    with pytest.raises(UnsupportedSchemaError, match="uniqueItems"):
        structgen.generate(schema={"type": "array", "uniqueItems": True}, prompt="x", engine=engine)
    with pytest.raises(SchemaError):
        structgen.generate(schema={"type": "objekt"}, prompt="x", engine=engine)
    with pytest.raises(structgen.RegexError):
        structgen.generate(regex="(unclosed", prompt="x", engine=engine)
    # a failing request in a batch: its own error; the others complete
    outs = engine.generate(
        [
            GenerateRequest("fine", SamplingParams(max_tokens=10)),
            GenerateRequest("word " * 600),
            GenerateRequest("bad schema", SamplingParams(), Constraint.json_schema({"minimum": "zero"})),
            GenerateRequest("fine too", SamplingParams(max_tokens=30), Constraint.json_schema(SMALL)),
        ]
    )
    assert [o.finish_reason for o in outs][1:3] == ["error", "error"]
    assert isinstance(outs[1].error, RequestError) and isinstance(outs[2].error, SchemaError)
    assert outs[0].finish_reason in ("stop", "length") and outs[3].finish_reason == "stop"
    jsonschema.validate(json.loads(outs[3].text), SMALL)


class Person(BaseModel):
    name: str = Field(max_length=10)
    age: int = Field(ge=0, le=120)


def test_cli_generate(tiny_llama_dir: str, tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from structgen.cli import main

    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(Person.model_json_schema()))
    assert main(["generate", "--model", tiny_llama_dir, "--schema", str(schema), "--prompt", "Who?"]) == 0
    out = capsys.readouterr().out
    value = json.loads(out.splitlines()[0])
    Person.model_validate(value)
    assert "forced" in out and "forwards" in out
    assert main(["generate", "--model", tiny_llama_dir, "--regex", "[a-c]{3}", "--prompt", "abc"]) == 0
    assert main(["generate", "--model", str(tmp_path / "missing"), "--regex", "a", "--prompt", "x"]) == 2
    assert "does not exist" in capsys.readouterr().err


def _held_run(path: str, monkeypatch: pytest.MonkeyPatch, prefill_while_compiling: bool, outcome: str) -> list[RequestOutput]:
    """Two constrained requests (a long prompt and a one-token prompt) whose compile is held
    while an unconstrained one runs; checks what each holds meanwhile, then releases the compile
    with ``outcome`` ("ok", "fail") or aborts both ("abort"), and returns the three outputs."""
    from concurrent.futures import Future

    from structgen.fsm.errors import GrammarCompileError

    held: Future = Future()
    with make_engine(path, prefill_while_compiling=prefill_while_compiling) as eng:
        kv_free = eng.runner.allocator.available
        real = eng.scheduler.grammar.compiler
        assert real is not None
        monkeypatch.setattr(real, "submit", lambda constraint: held)
        params = SamplingParams(max_tokens=30)
        prompt = "constrained: describe a person as JSON with a name and a number"
        slow = eng.submit(GenerateRequest(prompt, params, Constraint.json_schema(SMALL)))
        short = eng.submit(GenerateRequest([7], params, Constraint.json_schema(SMALL)))
        free = eng.submit(GenerateRequest("free", SamplingParams(max_tokens=4)))
        for _ in range(6):
            eng.step()
        assert eng.output(free).finish_reason in ("stop", "length")
        long_req, short_req = eng._reqs[slow], eng._reqs[short]
        assert not long_req.output_ids and not short_req.output_ids
        if prefill_while_compiling:  # whole prompts computed, their first-token logits held for the grammar
            for r in (long_req, short_req):
                assert r.status is Status.RUNNING and r.kv_len == len(r.prompt_ids) and r.held_logits is not None
                assert r.held_logits.shape == (eng.runner.vocab_size,) and r.sample_ref is None
        else:
            assert long_req.status is Status.GRAMMAR and long_req.kv_len == 0 and short_req.status is Status.GRAMMAR
        snap = engine_snapshot(eng)  # each request counted once, wherever it waits
        assert (snap.grammar, snap.waiting, snap.running) == ((0, 0, 2) if prefill_while_compiling else (2, 0, 0))
        monkeypatch.undo()
        if outcome == "abort":
            assert eng.abort(slow) and eng.abort(short)
        elif outcome == "fail":
            held.set_exception(GrammarCompileError("automaton exceeds max_states=1 DFA states"))
        else:
            held.set_result(real.compile(Constraint.json_schema(SMALL)))
        while eng.has_unfinished():
            eng.step()
        sched = eng.scheduler
        assert not len(sched.grammar) and not sched.prefill.waiting and not sched.decode.running
        radix = eng.cache.radix
        assert radix is not None and radix.protected_size == 0
        assert eng.runner.allocator.available + radix.evictable_size == kv_free  # every slot is back
        return [eng.output(r) for r in (slow, short, free)]


@pytest.mark.parametrize("outcome", ["ok", "fail", "abort"])
def test_grammar_compiles_do_not_block_the_batch(tiny_llama_dir: str, monkeypatch: pytest.MonkeyPatch, outcome: str) -> None:
    """While a grammar compiles the rest of the batch runs; with ``prefill_while_compiling``
    its prompt prefills meanwhile and the first-token logits wait on the device for the
    grammar.  Outputs are the same either way; a failed compile or an abort frees what the
    prefill took (held logits included)."""
    on = _held_run(tiny_llama_dir, monkeypatch, True, outcome)
    off = _held_run(tiny_llama_dir, monkeypatch, False, outcome)
    assert [(o.text, o.finish_reason) for o in on] == [(o.text, o.finish_reason) for o in off]
    if outcome == "ok":
        for o in on[:2]:
            jsonschema.validate(json.loads(o.text), SMALL)
    else:
        want = "error" if outcome == "fail" else "abort"
        assert [o.finish_reason for o in on[:2]] == [want, want] and on[2].finish_reason in ("stop", "length")
        if outcome == "fail":
            assert all("max_states=1" in str(o.error) for o in on[:2])


@pytest.mark.parametrize("overlap", [True, False])
def test_first_token_sampled_in_the_prefill_step_when_the_grammar_compiles_during_it(
    tiny_llama_dir: str, monkeypatch: pytest.MonkeyPatch, overlap: bool
) -> None:
    """A grammar that compiles while its prompt's prefill runs (after the step was scheduled,
    before its sample) gets its first token from that prefill: one forward, no held logits,
    and the same output as a grammar compiled beforehand."""
    from concurrent.futures import Future

    class ReadyAfterSchedule(Future):  # type: ignore[type-arg]
        """Not done when the step is scheduled; done (with ``fsm``) when its sample is gathered."""

        def __init__(self, fsm: object) -> None:
            super().__init__()
            self.fsm, self.asked = fsm, 0

        def done(self) -> bool:
            self.asked += 1
            if self.asked == 2:
                self.set_result(self.fsm)
            return super().done()

    constraint = Constraint.json_schema(SMALL)
    prompt = "constrained: describe a person as JSON"
    with make_engine(tiny_llama_dir, overlap_schedule=overlap) as eng:
        real = eng.scheduler.grammar.compiler
        assert real is not None
        want = eng.generate([GenerateRequest(prompt, SamplingParams(max_tokens=30), constraint)])[0]
        fut = ReadyAfterSchedule(real.compile(constraint))
        monkeypatch.setattr(real, "submit", lambda c: fut)
        rid = eng.submit(GenerateRequest(prompt, SamplingParams(max_tokens=30), constraint))
        eng.step()
        req = eng._reqs[rid]
        assert fut.asked >= 2 and req.held_logits is None and req.kv_len == len(req.prompt_ids)
        assert req.sample_ref is not None if overlap else req.output_ids  # sampled in the prefill step
        monkeypatch.undo()
        while eng.has_unfinished():
            eng.step()
        got = eng.output(rid)
    assert (got.text, got.finish_reason) == (want.text, want.finish_reason)
    jsonschema.validate(json.loads(got.text), SMALL)


def test_idle_engine_admits_a_prompt_that_fills_the_pool(tiny_llama_dir: str) -> None:
    with make_engine(
        tiny_llama_dir, memory=MemoryConfig(max_total_tokens=40, max_context=512), max_running_requests=4, decode_reserve_tokens=16
    ) as eng:
        out = eng.generate([GenerateRequest(list(range(100, 135)), SamplingParams(max_tokens=50))])[0]
        assert out.finish_reason in ("stop", "length") and out.usage.completion_tokens <= 40 - 35


def test_compile_limit_errors_surface_as_themselves(tiny_llama_dir: str) -> None:
    from structgen.fsm import CompilerConfig
    from structgen.fsm.errors import GrammarCompileError

    with Engine(tiny_llama_dir, EngineConfig(compiler=CompilerConfig(max_states=2))) as eng:
        with pytest.raises(GrammarCompileError, match="max_states"):
            structgen.generate(schema=ENUMS, prompt="x", engine=eng)
        assert eng.generate([GenerateRequest("still serving", SamplingParams(max_tokens=3))])[0].finish_reason in ("stop", "length")


def test_state_cap_met_mid_output_ends_that_request_only(tiny_llama_dir: str) -> None:
    """A lazily built automaton that passes ``max_states`` while its request is generating
    (the compile built only the first states) ends that request with a named error; the
    engine keeps serving the others in the same batch."""
    from structgen.fsm import CompilerConfig
    from structgen.fsm.errors import GrammarCompileError

    long_text = Constraint.regex("[a-z ]{300,400}")  # 300+ characters: one automaton state each
    with Engine(tiny_llama_dir, EngineConfig(compiler=CompilerConfig(max_states=150))) as eng:
        for jump_forward in (True, False):
            capped, plain = eng.generate(
                [
                    GenerateRequest("x", SamplingParams(max_tokens=400, temperature=1.0, seed=3, jump_forward=jump_forward), long_text),
                    GenerateRequest("still serving", SamplingParams(max_tokens=5)),
                ]
            )
            assert capped.finish_reason == "error" and isinstance(capped.error, GrammarCompileError)
            assert "max_states=150" in str(capped.error) and "reached while generating" in str(capped.error)
            assert plain.finish_reason in ("stop", "length") and plain.error is None
            # the grammar that filled up left the cache: the next request gets a fresh copy
            assert eng.compiler is not None and eng.compiler.compile(long_text).num_states < 150


@pytest.mark.shared
@pytest.mark.parametrize("tokenizer", ["llama3", "qwen2"])
def test_real_tokenizer_chat_generate(tokenizer: str, tmp_path) -> None:
    from structgen.models import write_random_checkpoint

    from .conftest import shared_path, tiny_config

    tok_dir = shared_path("tokenizers", tokenizer)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tok_dir)
    kind = "qwen2" if tokenizer == "qwen2" else "llama"
    cfg = tiny_config(kind, vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    path = write_random_checkpoint(tmp_path / tokenizer, cfg, seed=3, tokenizer_dir=tok_dir)
    with make_engine(str(path)) as eng:
        values = structgen.generate(
            schema=ENUMS,
            prompt=[[{"role": "user", "content": f"Character {i}, as JSON."}] for i in range(4)],
            engine=eng,
            return_output=True,
        )
        for value, out in values:
            jsonschema.validate(value, ENUMS)
            assert out.usage.forced_tokens > 0
            assert eng.tokenizer(out.text, add_special_tokens=False)["input_ids"] == out.token_ids  # canonical


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_engine_generates_valid_json(tiny_llama_dir: str, dtype: str) -> None:
    with Engine(tiny_llama_dir, EngineConfig(dtype=dtype, memory=MemoryConfig(max_total_tokens=2048, max_context=512))) as eng:
        assert eng.runner.kv_pool.k_buffers[0].dtype == getattr(__import__("torch"), dtype)
        value = structgen.generate(schema=ENUMS, prompt="JSON please: ", engine=eng)
        jsonschema.validate(value, ENUMS)


def test_closed_engine_hands_its_runner_to_the_next(tiny_llama_dir: str) -> None:
    """close() aborts what runs and empties the radix cache, so a second engine (another
    scheduler setting) can reuse the weights and pools; a busy runner is refused."""

    cfg = EngineConfig(device="cpu", dtype="float32")
    first = Engine(tiny_llama_dir, cfg)
    first.generate([GenerateRequest("Hello there, this is cached", SamplingParams(max_tokens=4))])
    assert first.cache.radix is not None and first.cache.radix.total_size > 0
    first.submit(GenerateRequest("still running", SamplingParams(max_tokens=50)))
    first.step()
    with pytest.raises(ValueError, match="close its engine first"):
        Engine(tiny_llama_dir, cfg, runner=first.runner)
    first.close()
    assert first.runner.pools_empty()
    no_jf = dataclasses.replace(cfg, scheduler=dataclasses.replace(cfg.scheduler, jump_forward=False))
    with Engine(tiny_llama_dir, no_jf, runner=first.runner) as second:
        assert second.runner is first.runner
        out = second.generate([GenerateRequest("Hello there, this is cached", SamplingParams(max_tokens=4))])[0]
        assert out.usage.cached_tokens == 0  # the new engine starts with an empty radix cache
    assert first.runner.pools_empty()
    # a runner-level setting the reused runner was not built with is refused, never ignored
    for other in (dataclasses.replace(cfg, prefill_kernel="fa3"), dataclasses.replace(cfg, extend_as_decode=not cfg.extend_as_decode)):
        with pytest.raises(ValueError, match=r"built with other settings: (prefill_kernel|extend_as_decode)="):
            Engine(tiny_llama_dir, other, runner=first.runner)


def test_gc_freeze_keeps_long_lived_state_out_of_collections(tiny_llama_dir: str) -> None:
    """gc_freeze: the start-up heap and each newly served grammar are frozen (gc.freeze), so
    full collections do not walk them; close() unfreezes; gc_freeze=False leaves the collector alone."""
    import gc

    gc.unfreeze()
    with Engine(tiny_llama_dir, EngineConfig(device="cpu", dtype="float32", gc_freeze=False)) as plain:
        plain.generate([GenerateRequest("Hi", SamplingParams(max_tokens=3), Constraint.json_schema(SMALL))])
        assert gc.get_freeze_count() == 0
    engine = Engine(tiny_llama_dir, EngineConfig(device="cpu", dtype="float32"))
    at_start = gc.get_freeze_count()
    assert at_start > 0
    fresh = {"type": "object", "properties": {"q": {"type": "integer", "minimum": 0, "maximum": 7}}, "required": ["q"]}
    out = engine.generate([GenerateRequest("Hi", SamplingParams(max_tokens=12), Constraint.json_schema(fresh))])[0]
    assert out.finish_reason == "stop"
    assert gc.get_freeze_count() > at_start  # the new grammar (and what lived with it) joined the frozen heap
    engine.close()
    assert gc.get_freeze_count() == 0
    with pytest.raises(ValueError, match="gc_freeze must be a bool, got 'yes'"):
        EngineConfig(gc_freeze="yes")  # type: ignore[arg-type]


def test_switch_interval_is_set_while_the_engine_runs_and_restored(tiny_llama_dir: str) -> None:
    """An engine configured with a switch interval sets the interpreter's while it runs and
    close() puts the caller's back; None (the default) leaves it alone; bad values are refused
    by name."""
    import sys

    outer = sys.getswitchinterval()
    sys.setswitchinterval(0.004)  # the caller's own setting
    try:
        with Engine(tiny_llama_dir, EngineConfig(device="cpu", dtype="float32", switch_interval_s=0.0005)):
            assert sys.getswitchinterval() == pytest.approx(0.0005)
        assert sys.getswitchinterval() == pytest.approx(0.004)
        with Engine(tiny_llama_dir, EngineConfig(device="cpu", dtype="float32")) as eng:
            assert eng.config.switch_interval_s is None
            assert sys.getswitchinterval() == pytest.approx(0.004)
    finally:
        sys.setswitchinterval(outer)
    for bad in (0, -1.0, 2.0):
        with pytest.raises(ValueError, match="switch_interval_s"):
            EngineConfig(switch_interval_s=bad)


def test_jump_forward_precheck_is_necessary(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """``_jump_may_fit`` (checked before a plan is made) never refuses a plan that ``_jump_fits``
    would accept, and in a budget-bound run it does spare some plans."""
    from structgen.engine.scheduler import Scheduler

    may_fit, fits_fn = Scheduler._jump_may_fit, Scheduler._jump_fits
    last: dict[int, bool] = {}
    seen: list[tuple[bool, bool]] = []

    def record_may_fit(req, max_rollback):  # type: ignore[no-untyped-def]
        last[id(req)] = may_fit(req, max_rollback)
        return True  # plan anyway, to compare with the full check

    def record_fits(req, plan):  # type: ignore[no-untyped-def]
        fits = fits_fn(req, plan)
        seen.append((last[id(req)], fits))
        return fits

    monkeypatch.setattr(Scheduler, "_jump_may_fit", staticmethod(record_may_fit))
    monkeypatch.setattr(Scheduler, "_jump_fits", staticmethod(record_fits))
    long_min = {  # the shortest output (~90 bytes) outgrows 24 tokens: plans are refused
        "type": "object",
        "properties": {"name": {"type": "string", "minLength": 60}, "city": {"type": "string"}, "zip": {"type": "integer"}},
        "required": ["name", "city", "zip"],
    }
    reqs = [
        GenerateRequest(p, SamplingParams(max_tokens=m, temperature=1.5, seed=i), Constraint.json_schema(schema))
        for i, p in enumerate(_prompts(8))
        for schema, m in ((UNBOUNDED, 36 + 4 * i), (long_min, 24))
    ]
    engine.generate(reqs)
    assert seen and all(pre for pre, fits in seen if fits)  # necessary: every accepted plan passes the precheck
    assert any(not pre for pre, _ in seen)  # and it spares refused plans


def test_generate_raises_when_max_tokens_shaped_the_object(engine: Engine) -> None:
    """structgen.generate never returns an object that max_tokens closed early: the valid but
    shortened text comes back on a GenerationError with finish reason "length"."""
    from structgen import GenerationError, generate

    with pytest.raises(GenerationError) as e:
        generate(schema=UNBOUNDED, prompt=_prompts(1)[0], engine=engine, params=SamplingParams(max_tokens=33, temperature=1.5, seed=0))
    assert e.value.finish_reason == "length" and "max_tokens" in str(e.value)
    jsonschema.validate(json.loads(e.value.text), UNBOUNDED)


def test_a_chat_template_given_replaces_the_tokenizers(tiny_llama_dir: str) -> None:
    """``chat_template`` renders chat prompts instead of the tokenizer's own; one that cannot
    render a user message is refused when the engine starts."""
    template = "{% for m in messages %}<<{{ m['role'] }}>> {{ m['content'] }}\n{% endfor %}<<assistant>> "
    cfg = EngineConfig(memory=MemoryConfig(max_total_tokens=1024, max_context=256))
    with Engine(tiny_llama_dir, cfg, chat_template=template) as eng:
        ids = eng.tokenize([{"role": "user", "content": "hello"}])
        assert eng.tokenizer.decode(ids).endswith("<<user>> hello\n<<assistant>> ")
    with pytest.raises(ValueError, match="chat template"):
        Engine(tiny_llama_dir, cfg, chat_template="{% for m in messages %}{{ m.nope() }}{% endfor %}")


def test_cpu_threads_are_chosen_deliberately(tiny_llama_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small model on the CPU runs on one thread unless told otherwise; OMP_NUM_THREADS and
    ``cpu_threads`` win; bad values are refused by name."""
    from structgen.engine.config import SMALL_MODEL_PARAMS, cpu_threads_for

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert cpu_threads_for(None, 10_000) == 1 and cpu_threads_for(None, SMALL_MODEL_PARAMS) is None
    assert cpu_threads_for(3, 10_000) == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert cpu_threads_for(None, 10_000) is None
    with pytest.raises(ValueError, match="cpu_threads"):
        EngineConfig(cpu_threads=0)
    before = torch.get_num_threads()
    try:
        with make_engine(tiny_llama_dir) as _eng:
            assert torch.get_num_threads() == before  # OMP_NUM_THREADS set: left alone
        monkeypatch.delenv("OMP_NUM_THREADS")
        with make_engine(tiny_llama_dir) as _eng:
            assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_kv_pressure_retracts_a_prompt_waiting_for_its_grammar_first(tiny_llama_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A prompt prefilled while its grammar compiles has produced nothing: when the KV pool
    runs short it is retracted before a request that is decoding, even a newer one."""
    from concurrent.futures import Future

    held: Future = Future()
    memory = MemoryConfig(max_total_tokens=72, max_context=512)
    with make_engine(tiny_llama_dir, memory=memory, radix_cache=False, decode_reserve_tokens=4) as eng:
        real = eng.scheduler.grammar.compiler
        assert real is not None
        monkeypatch.setattr(real, "submit", lambda constraint: held)
        slow = eng.submit(GenerateRequest(list(range(100, 130)), SamplingParams(max_tokens=20), Constraint.json_schema(SMALL)))
        eng.step()
        assert eng._reqs[slow].kv_len == 30 and eng._reqs[slow].held_logits is not None  # first-token logits wait for the grammar
        free = eng.submit(GenerateRequest(list(range(200, 205)), SamplingParams(max_tokens=60, ignore_eos=True)))
        for _ in range(300):  # 60 tokens; retracting the decoding request instead livelocks
            if eng._reqs[free].status is Status.FINISHED:
                break
            eng.step()
        assert eng.output(free).usage.retractions == 0 and eng.output(free).usage.completion_tokens == 60
        assert eng._reqs[slow].retractions == 1 and eng._reqs[slow].kv_len == 0  # not prefilled again before its grammar
        assert eng._reqs[slow].held_logits is None  # dropped with its KV (the re-prefill computes them again)
        monkeypatch.undo()
        held.set_result(real.compile(Constraint.json_schema(SMALL)))
        while eng.has_unfinished():
            eng.step()
        assert eng.output(slow).finish_reason in ("stop", "length")


def test_held_prompts_leave_running_rows_to_ready_requests(tiny_llama_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Prompts prefilled while their grammar compiles take at most half of
    ``max_running_requests``: a request that can run is not kept out by held ones."""
    from concurrent.futures import Future

    held: Future = Future()
    with make_engine(tiny_llama_dir, max_running_requests=4) as eng:
        real = eng.scheduler.grammar.compiler
        assert real is not None
        monkeypatch.setattr(real, "submit", lambda constraint: held)
        params, schema = SamplingParams(max_tokens=20), Constraint.json_schema(SMALL)
        slow = [eng.submit(GenerateRequest(f"held prompt number {i} with some words", params, schema)) for i in range(4)]
        for _ in range(3):
            eng.step()
        assert sum(1 for r in eng.scheduler.decode.running if r.grammar_pending) == 2
        free = eng.submit(GenerateRequest("free", SamplingParams(max_tokens=4)))
        for _ in range(40):
            if eng._reqs[free].status is Status.FINISHED:
                break
            eng.step()
        assert eng.output(free).finish_reason in ("stop", "length")
        monkeypatch.undo()
        held.set_result(real.compile(Constraint.json_schema(SMALL)))
        while eng.has_unfinished():
            eng.step()
        for rid in slow:
            jsonschema.validate(json.loads(eng.output(rid).text), SMALL)
