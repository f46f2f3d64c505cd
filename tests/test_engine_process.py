"""The server's engine process (HTTP front end and engine in separate processes, ZMQ between
them): what crosses the boundary, and what happens when either side dies or shuts down."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pickle
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from structgen.fsm import CompilerConfig
from structgen.fsm.errors import GrammarCompileError, GrammarTimeoutError
from structgen.schemas import RegexError, SchemaError, UnsupportedSchemaError

from structgen.engine.engine import Engine, EngineConfig
from structgen.engine.request import RequestError, SamplingParams
from structgen.runtime.memory import MemoryConfig

pytest.importorskip("fastapi")
pytest.importorskip("zmq")
from structgen.server import EngineDeadError, ServerConfig, ServerThread, create_app
from structgen.server.engine_main import picklable_error

LONG = {"prompt": "Count: ", "regex": "([0-9] ){200}", "max_tokens": 480, "temperature": 0.0}
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}}, "required": ["name"]}


def _config(model: str, **kw: Any) -> ServerConfig:
    engine = EngineConfig(memory=MemoryConfig(max_total_tokens=16384, max_context=512), compiler=CompilerConfig(workers=1))
    kw.setdefault("shutdown_grace_s", 5)
    return ServerConfig(model=model, served_model_name="tiny", engine=engine, **kw)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_in_flight(url: str, n: int) -> None:
    for _ in range(1000):
        if httpx.get(url + "/health", timeout=5).json()["in_flight"] >= n:
            return
        time.sleep(0.01)
    raise AssertionError(f"fewer than {n} requests in flight")


@pytest.fixture
def server(tiny_llama_dir: str) -> Iterator[ServerThread]:
    st = ServerThread(create_app(_config(tiny_llama_dir))).start()
    yield st
    st.stop()


@pytest.mark.parametrize(
    "exc",
    [
        RequestError("max_tokens: too many", param="max_tokens", code="context_length_exceeded"),
        SchemaError("must be an integer", keyword="minLength", pointer="#/properties/a"),
        UnsupportedSchemaError("cannot be enforced", keyword="uniqueItems", pointer="#"),
        RegexError("unbalanced parenthesis", pattern="(a", position=2),
        GrammarCompileError("the DFA exceeds max_states=10"),
        GrammarTimeoutError("compile took longer than 1 s"),
    ],
)
def test_request_errors_cross_the_process_boundary_whole(exc: Exception) -> None:
    """The errors the routes map to 400 / 422 keep their type, message and fields."""
    back = pickle.loads(pickle.dumps(picklable_error(exc), protocol=5))
    assert type(back) is type(exc) and str(back) == str(exc) and vars(back) == vars(exc)


def test_an_error_that_cannot_be_pickled_becomes_a_named_runtime_error() -> None:
    class Local(Exception):  # a class pickle cannot find by name
        pass

    back = picklable_error(Local("boom"))
    assert isinstance(back, RuntimeError) and str(back) == "Local: boom"


def test_the_engine_runs_in_its_own_process_and_health_reports_it(server: ServerThread) -> None:
    svc = server.app.state.service
    pid = svc.client.info.pid
    assert pid != os.getpid() and _alive(pid)
    assert f"engine in process {pid}" in svc.summary()
    body = httpx.get(server.url + "/health").json()
    assert body["status"] == "ok" and body["engine"]["alive"] and body["engine"]["pid"] == pid
    r = httpx.post(server.url + "/v1/structured", json={"prompt": "x", "json_schema": PERSON, "max_tokens": 40}, timeout=60)
    assert r.status_code == 200 and set(r.json()["output"]) == {"name"}
    t = r.json()["timings"]
    assert t["compile_ms"] > 0  # the engine process's wait for the grammar
    # TTFT runs from the front end's arrival to its first chunk: it holds the engine's queue
    assert 0 < t["queue_ms"] <= t["ttft_ms"] <= t["total_ms"]


def test_a_schema_error_on_a_stream_is_an_error_response_not_a_stream(server: ServerThread) -> None:
    body = {"prompt": "x", "json_schema": {"type": "array", "uniqueItems": True}, "stream": True}
    r = httpx.post(server.url + "/v1/structured", json=body, timeout=60)
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/json"), r.text
    assert r.json()["error"]["param"] == "json_schema"


def test_engine_death_fails_requests_in_flight_with_503_and_health_turns_503(server: ServerThread) -> None:
    url = server.url
    results: dict[str, Any] = {}

    def plain() -> None:
        results["plain"] = httpx.post(url + "/v1/structured", json=LONG, timeout=60)

    def streamed() -> None:
        with httpx.stream("POST", url + "/v1/structured", json={**LONG, "stream": True}, timeout=60) as s:
            results["stream_status"] = s.status_code
            results["events"] = [json.loads(line[6:]) for line in s.iter_lines() if line.startswith("data: {")]

    threads = [threading.Thread(target=plain), threading.Thread(target=streamed)]
    for t in threads:
        t.start()
    _wait_in_flight(url, 2)
    time.sleep(0.3)  # both are running in the engine
    pid = server.app.state.service.client.info.pid
    os.kill(pid, signal.SIGKILL)
    for t in threads:
        t.join(60)
    plain_resp = results["plain"]
    assert plain_resp.status_code == 503 and plain_resp.json()["error"]["code"] == "unavailable", plain_resp.text
    assert "exited with code -9" in plain_resp.json()["error"]["message"]
    assert results["stream_status"] == 200  # it was streaming already: the error is its last event
    assert results["events"][-1]["error"]["code"] == "unavailable"
    health = httpx.get(url + "/health")
    assert health.status_code == 503 and health.json()["engine"]["alive"] is False
    again = httpx.post(url + "/v1/structured", json={"prompt": "x", "regex": "[a-z]{3}"}, timeout=10)
    assert again.status_code == 503 and again.json()["error"]["code"] == "unavailable"


def test_shutdown_aborts_what_is_left_after_the_grace_period(tiny_llama_dir: str) -> None:
    """With no grace, shutdown does not wait for a long stream: it is cut, the engine process
    aborts it and exits 0, and the client can submit nothing more."""
    st = ServerThread(create_app(_config(tiny_llama_dir, shutdown_grace_s=0))).start()
    client = st.app.state.service.client

    def stream() -> None:
        body = {**LONG, "stream": True}
        with contextlib.suppress(httpx.HTTPError), httpx.stream("POST", st.url + "/v1/structured", json=body, timeout=60) as s:
            for _ in s.iter_lines():
                pass

    t = threading.Thread(target=stream)
    t.start()
    _wait_in_flight(st.url, 1)
    time.sleep(0.3)
    t0 = time.monotonic()
    st.stop()
    t.join(60)
    assert time.monotonic() - t0 < 20 and not t.is_alive()
    assert not client.process.is_alive() and client.process.exitcode == 0
    assert not client.alive
    with pytest.raises(EngineDeadError):
        asyncio.run(client.submit([1, 2], SamplingParams(max_tokens=2), None))


def test_the_engine_process_exits_when_its_front_end_dies(tiny_llama_dir: str, tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os
        from structgen.server import EngineProcess, ServerConfig
        p = EngineProcess(ServerConfig(model={tiny_llama_dir!r}), {tiny_llama_dir!r})
        print(p.info.pid, flush=True)
        os._exit(0)  # no shutdown: the front end vanishes
        """
    )
    out = subprocess.run([sys.executable, "-P", "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    pid = int(out.stdout.split()[-1])
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "the orphaned engine process is still running"


def test_a_front_end_that_exits_without_shutdown_stops_its_engine_process(tiny_llama_dir: str) -> None:
    script = textwrap.dedent(
        f"""
        from structgen.server import EngineProcess, ServerConfig
        p = EngineProcess(ServerConfig(model={tiny_llama_dir!r}), {tiny_llama_dir!r})
        print(p.info.pid, flush=True)
        """  # the interpreter exits normally, shutdown never called
    )
    out = subprocess.run([sys.executable, "-P", "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert not _alive(int(out.stdout.split()[-1]))


def test_a_bad_model_folder_fails_in_create_app_with_the_engine_processs_error(tmp_path: Path) -> None:
    from structgen.models import ModelLoadError

    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match=r"config\.json"):
        create_app(_config(str(tmp_path)))


def test_an_engine_the_caller_built_is_served_on_a_thread(tiny_llama_dir: str) -> None:
    with Engine(tiny_llama_dir, _config(tiny_llama_dir).engine) as engine:
        with ServerThread(create_app(ServerConfig(served_model_name="tiny"), engine=engine)) as st:
            assert "engine in this process" in st.app.state.service.summary()
            r = httpx.post(st.url + "/v1/structured", json={"prompt": "x", "json_schema": PERSON, "max_tokens": 40}, timeout=60)
            assert r.status_code == 200 and set(r.json()["output"]) == {"name"}
            bad = httpx.post(st.url + "/v1/structured", json={"prompt": "x", "regex": "[a-z]", "ignore_eos": True}, timeout=60)
            assert bad.status_code == 400 and bad.json()["error"]["param"] == "ignore_eos", bad.text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_exits_non_zero_when_its_engine_process_dies(tiny_llama_dir: str, tmp_path: Path) -> None:
    port = _free_port()
    serve = ["serve", "--model", tiny_llama_dir, "--port", str(port), "--max-total-tokens", "8192"]
    cmd = [sys.executable, "-P", "-m", "structgen.cli", *serve]
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=out, stderr=subprocess.STDOUT)
    try:
        pid = None
        for _ in range(1200):
            m = re.search(r"engine in process (\d+)", log.read_text())
            if m:
                pid = int(m.group(1))
                break
            assert proc.poll() is None, log.read_text()
            time.sleep(0.1)
        assert pid is not None, log.read_text()
        os.kill(pid, signal.SIGKILL)
        assert proc.wait(60) == 1, log.read_text()
        assert re.search(r"engine process exited with code -9.*the server stopped", log.read_text()), log.read_text()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()


def test_sse_events_stay_one_line_for_readers_that_split_on_unicode_line_breaks() -> None:
    """httpx's ``iter_lines`` (like ``str.splitlines``) ends a line at U+0085 / U+2028 / U+2029,
    which JSON leaves raw inside strings; the server escapes them."""
    from structgen.server.service import _sse

    text = "a\u2028b\x85c\u2029d\x0be"
    event = _sse({"delta": text})
    assert len(event.rstrip("\n").splitlines()) == 1
    assert json.loads(event.removeprefix("data: "))["delta"] == text
