"""``structgen bench peers``: endpoint parsing, each flavor's request, and the load generator's
stream reading and metrics against a stand-in OpenAI completions server (the real peers run on
the GPU box)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from structgen.fsm import Constraint

from structgen.bench.peers import Endpoint, request_body, run_load
from structgen.bench.peers_report import append_run
from structgen.bench.workloads import BenchRequest


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("vllm@http://h:1", "LABEL=FLAVOR@URL"),
        ("a=tgi@http://h:1", "flavor must be one of"),
        ("a=vllm@ftp://h:1", "url must be http://host:port"),
    ],
)
def test_bad_endpoints_are_named(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Endpoint.parse(spec)


def test_each_flavor_asks_for_the_constraint_its_own_way() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    req = BenchRequest("p", Constraint.json_schema(schema), 50)
    path, body = request_body(Endpoint("s", "structgen", "http://h:1"), req)
    assert path == "/v1/structured" and body["json_schema"] == schema and body["stream"] and body["temperature"] == 0.0
    path, body = request_body(Endpoint("v", "vllm", "http://h:1", "m"), req)
    assert path == "/v1/completions" and body["structured_outputs"] == {"json": schema} and body["model"] == "m"
    _, body = request_body(Endpoint("g", "sglang", "http://h:1"), BenchRequest("p", Constraint.regex("[ab]+"), 9))
    assert body["regex"] == "[ab]+" and body["max_tokens"] == 9


class _FakeCompletions(BaseHTTPRequestHandler):
    """Streams "ab" then "ba" as an OpenAI completion with usage; "fail" prompts get a 400."""

    posts = 0  # requests served (all threads)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).posts += 1
        finish = "length" if body["prompt"] == "cut" else "stop"  # "cut" prompts end at max_tokens
        if body["prompt"] == "fail":
            self.send_response(400)
            self.end_headers()
            self.wfile.write(b'{"error": "bad"}')
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for ev in (
            {"choices": [{"text": "ab", "finish_reason": None}]},
            {"choices": [{"text": "ba", "finish_reason": finish}]},
            {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}},
        ):
            self.wfile.write(f"data: {json.dumps(ev)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeCompletions)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_load_generator_reads_streams_and_scores_outputs(fake_server: str, tmp_path: Path) -> None:
    ep = Endpoint("fake-vllm", "vllm", fake_server)
    reqs = [BenchRequest("p", Constraint.regex("(ab|ba)+"), 8)] * 5 + [BenchRequest("p", Constraint.regex("a"), 8)]
    reqs += [BenchRequest("fail", Constraint.regex("a"), 8), BenchRequest("cut", Constraint.regex("a"), 8)]
    row = run_load(ep, reqs, 3)
    assert row["requests"] == 8 and row["failed"] == 1 and "HTTP 400" in row["first_error"]
    assert row["mean_out_tokens"] == 2.0 and row["max_tokens_cuts"] == 1
    assert row["valid"] == pytest.approx(5 / 8, abs=1e-3)  # "abba" matches (ab|ba)+, not "a"; the failure counts as invalid
    assert row["invalid"] == 2 and row["invalid_cut"] == 1  # answered but not matching "a": one stopped, one cut
    assert row["ttft_ms"]["p50"] > 0 and row["tpot_ms"]["p50"] >= 0
    doc = append_run(str(tmp_path), {"label": "fake-vllm", "flavor": "vllm", "url": fake_server, "engine": "stand-in"}, [
        {"workload": "character", **row}
    ], "structgen bench peers")  # fmt: skip
    assert len(doc["runs"]) == 1
    md = (tmp_path / "peers.md").read_text()
    assert "| 3 | fake-vllm |" in md and "62.5% | 2 (1) | 1 |" in md


def test_every_object_schema_is_made_unique() -> None:
    """The extraction workload draws from a few dozen schema shapes; the race makes each
    request's schema distinct so that every one is cold on arrival, for every engine."""
    from structgen.bench.workloads import build_workload, distinct_schemas

    reqs = build_workload("extraction", 64, 0)
    assert len({r.constraint.text for r in reqs}) < 64
    unique = distinct_schemas(reqs, "7")
    assert len({r.constraint.text for r in unique}) == 64
    first = json.loads(unique[0].constraint.text)
    assert first["properties"]["ref_7_0"] == {"type": "string", "maxLength": 12}
    regex = BenchRequest("p", Constraint.regex("a+"), 4)
    assert distinct_schemas([regex], "0") == [regex]


def test_warm_grammars_send_each_level_twice_and_keep_their_own_table(fake_server: str, tmp_path: Path) -> None:
    """--warm-grammars: every level's requests go once untimed, then timed; the rows say so and
    the report keeps them apart from the cold rows of the same workload and level."""
    from structgen.bench.peers import race

    ep = Endpoint("fake-vllm", "vllm", fake_server)
    before = _FakeCompletions.posts
    cold = race(ep, ["character"], [2], 3, warmup=1)
    assert _FakeCompletions.posts - before == 1 + 3 and cold[0]["grammars"] == "cold"
    before = _FakeCompletions.posts
    warm = race(ep, ["character"], [2], 3, warmup=0, warm=True)
    assert _FakeCompletions.posts - before == 6 and warm[0]["grammars"] == "warm"
    meta = {"label": "fake-vllm", "flavor": "vllm", "url": fake_server, "engine": "stand-in"}
    append_run(str(tmp_path), meta, cold, "cold")
    doc = append_run(str(tmp_path), meta, warm, "warm")
    assert len(doc["runs"][0]["rows"]) == 2
    md = (tmp_path / "peers.md").read_text()
    assert "## character\n" in md and "## character (warm grammars)" in md


def test_render_counts_valid_answers_per_second_and_rerenders_without_requests(tmp_path: Path) -> None:
    """The table's *valid answers/s* is valid × requests ÷ wall time (a failed or invalid answer
    adds nothing); ``bench peers --render`` rebuilds peers.md from peers.json alone."""
    from structgen.cli import main

    row = {
        "workload": "maskbench", "grammars": "cold", "concurrency": 4, "requests": 10, "failed": 1, "first_error": None,
        "wall_s": 2.0, "req_per_s": 4.5, "out_tok_per_s": 100.0, "mean_out_tokens": 20.0,
        "ttft_ms": {"p50": 10.0, "p99": 20.0}, "tpot_ms": {"p50": 1.0, "p99": 2.0}, "valid": 0.6, "invalid": 3,
        "invalid_cut": 2, "max_tokens_cuts": 2, "peak_gpu_mib": None,
    }  # fmt: skip
    append_run(str(tmp_path), {"label": "p", "flavor": "vllm", "url": "http://x", "engine": "e"}, [row], "c")
    (tmp_path / "peers.md").unlink()
    assert main(["bench", "peers", "--render", "--out", str(tmp_path)]) == 0
    md = (tmp_path / "peers.md").read_text()
    assert "| 4 | p | 4.50 | 3.00 | 100 |" in md  # 4.5 completed/s × 0.6 × 10 sent / 9 completed
    assert main(["bench", "peers", "--out", str(tmp_path)]) == 2  # no endpoint, no --render
    assert main(["bench", "peers", "--render", "--out", str(tmp_path / "absent")]) == 2  # no peers.json there
    assert not (tmp_path / "absent").exists()


def test_gpu_memory_sampler_reads_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Peak MiB summed over the GPUs that ``nvidia-smi`` lists; None where it is absent."""
    from structgen.bench.peers import GpuMemorySampler

    monkeypatch.setenv("PATH", str(tmp_path))
    with GpuMemorySampler(interval_s=0.01) as absent:
        pass
    assert absent.peak_mib is None
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 1000\necho 2500\n")
    smi.chmod(0o755)
    with GpuMemorySampler(interval_s=0.01) as gpu:
        time.sleep(0.05)
    assert gpu.peak_mib == 3500


def test_shared_prefix_prompts_need_the_demo_tokenizer_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A load generator's machine may lack the demo model's weights (the race carries only the
    peers' checkpoint): the ``shared-prefix`` prompts read the demo tokenizer alone."""
    from structgen import api
    from structgen.bench.workloads import build_workload
    from structgen.demo import values

    def missing() -> str:
        raise FileNotFoundError("no weights")

    monkeypatch.setattr(api, "default_model_path", missing)
    values._token_pieces.cache_clear()
    try:
        reqs = build_workload("shared-prefix", 2, 0)
    finally:
        values._token_pieces.cache_clear()
    assert len(reqs) == 2 and reqs[0].prompt[:200] == reqs[1].prompt[:200]


def test_a_missing_demo_tokenizer_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from structgen import api
    from structgen.demo import values

    monkeypatch.setattr(api, "demo_model_dir", lambda: str(tmp_path))
    values._token_pieces.cache_clear()
    try:
        with pytest.raises(FileNotFoundError, match="demo tokenizer is missing"):
            values._token_pieces()
    finally:
        values._token_pieces.cache_clear()
