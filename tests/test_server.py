"""The HTTP server on 127.0.0.1 with a tiny random-weight Llama: the real ``openai`` client,
every error row (status + message), load, disconnects and fuzzed bad input."""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from pydantic import BaseModel, Field
from structgen.fsm import CompilerConfig, Constraint

from structgen.engine.engine import EngineConfig
from structgen.engine.scheduler import SchedulerConfig
from structgen.runtime.memory import MemoryConfig

pytest.importorskip("fastapi")
from structgen.server import ServerConfig, ServerThread, create_app

PERSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 10}, "age": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
STATE_CAP_SCHEMA = {"type": "string", "pattern": "^(a|b)*a(a|b){20}$", "maxLength": 60}
LONG = {"prompt": "Count: ", "regex": "([0-9] ){200}", "max_tokens": 480, "temperature": 0.0}  # ≥ 200 forwards


class Person(BaseModel):
    name: str = Field(max_length=10)
    age: int = Field(ge=0, le=99)


def _engine_config(**compiler: Any) -> EngineConfig:
    return EngineConfig(
        memory=MemoryConfig(max_total_tokens=65536, max_context=512),
        scheduler=SchedulerConfig(max_running_requests=128),
        compiler=CompilerConfig(workers=2, **compiler),
    )


@pytest.fixture(scope="module")
def make_server(tiny_llama_dir: str) -> Iterator[Callable[..., ServerThread]]:
    """Start servers (stopped at module end): ``make_server(api_key=..., max_queue=..., compiler=...)``."""
    started: list[ServerThread] = []

    def make(*, compiler: dict[str, Any] | None = None, **kw: Any) -> ServerThread:
        cfg = ServerConfig(
            model=tiny_llama_dir, served_model_name="tiny", shutdown_grace_s=5, engine=_engine_config(**(compiler or {})), **kw
        )
        st = ServerThread(create_app(cfg)).start()
        started.append(st)
        return st

    yield make
    for st in started:
        st.stop()


@pytest.fixture(scope="module")
def server(make_server: Callable[..., ServerThread]) -> ServerThread:
    return make_server(max_queue=256)


@pytest.fixture()
def client(server: ServerThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=120) as c:
        yield c


def _snapshot(st: ServerThread) -> Any:
    return asyncio.run(st.app.state.service.client.snapshot())


def _wait_idle(st: ServerThread, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        snap = _snapshot(st)
        svc = st.app.state.service
        if snap.grammar == snap.waiting == snap.running == 0 and svc.inflight == 0:
            return snap
        assert time.monotonic() < deadline, f"server not idle: {snap}, in flight {svc.inflight}"
        time.sleep(0.05)


def _metric(client: httpx.Client, name: str, labels: str = "") -> float:
    text = client.get("/metrics").text
    m = re.search(rf"^{re.escape(name + labels)} ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def _error(resp: httpx.Response, status: int) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["message"]
    return body["error"]  # type: ignore[no-any-return]


# ------------------------------------------------------------------ the openai client


@pytest.fixture
def oc(server: ServerThread) -> Iterator[Any]:
    """The official ``openai`` client on the test server, closed afterwards (its pooled sockets
    would otherwise surface as ResourceWarnings in later tests)."""
    openai = pytest.importorskip("openai")
    with openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0) as client:
        yield client


def test_openai_chat_json_schema_and_parse(oc: Any) -> None:
    resp = oc.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "Describe Harry as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON_SCHEMA, "strict": True}},
        max_tokens=64,
        temperature=0,
    )
    choice = resp.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    jsonschema.validate(json.loads(choice.message.content or ""), PERSON_SCHEMA)
    assert resp.usage is not None and resp.usage.completion_tokens > 0 and resp.usage.prompt_tokens > 0

    parsed = oc.chat.completions.parse(
        model="tiny", messages=[{"role": "user", "content": "Ron?"}], response_format=Person, max_tokens=64, seed=3
    )
    person = parsed.choices[0].message.parsed
    assert isinstance(person, Person) and 0 <= person.age <= 99

    obj = oc.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "{}"}], response_format={"type": "json_object"}, max_tokens=200
    )
    if obj.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(obj.choices[0].message.content or ""), dict)


def test_openai_streaming_and_completions(oc: Any) -> None:
    stream = oc.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "JSON please"}],
        response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON_SCHEMA}},
        stream=True,
        stream_options={"include_usage": True},
        max_tokens=64,
    )
    text, reasons, usage = "", [], None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            text += c.delta.content or ""
            if c.finish_reason:
                reasons.append(c.finish_reason)
    assert reasons == ["stop"] and usage is not None and usage.completion_tokens > 0
    jsonschema.validate(json.loads(text), PERSON_SCHEMA)

    comp = oc.completions.create(model="tiny", prompt="Once upon a time", max_tokens=8, temperature=0)
    assert comp.object == "text_completion" and comp.choices[0].finish_reason in ("stop", "length")
    assert comp.usage is not None and comp.usage.completion_tokens <= 8
    streamed = "".join(
        c.choices[0].text
        for c in oc.completions.create(model="tiny", prompt="Once upon a time", max_tokens=8, temperature=0, stream=True)
        if c.choices
    )
    assert streamed == comp.choices[0].text  # greedy: the same text streamed or not

    models = oc.models.list()
    assert [m.id for m in models.data] == ["tiny"]


# ------------------------------------------------------------------ /v1/structured


def test_structured_schema_regex_and_text(client: httpx.Client) -> None:
    r = client.post("/v1/structured", json={"prompt": "Person: ", "json_schema": PERSON_SCHEMA, "seed": 1, "temperature": 0.8})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["finish_reason"] == "stop" and body["output"] == json.loads(body["text"])
    jsonschema.validate(body["output"], PERSON_SCHEMA)
    assert set(body["usage"]) == {"prompt_tokens", "cached_tokens", "completion_tokens", "forced_tokens"}
    assert body["usage"]["forced_tokens"] > 0  # the keys are jump-forwarded
    assert set(body["timings"]) == {"queue_ms", "compile_ms", "ttft_ms", "total_ms"}
    assert 0 <= body["timings"]["ttft_ms"] <= body["timings"]["total_ms"]

    r = client.post("/v1/structured", json={"messages": [{"role": "user", "content": "Phone?"}], "regex": r"[0-9]{3}-[0-9]{4}"})
    assert r.status_code == 200 and re.fullmatch(r"[0-9]{3}-[0-9]{4}", r.json()["text"]) and r.json()["output"] == r.json()["text"]

    # budget completion (default): a random model ends a long list in time; off: cut
    rx = r"\[([0-9]+, )*[0-9]+\]"
    body = {"prompt": "List: ", "regex": rx, "max_tokens": 8, "temperature": 2.0, "seed": 3}
    r = client.post("/v1/structured", json=body)
    assert r.status_code == 200 and re.fullmatch(rx, r.json()["text"]) and r.json()["usage"]["completion_tokens"] <= 8, r.text
    if r.json()["finish_reason"] == "length":  # closed early to fit: never presented as a complete output
        assert r.json()["output"] is None
    body33 = {"prompt": "List: ", "regex": r"\[([0-9]+, )*[0-9]+\]", "max_tokens": 3, "temperature": 2.0, "seed": 1}
    r = client.post("/v1/structured", json=body33)
    assert r.status_code == 200 and r.json()["finish_reason"] == "length" and r.json()["output"] is None, r.text
    r = client.post("/v1/structured", json={**body, "budget_completion": False})
    assert r.status_code == 200 and r.json()["finish_reason"] == "length" and not re.fullmatch(rx, r.json()["text"]), r.text

    r = client.post("/v1/structured", json={"prompt": "Hello", "max_tokens": 5})
    assert r.status_code == 200 and "output" not in r.json() and r.json()["usage"]["completion_tokens"] <= 5

    with client.stream("POST", "/v1/structured", json={"prompt": "Person: ", "json_schema": PERSON_SCHEMA, "stream": True}) as s:
        assert s.status_code == 200 and s.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[6:]) for line in s.iter_lines() if line.startswith("data: ") and line != "data: [DONE]"]
    deltas = "".join(e["delta"] for e in events if e["object"] == "structured.chunk")
    final = events[-1]
    assert final["object"] == "structured.final" and final["text"] == deltas and final["output"] == json.loads(deltas)


def test_metrics_time_the_collector_pauses_of_both_processes(client: httpx.Client) -> None:
    """The front end and the engine process each froze their heap after start-up with one full
    collection, which their trackers timed."""
    assert client.post("/v1/structured", json={"prompt": "x", "max_tokens": 2}).status_code == 200  # a fresh snapshot
    text = client.get("/metrics").text  # one scrape: the front end's counts move between two

    def value(name: str, labels: str) -> float:
        m = re.search(rf"^{re.escape(name + labels)} ([0-9.e+-]+)$", text, re.M)
        assert m is not None, name + labels
        return float(m.group(1))

    for process in ("front_end", "engine"):
        labels = f'{{process="{process}"}}'
        count = value("structgen_gc_pause_seconds_count", labels)
        assert count >= 1 and value("structgen_gc_longest_pause_seconds", labels) > 0, process
        assert value("structgen_gc_pause_seconds_bucket", f'{{le="+Inf",process="{process}"}}') == count
        assert value("structgen_gc_pause_seconds_sum", labels) >= value("structgen_gc_longest_pause_seconds", labels)


def test_health_and_metrics(client: httpx.Client) -> None:
    assert client.get("/health").json()["status"] == "ok"
    client.post("/v1/structured", json={"prompt": "x", "json_schema": PERSON_SCHEMA})
    text = client.get("/metrics").text
    for name in (
        "structgen_requests_total",
        "structgen_completion_tokens_total",
        "structgen_forced_tokens_total",
        "structgen_cache_hit_rate",
        "structgen_queue_length",
        "structgen_compile_seconds_bucket",
        "structgen_kv_free_tokens",
        "structgen_running_requests",
        "structgen_waiting_requests",
        "structgen_kv_usage",
        "structgen_tpot_seconds_bucket",
    ):
        assert name in text, name
    assert _metric(client, "structgen_forced_tokens_total") > 0
    assert 0.0 <= _metric(client, "structgen_kv_usage") <= 1.0
    assert _metric(client, "structgen_tpot_seconds_count") >= 1
    from structgen import __version__

    assert client.get("/version").json() == {"version": __version__}
    assert 'route="/version"' in client.get("/metrics").text
    client.get("/docs")
    assert 'route="/docs"' in client.get("/metrics").text


def test_startup_summary_names_what_is_served(server: ServerThread) -> None:
    svc = server.app.state.service
    line = svc.summary()
    assert line.startswith(f"serving {svc.model_name} ") and "context" in line and "KV pool" in line and "CUDA graphs" in line


# ------------------------------------------------------------------ the error table


@pytest.mark.parametrize(
    "content,param,needle",
    [
        (b'{"prompt": "x",', None, "not valid JSON"),
        (b"\xff\xfe\x00garbage", None, "JSON"),
        (json.dumps({"prompt": "x", "temperature": "hot"}).encode(), "temperature", "number"),
        (json.dumps({"temperature": 0.5}).encode(), None, "prompt"),
        (json.dumps({"prompt": "x", "json_schema": {}, "regex": "a"}).encode(), None, "at most one"),
        (json.dumps({"prompt": "x", "bogus": 1}).encode(), "bogus", "Extra inputs"),
        (json.dumps({"prompt": "x", "temperature": -1}).encode(), "temperature", "greater than or equal"),
        (json.dumps({"prompt": "x", "max_tokens": 10**9}).encode(), "max_tokens", "context"),
        (json.dumps({"prompt": "word " * 600}).encode(), "prompt", "context"),
    ],
)
def test_400_rows(client: httpx.Client, content: bytes, param: str | None, needle: str) -> None:
    err = _error(client.post("/v1/structured", content=content, headers={"content-type": "application/json"}), 400)
    assert needle in err["message"]
    if param is not None:
        assert err["param"] == param


def test_400_openai_shapes(client: httpx.Client) -> None:
    msgs = [{"role": "user", "content": "hi"}]
    assert _error(client.post("/v1/chat/completions", json={"model": "tiny", "messages": msgs, "n": 2}), 400)["param"] == "n"
    assert (
        "logit_bias"
        in _error(client.post("/v1/chat/completions", json={"model": "tiny", "messages": msgs, "logit_bias": {"1": 2}}), 400)["message"]
    )
    assert _error(client.post("/v1/chat/completions", json={"model": "tiny", "messages": []}), 400)["param"] == "messages"
    assert _error(client.post("/v1/chat/completions", json={"model": "other", "messages": msgs}), 404)["code"] == "model_not_found"
    assert _error(client.post("/v1/completions", json={"model": "tiny", "prompt": ["a", "b"]}), 400)["param"] == "prompt"


def test_401_when_an_api_key_is_set(make_server: Callable[..., ServerThread]) -> None:
    st = make_server(api_key="s3cret")
    with httpx.Client(base_url=st.url, timeout=60) as c:
        body = {"prompt": "x", "max_tokens": 2}
        assert "missing API key" in _error(c.post("/v1/structured", json=body), 401)["message"]
        assert "invalid API key" in _error(c.post("/v1/structured", json=body, headers={"Authorization": "Bearer nope"}), 401)["message"]
        assert c.post("/v1/structured", json=body, headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert c.get("/health").status_code == 200  # probes need no key


def test_413_body_too_large(make_server: Callable[..., ServerThread]) -> None:
    st = make_server(max_body_bytes=4096)
    with httpx.Client(base_url=st.url, timeout=60) as c:
        big = json.dumps({"prompt": "x" * 10000}).encode()
        assert "4096 bytes" in _error(c.post("/v1/structured", content=big, headers={"content-type": "application/json"}), 413)["message"]

        def chunked() -> Iterator[bytes]:  # no Content-Length: counted while it arrives
            for i in range(0, len(big), 1000):
                yield big[i : i + 1000]

        _error(c.post("/v1/structured", content=chunked(), headers={"content-type": "application/json"}), 413)
        assert c.post("/v1/structured", json={"prompt": "x", "max_tokens": 2}).status_code == 200


def test_422_rows_and_cached_failures(server: ServerThread, client: httpx.Client) -> None:
    unsupported = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}}
    err = _error(client.post("/v1/structured", json={"prompt": "x", "json_schema": unsupported}), 422)
    assert err["code"] == "unsupported_schema" and "uniqueItems" in err["message"] and "#/properties/tags" in err["message"]
    assert err["param"] == "json_schema"

    err = _error(client.post("/v1/structured", json={"prompt": "x", "regex": "ab(c"}), 422)
    assert err["code"] == "invalid_regex" and "position 2" in err["message"] and err["param"] == "regex"

    err = _error(client.post("/v1/structured", json={"prompt": "x", "json_schema": {"type": "string", "minLength": "three"}}), 422)
    assert err["code"] == "invalid_schema" and "minLength" in err["message"]

    rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": STATE_CAP_SCHEMA}}
    err = _error(
        client.post("/v1/chat/completions", json={"model": "tiny", "messages": [{"role": "user", "content": "x"}], "response_format": rf}),
        422,
    )
    assert err["code"] == "compile_limit" and "max_states" in err["message"] and err["param"] == "response_format"
    assert err["message"].endswith("of the subschema at #")  # where in the schema the product passed the cap

    before = _snapshot(server)  # the engine process's compiler counters, also on /metrics
    again = _error(client.post("/v1/structured", json={"prompt": "y", "json_schema": STATE_CAP_SCHEMA}), 422)
    after = _snapshot(server)
    assert again["code"] == "compile_limit" and again["message"] == err["message"]
    assert after.compile_failures == before.compile_failures and after.compile_misses == before.compile_misses
    assert after.compile_hits == before.compile_hits + 1
    assert _metric(client, "structgen_grammar_compiles", '{result="hit"}') == after.compile_hits


def test_422_compile_timeout(make_server: Callable[..., ServerThread]) -> None:
    st = make_server(compiler={"timeout_s": 0.05, "max_states": 10**7})
    with httpx.Client(base_url=st.url, timeout=60) as c:
        err = _error(c.post("/v1/structured", json={"prompt": "x", "json_schema": STATE_CAP_SCHEMA}), 422)
        assert err["code"] == "compile_timeout" and "timeout_s" in err["message"]


def test_422_state_cap_met_while_generating(make_server: Callable[..., ServerThread]) -> None:
    """A lazily built automaton that passes max_states mid-output: a 422 naming the cap and
    that it was reached while generating, plain or streamed; the server keeps serving."""
    st = make_server(compiler={"max_states": 150})
    body = {"prompt": "x", "regex": "[a-z ]{300,400}", "max_tokens": 400, "temperature": 1.0, "seed": 3}
    with httpx.Client(base_url=st.url, timeout=60) as c:
        err = _error(c.post("/v1/structured", json=body), 422)
        assert err["code"] == "compile_limit" and "max_states=150" in err["message"] and "reached while generating" in err["message"]
        with c.stream("POST", "/v1/structured", json={**body, "stream": True}) as s:
            events = [json.loads(line[6:]) for line in s.iter_lines() if line.startswith("data: ") and line != "data: [DONE]"]
        assert events and "error" in events[-1] and "reached while generating" in events[-1]["error"]["message"]
        assert c.post("/v1/structured", json={"prompt": "x", "max_tokens": 2}).status_code == 200


def test_429_queue_full(make_server: Callable[..., ServerThread]) -> None:
    st = make_server(max_queue=1)
    with httpx.Client(base_url=st.url, timeout=60) as c:
        with c.stream("POST", "/v1/structured", json={**LONG, "stream": True}) as s:
            assert s.status_code == 200
            lines = s.iter_lines()  # kept referenced: a collected iterator closes the stream
            next(lines)  # the first delta: the request is running
            err = _error(c.post("/v1/structured", json={"prompt": "x", "max_tokens": 2}), 429)
            assert err["code"] == "queue_full" and "max_queue=1" in err["message"]
    _wait_idle(st)
    with httpx.Client(base_url=st.url, timeout=60) as c:
        assert c.post("/v1/structured", json={"prompt": "x", "max_tokens": 2}).status_code == 200


# ------------------------------------------------------------------ load and faults


def test_load_500_requests_at_concurrency_64(server: ServerThread) -> None:
    from server_load import build_workload, run_load, summarize

    jobs = build_workload(500, seed=7)
    records, wall = asyncio.run(run_load(server.url, jobs, 64))
    s = summarize(records, wall)
    print(f"\nload: {s['req_per_s']:.1f} req/s, latency p50 {s['latency_p50_ms']:.0f} ms p99 {s['latency_p99_ms']:.0f} ms")
    assert s["requests"] == 500 and s["ok"] == 500 and s["lost"] == 0, [r.error for r in records if r.error][:3]
    schema_recs = [r for r in records if r.kind == "schema"]
    assert schema_recs and all(r.valid for r in schema_recs)
    assert all(r.valid for r in records if r.kind == "regex")
    assert s["latency_p99_ms"] >= s["latency_p50_ms"] > 0
    later = sorted(r.ttft_ms for r in records[64:] if r.ttft_ms is not None)
    assert len(later) == 436 and summarize(records, wall, first_wave=64)["ttft_p99_later_ms"] == later[round(0.99 * 435)]
    assert math.isnan(summarize(records, wall, first_wave=500)["ttft_p99_later_ms"])
    with pytest.raises(ValueError, match="first_wave must be >= 0, got -1"):
        summarize(records, wall, first_wave=-1)
    snap = _wait_idle(server)
    assert snap.radix_locked == 0


def test_disconnects_free_kv_and_radix_locks(server: ServerThread, client: httpx.Client) -> None:
    aborted_before = _metric(client, "structgen_finished_requests_total", '{finish_reason="abort"}')

    async def stream_then_leave(i: int) -> None:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as c:
            body = {**LONG, "prompt": f"Shared opening of a long story. Part {i}: ", "stream": True}
            async with c.stream("POST", "/v1/structured", json=body) as s:
                assert s.status_code == 200
                async for line in s.aiter_lines():
                    if line.startswith("data: "):
                        break  # leave mid-stream: the connection closes

    async def wait_then_leave(i: int) -> None:
        async with httpx.AsyncClient(base_url=server.url, timeout=0.5) as c:
            with pytest.raises(httpx.TimeoutException):
                await c.post("/v1/structured", json={**LONG, "prompt": f"Story {i}: "})

    async def main() -> None:
        await asyncio.gather(*(stream_then_leave(i) for i in range(50)), *(wait_then_leave(i) for i in range(5)))

    asyncio.run(main())
    snap = _wait_idle(server)
    assert snap.kv_free + snap.kv_evictable == snap.kv_capacity  # the KV pool is back to full capacity
    assert snap.radix_locked == 0  # no radix node is locked
    aborted = _metric(client, "structgen_finished_requests_total", '{finish_reason="abort"}') - aborted_before
    # the 50 streams were running when they left; a plain request that timed out before it was
    # submitted (compile, queue) had nothing to abort
    assert 50 <= aborted <= 55
    assert client.post("/v1/structured", json={"prompt": "x", "json_schema": PERSON_SCHEMA}).status_code == 200


def _malformed_bodies(n: int, seed: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    valid = {"prompt": "hello", "json_schema": PERSON_SCHEMA, "max_tokens": 16}
    raw = json.dumps(valid).encode()
    msgs = [{"role": "user", "content": "hi"}]
    makers: list[Callable[[], tuple[str, Any]]] = [
        lambda: ("/v1/structured", raw[: rng.randrange(1, len(raw) - 1)]),  # truncated JSON
        lambda: ("/v1/structured", bytes(rng.randrange(128, 256) for _ in range(rng.randrange(1, 64)))),  # non-UTF-8 bytes
        lambda: (
            "/v1/structured",
            {**valid, rng.choice(["max_tokens", "temperature", "top_p", "seed", "stream"]): rng.choice(["x", [1], {"a": 1}, float("inf")])},
        ),
        lambda: ("/v1/structured", {k: v for k, v in valid.items() if k != "prompt"}),
        lambda: (
            "/v1/structured",
            {**valid, "json_schema": rng.choice([{"type": 5}, {"minLength": -1}, {"$ref": "#/nope"}, {"enum": []}, {"pattern": "("}])},
        ),
        lambda: ("/v1/structured", {"prompt": "x", "regex": rng.choice(["(", "a{5,2}", "[z-a]", "\\", "(?<", "a**"])}),
        lambda: ("/v1/structured", {"prompt": "x", "json_schema": STATE_CAP_SCHEMA}),
        lambda: ("/v1/structured", {"prompt": "x", "max_tokens": rng.choice([10**6, 10**12, 0, -5])}),
        lambda: ("/v1/structured", {"prompt": "x", "temperature": rng.choice([-1, -0.01, -1e9])}),
        lambda: ("/v1/structured", {"prompt": "x", "top_p": rng.choice([0, 1.5, -1])}),
        lambda: ("/v1/structured", rng.choice([[], "string", 3, None, {}])),
        lambda: (
            "/v1/chat/completions",
            {"model": "tiny", "messages": rng.choice([[], [{"role": "robot", "content": "x"}], [{"content": "x"}], "hi"])},
        ),
        lambda: (
            "/v1/chat/completions",
            {"model": "tiny", "messages": msgs, "response_format": rng.choice([{"type": "xml"}, {"type": "json_schema"}, "json"])},
        ),
        lambda: ("/v1/completions", {"model": "tiny", "prompt": rng.choice(["", [], [10**9], ["a", "b"]])}),
        lambda: ("/v1/structured", {"prompt": "x", "json_schema": {"type": "array", "uniqueItems": True}}),
    ]
    out = []
    for i in range(n):
        path, body = makers[i % len(makers)]()
        out.append((path, body if isinstance(body, bytes) else json.dumps(body).encode()))
    return out


def test_200_malformed_requests_get_4xx_and_the_server_keeps_serving(client: httpx.Client) -> None:
    bodies = _malformed_bodies(200, seed=11)
    statuses = []
    for path, body in bodies:
        r = client.post(path, content=body, headers={"content-type": "application/json"})
        assert 400 <= r.status_code < 500, (path, body[:120], r.status_code, r.text[:300])
        assert r.json()["error"]["message"], (path, body[:120])
        statuses.append(r.status_code)
    assert len(statuses) == 200 and {400, 422} <= set(statuses)
    ok = client.post("/v1/structured", json={"prompt": "x", "json_schema": PERSON_SCHEMA})
    assert ok.status_code == 200 and client.get("/health").json()["status"] == "ok"


@pytest.mark.parametrize("pattern", [r"(a|aa)*b{1,1000}", r"(a|b)*a(a|b){30}", r"(x+x+)+y"])
def test_exploding_regexes_compile_lazily_and_are_served(client: httpx.Client, pattern: str) -> None:
    """Patterns that blow up eager DFA construction compile on demand here: served, and any
    complete output matches."""
    r = client.post("/v1/structured", json={"prompt": "x", "regex": pattern, "max_tokens": 48})
    assert r.status_code == 200, r.text
    body = r.json()
    if body["finish_reason"] == "stop":
        assert re.fullmatch(pattern, body["text"]) and body["output"] == body["text"]
    else:
        assert body["finish_reason"] == "length" and body["output"] is None


# ------------------------------------------------------------------ the command


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_command_answers_and_shuts_down_gracefully(tiny_llama_dir: str, tmp_path: Path) -> None:
    """SIGTERM lets the request in flight finish; the log has the start-up summary and, at
    ``--log-level debug``, one line per request."""
    port = _free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [
        sys.executable,
        "-P",
        "-m",
        "structgen.cli",
        "serve",
        "--model",
        tiny_llama_dir,
        "--port",
        str(port),
        "--max-total-tokens",
        "8192",
        "--log-level",
        "debug",
    ]
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, log.read_text()
            time.sleep(0.1)
        result: dict[str, Any] = {}

        def long_request() -> None:
            result["resp"] = httpx.post(url + "/v1/structured", json=LONG, timeout=60)

        t = threading.Thread(target=long_request)
        t.start()
        for _ in range(600):  # SIGTERM once the request is in flight
            if httpx.get(url + "/health", timeout=5).json()["in_flight"] >= 1:
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        t.join(60)
        assert result["resp"].status_code == 200  # in flight when SIGTERM came: it still completes
        # uvicorn re-raises the captured signal once shut down, so the exit status is the signal's
        assert proc.wait(60) in (0, -signal.SIGTERM), log.read_text()
        text = log.read_text()  # the start-up summary, and a line per request at debug
        assert re.search(r"INFO: +serving \S+ \(.*\): float32 on cpu, context \d+ tokens", text), text[-2000:]
        assert re.search(r"DEBUG: +request \d+: finish=stop prompt=\d+ .* ttft_ms=[0-9.]+", text), text[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()


def test_serve_command_bad_model_folder(tmp_path: Path) -> None:
    from structgen.cli import main

    assert main(["serve", "--model", str(tmp_path / "missing"), "--port", "0"]) == 2


def test_server_config_and_serve_flags_are_validated(capsys: pytest.CaptureFixture[str]) -> None:
    from structgen.cli import main

    for bad, needle in [({"port": 70000}, "port"), ({"max_queue": 0}, "max_queue"), ({"max_body_bytes": 10}, "max_body_bytes"),
                        ({"api_key": ""}, "api_key"), ({"shutdown_grace_s": -1}, "shutdown_grace_s")]:  # fmt: skip
        with pytest.raises(ValueError, match=needle):
            ServerConfig(**bad)
    assert main(["serve", "--max-queue", "0"]) == 2  # refused before any model is loaded
    assert "max_queue must be ≥ 1" in capsys.readouterr().err
    assert main(["serve", "--port", "-1"]) == 2
    assert "port must be in" in capsys.readouterr().err


def test_structured_wraps_text_in_the_demo_extraction_prompt() -> None:
    """With the embedded demo model, /v1/structured gives a text prompt for a schema the model's
    extraction prompt (as ``structgen.generate`` does); without a schema the text goes as is."""
    from transformers import AutoTokenizer

    from structgen.api import default_model_path
    from structgen.demo.data import generate_examples

    e = next(iter(generate_examples(1, "heldout", seed=0)))
    tok = AutoTokenizer.from_pretrained(default_model_path())
    with ServerThread(create_app(ServerConfig(model=default_model_path(), shutdown_grace_s=5))) as st:
        r = httpx.post(f"{st.url}/v1/structured", json={"prompt": e.text, "json_schema": e.schema, "max_tokens": 200}, timeout=120)
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["prompt_tokens"] == len(tok(e.prompt, add_special_tokens=False)["input_ids"])
        r = httpx.post(f"{st.url}/v1/structured", json={"prompt": e.text, "max_tokens": 2}, timeout=120)
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["prompt_tokens"] == len(tok(e.text, add_special_tokens=False)["input_ids"])
        # a field list longer than the context is not wrapped around a prompt that fits as given
        big = {"type": "object", "properties": {"code": {"enum": [f"value_{i:03d}" for i in range(400)]}}, "required": ["code"]}
        body = {"prompt": "The code is value_042.", "json_schema": big, "max_tokens": 20}
        r = httpx.post(f"{st.url}/v1/structured", json=body, timeout=120)
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["prompt_tokens"] == len(tok("The code is value_042.")["input_ids"])
        openai = pytest.importorskip("openai")
        with openai.OpenAI(base_url=st.url + "/v1", api_key="unused", max_retries=0) as oc:  # a vLLM client's body, unchanged
            extra = {"structured_outputs": {"json": e.schema}, "chat_template_kwargs": {}}
            r = oc.chat.completions.create(model=st.app.state.service.model_name, messages=[{"role": "user", "content": e.text}],
                                           max_tokens=200, extra_body=extra)  # fmt: skip
            if r.choices[0].finish_reason == "stop":
                jsonschema.validate(json.loads(r.choices[0].message.content), e.schema)


def test_serve_flags_reach_the_scheduler_config(monkeypatch: pytest.MonkeyPatch) -> None:
    import structgen.server as server_pkg
    from structgen.cli import main

    seen: list[ServerConfig] = []
    monkeypatch.setattr(server_pkg, "serve", lambda config, log_level="info": seen.append(config))
    assert main(["serve", "--no-overlap-schedule", "--no-jump-forward", "--prefill-kernel", "auto", "--no-extend-as-decode"]) == 0
    assert main(["serve"]) == 0
    off, on = (c.engine.scheduler for c in seen)  # type: ignore[union-attr]
    assert not off.overlap_schedule and not off.jump_forward
    assert on.overlap_schedule and on.jump_forward
    changed, default = (c.engine for c in seen)
    assert changed.prefill_kernel == "auto" and not changed.extend_as_decode
    assert default.prefill_kernel == "fa2" and default.extend_as_decode


def test_peer_load_generator_reads_structgen_streams(server: ServerThread) -> None:
    """``structgen bench peers`` against this server: streams read to the final event, tokens
    taken from its usage, every output valid."""
    from structgen.bench.peers import Endpoint, run_load
    from structgen.bench.workloads import BenchRequest

    ep = Endpoint("structgen", "structgen", server.url)
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["n"]}
    reqs = [BenchRequest(f"Number {i}:", Constraint.json_schema(schema), 20) for i in range(4)]
    reqs.append(BenchRequest("Word:", Constraint.regex("[a-z]{2,4}"), 8))
    row = run_load(ep, reqs, 2)
    assert row["failed"] == 0, row["first_error"]
    assert row["valid"] == 1.0 and row["mean_out_tokens"] >= 2 and row["ttft_ms"]["p50"] > 0


def test_a_stop_string_that_cuts_the_json_is_a_stop_with_no_output(client: httpx.Client) -> None:
    """A user stop string ends the output where it matches: finish_reason "stop", the cut
    text, its ``stop_reason``, ``output`` null and no validation error, streamed or not, on
    /v1/structured and on chat completions alike."""
    body = {"prompt": "Person: ", "json_schema": PERSON_SCHEMA, "stop": [":"], "max_tokens": 64}
    got = client.post("/v1/structured", json=body)
    assert got.status_code == 200, got.text
    out = got.json()
    assert out["finish_reason"] == "stop" and out["stop_reason"] == ":" and out["output"] is None
    assert ":" not in out["text"] and out["text"].startswith("{")
    with client.stream("POST", "/v1/structured", json={**body, "stream": True}) as s:
        events = [json.loads(line[6:]) for line in s.iter_lines() if line.startswith("data: ") and line != "data: [DONE]"]
    final = events[-1]
    assert final["object"] == "structured.final" and final["output"] is None and final["stop_reason"] == ":"
    assert not any("error" in e for e in events)
    chat = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Person?"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON_SCHEMA}},
        "stop": [":"],
    }
    resp = client.post("/v1/chat/completions", json=chat)
    assert resp.status_code == 200, resp.text
    choice = resp.json()["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == ":" and ":" not in choice["message"]["content"]
    with client.stream("POST", "/v1/chat/completions", json={**chat, "stream": True}) as s:
        lines = [line for line in s.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]" and not any('"error"' in line for line in lines)


# ------------------------------------------------------------------ vLLM / SGLang request fields


def test_peer_constraint_fields_from_the_peers_docs(oc: Any, client: httpx.Client) -> None:
    """Bodies as vLLM's and SGLang's structured-output docs write them run unchanged, through
    the official ``openai`` client's ``extra_body``."""
    msgs = [{"role": "user", "content": "Classify this sentiment: vLLM is wonderful!"}]
    for extra in ({"guided_choice": ["positive", "negative"]}, {"structured_outputs": {"choice": ["positive", "negative"]}}):
        r = oc.chat.completions.create(model="tiny", messages=msgs, max_tokens=8, extra_body=extra)
        assert r.choices[0].message.content in ("positive", "negative") and r.choices[0].finish_reason == "stop"
    for extra in (
        {"structured_outputs": {"json": PERSON_SCHEMA}},
        {"guided_json": PERSON_SCHEMA},
        {"json_schema": json.dumps(PERSON_SCHEMA)},  # SGLang: the schema as a JSON string
        {"structured_outputs": {"json": json.dumps(PERSON_SCHEMA)}, "top_k": -1, "chat_template_kwargs": {"enable_thinking": False}},
    ):
        r = oc.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "A person"}], max_tokens=64, extra_body=extra)
        if r.choices[0].finish_reason == "stop":
            jsonschema.validate(json.loads(r.choices[0].message.content), PERSON_SCHEMA)
    for extra in ({"regex": "(Paris|London)"}, {"guided_regex": "(Paris|London)"}, {"structured_outputs": {"regex": "(Paris|London)"}}):
        r = oc.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Capital of France?"}], max_tokens=8, extra_body=extra
        )
        assert r.choices[0].message.content in ("Paris", "London")
    r = oc.completions.create(
        model="tiny", prompt="The answer is", max_tokens=8, extra_body={"structured_outputs": {"choice": ["yes", "no"]}}
    )
    assert r.choices[0].text in ("yes", "no")
    body = {"model": "tiny", "prompt": "Person: ", "max_tokens": 64, "structured_outputs": {"json_object": True}}
    text = client.post("/v1/completions", json=body).json()["choices"][0]["text"]
    assert text.startswith("{")


@pytest.mark.parametrize(
    "extra,param,words",
    [
        ({"guided_grammar": 'root ::= "a"'}, "guided_grammar", "context-free"),
        ({"ebnf": 'root ::= "a"'}, "ebnf", "EBNF"),
        ({"structured_outputs": {"grammar": 'root ::= "a"'}}, "structured_outputs.grammar", "context-free"),
        ({"structured_outputs": {"structural_tag": "{}"}}, "structured_outputs.structural_tag", "structural tags"),
        ({"guided_whitespace_pattern": " *"}, "guided_whitespace_pattern", "whitespace"),
        ({"structured_outputs": {"regex": "a", "choice": ["b"]}}, "structured_outputs", "exactly one"),
        ({"guided_json": {"type": "object"}, "regex": "a"}, "regex", "at most one constraint"),
        ({"guided_json": "{not json"}, "guided_json", "not valid JSON"),
        ({"response_format": {"type": "json_object"}, "guided_choice": ["a"]}, "guided_choice", "at most one constraint"),
    ],
)
def test_peer_constraint_fields_refused_by_name(client: httpx.Client, extra: dict[str, Any], param: str, words: str) -> None:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "x"}], "max_tokens": 4, **extra}
    err = _error(client.post("/v1/chat/completions", json=body), 400)
    assert err["param"] == param and words in err["message"]


@pytest.mark.parametrize(
    "extra,words",
    [
        ({"min_p": 0.05}, "min_p"),
        ({"include_stop_str_in_output": True}, "include_stop_str_in_output"),
        ({"chat_template_kwargs": {"add_generation_prompt": False}}, "chat_template_kwargs"),
    ],
)
def test_peer_sampling_fields_without_a_meaning_here_are_named(client: httpx.Client, extra: dict[str, Any], words: str) -> None:
    """Accepted at their neutral value; any other value is a 400 naming the field, not "extra inputs"."""
    body = {"model": "tiny", "messages": [{"role": "user", "content": "x"}], "max_tokens": 4, **extra}
    err = _error(client.post("/v1/chat/completions", json=body), 400)
    assert words in err["message"] and "Extra inputs" not in err["message"]
    neutral = {k: {"min_p": 0.0}.get(k) for k in extra}
    if all(v is not None for v in neutral.values()):
        assert client.post("/v1/chat/completions", json={**body, **neutral}).status_code == 200


def test_penalties_are_accepted_and_range_checked(client: httpx.Client) -> None:
    base = {"model": "tiny", "messages": [{"role": "user", "content": "x"}], "max_tokens": 4}
    for extra in ({"repetition_penalty": 1.2}, {"frequency_penalty": 0.5, "presence_penalty": -0.5}):
        assert client.post("/v1/chat/completions", json={**base, **extra}).status_code == 200
    err = _error(client.post("/v1/chat/completions", json={**base, "frequency_penalty": 2.5}), 400)
    assert "frequency_penalty" in err["message"]


def test_ignore_eos_and_min_tokens_run_to_their_length(client: httpx.Client) -> None:
    """vLLM's ``ignore_eos`` / ``min_tokens`` and SGLang's ``min_new_tokens`` on a free-text
    request; with a constraint they are a 400 naming the field (its grammar ends the output)."""
    base = {"model": "tiny", "prompt": "Once", "max_tokens": 12, "temperature": 0.0}
    for extra in ({"ignore_eos": True}, {"min_tokens": 12}, {"min_new_tokens": 12}):
        body = client.post("/v1/completions", json={**base, **extra}).json()
        assert body["choices"][0]["finish_reason"] == "length" and body["usage"]["completion_tokens"] == 12, body
    err = _error(client.post("/v1/completions", json={**base, "ignore_eos": True, "guided_regex": "a+"}), 400)
    assert err["param"] == "ignore_eos" and "constraint" in err["message"]


@pytest.mark.parametrize("field", ["response_format", "structured_outputs"])
def test_json_object_allows_any_object_not_only_the_empty_one(field: str, gpt2_vocab: Any) -> None:
    """``json_object`` means any JSON object: the compiled constraint accepts objects with keys
    (the compiler narrows a bare ``{"type": "object"}`` to ``{}``, so the route must not send that)."""
    from structgen.fsm import GrammarCompiler

    from structgen.server.constraints import request_constraint
    from structgen.server.protocol import ChatCompletionRequest

    extra: dict[str, Any] = {"structured_outputs": {"json_object": True}}
    if field == "response_format":
        extra = {"response_format": {"type": "json_object"}}
    body = ChatCompletionRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "hi"}], **extra})
    constraint, name = request_constraint(body)
    assert constraint is not None and name == field
    dfa = GrammarCompiler(gpt2_vocab, CompilerConfig(cache_size=0)).compile(constraint).dfa
    assert dfa.accepts(b'{"name": "Ana", "age": 34, "tags": ["a"]}') and dfa.accepts(b"{}")
    assert not dfa.accepts(b"[1]") and not dfa.accepts(b'"x"')
