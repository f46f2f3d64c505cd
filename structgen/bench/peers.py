"""``structgen bench peers``: one load generator, the same structured workloads, run over HTTP
against structgen and its peers (vLLM, SGLang) serving the same weights.

Each endpoint is ``LABEL=FLAVOR@URL``; the flavor says how a constrained completion is asked
for (every request streams, greedy, the same ``max_tokens``):

- ``structgen``: ``POST /v1/structured`` with ``json_schema`` / ``regex``;
- ``vllm``: ``POST /v1/completions`` with ``structured_outputs: {json | regex}`` (vLLM ≥ 0.12);
- ``sglang``: ``POST /v1/completions`` with SGLang's ``json_schema`` (text) / ``regex`` extras.

Per (endpoint, workload, concurrency): req/s, output tok/s (the server's own completion-token
counts), TTFT (first streamed text) and TPOT ((last − first) / (tokens − 1)) p50 / p99, the
share of outputs that validate (``jsonschema`` / ``re.fullmatch``), ``max_tokens`` cuts and
failed requests, and the GPU's peak memory in use while the level ran (``nvidia-smi``, when the
load generator runs on the server's machine).  Every object schema is made unique per request
(:func:`distinct_schemas`), so every schema is new to the server when it arrives (cold), for
every engine alike; with ``warm`` each level's requests are first sent once, untimed, so every
engine has compiled (and, where it caches them, masked) each schema before the clock starts.  Threads and
``http.client`` (standard library) drive the load: no client package is needed on the GPU box.
"""

from __future__ import annotations

import http.client
import json
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from structgen.bench.common import percentile
from structgen.bench.workloads import BenchRequest, build_workload, distinct_schemas

FLAVORS = ("structgen", "vllm", "sglang")


@dataclass(frozen=True)
class Endpoint:
    """A running server: ``label`` (e.g. ``vllm-xgrammar``), ``flavor`` (one of ``FLAVORS``),
    ``url`` (``http://host:port``), ``model`` (the name sent in OpenAI requests)."""

    label: str
    flavor: str
    url: str
    model: str = "default"

    def __post_init__(self) -> None:
        if self.flavor not in FLAVORS:
            raise ValueError(f"endpoint {self.label!r}: flavor must be one of {', '.join(FLAVORS)}, not {self.flavor!r}")
        parts = urlsplit(self.url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"endpoint {self.label!r}: url must be http://host:port, got {self.url!r}")

    @staticmethod
    def parse(spec: str, model: str = "default") -> Endpoint:
        """``LABEL=FLAVOR@URL``.  Raises ``ValueError`` naming what is malformed."""
        label, sep, rest = spec.partition("=")
        flavor, sep2, url = rest.partition("@")
        if not sep or not sep2 or not label:
            raise ValueError(f"endpoint {spec!r}: expected LABEL=FLAVOR@URL, e.g. vllm-xgrammar=vllm@http://127.0.0.1:8000")
        return Endpoint(label, flavor, url, model)


class Outcome(NamedTuple):
    """One request: seconds to the first text (``ttft``), to the end (``latency``), completion
    tokens, finish reason, the text, and an error (None when it succeeded)."""

    ttft: float
    latency: float
    tokens: int
    finish: str
    text: str
    error: str | None


def request_body(endpoint: Endpoint, req: BenchRequest) -> tuple[str, dict[str, Any]]:
    """(path, JSON body) of ``req`` in ``endpoint``'s flavor."""
    c = req.constraint
    if endpoint.flavor == "structgen":
        body: dict[str, Any] = {"prompt": req.prompt, "max_tokens": req.max_tokens, "temperature": 0.0, "stream": True}
        body["json_schema" if c.kind == "json_schema" else "regex"] = json.loads(c.text) if c.kind == "json_schema" else c.text
        return "/v1/structured", body
    body = {
        "model": endpoint.model,
        "prompt": req.prompt,
        "max_tokens": req.max_tokens,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if endpoint.flavor == "vllm":
        body["structured_outputs"] = {"json": json.loads(c.text)} if c.kind == "json_schema" else {"regex": c.text}
    elif c.kind == "json_schema":
        body["json_schema"] = c.text
    else:
        body["regex"] = c.text
    return "/v1/completions", body


def _events(resp: http.client.HTTPResponse) -> Any:
    """The JSON payloads of a server-sent event stream (until ``[DONE]``)."""
    for raw in resp:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            return
        yield json.loads(data)


def send(endpoint: Endpoint, req: BenchRequest, timeout_s: float = 600.0) -> Outcome:
    """Send ``req`` and read its stream to the end."""
    path, body = request_body(endpoint, req)
    parts = urlsplit(endpoint.url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout_s)
    t0 = time.perf_counter()
    ttft = 0.0
    text: list[str] = []
    tokens, finish = 0, ""
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return Outcome(0.0, time.perf_counter() - t0, 0, "", "", f"HTTP {resp.status}: {resp.read()[:200]!r}")
        for ev in _events(resp):
            if "error" in ev:
                return Outcome(ttft, time.perf_counter() - t0, tokens, "", "".join(text), str(ev["error"])[:200])
            piece, done = _piece(endpoint.flavor, ev)
            if piece and not ttft:
                ttft = time.perf_counter() - t0
            if piece:
                text.append(piece)
            if done is not None:
                tokens, finish = done[0] or tokens, done[1] or finish
    except (OSError, http.client.HTTPException, ValueError) as e:
        return Outcome(ttft, time.perf_counter() - t0, tokens, finish, "".join(text), f"{type(e).__name__}: {e}")
    finally:
        conn.close()
    return Outcome(ttft, time.perf_counter() - t0, tokens, finish, "".join(text), None)


def _piece(flavor: str, ev: dict[str, Any]) -> tuple[str, tuple[int, str] | None]:
    """(new text, (completion tokens, finish reason) when the event carries them)."""
    if flavor == "structgen":
        if ev.get("object") == "structured.final":
            return "", (int(ev["usage"]["completion_tokens"]), str(ev.get("finish_reason") or ""))
        return str(ev.get("delta") or ""), None
    piece = ""
    finish = ""
    for ch in ev.get("choices") or []:
        piece += ch.get("text") or ""
        finish = ch.get("finish_reason") or finish
    usage = ev.get("usage")
    done = (int(usage["completion_tokens"]) if usage else 0, finish) if usage or finish else None
    return piece, done


def is_valid(req: BenchRequest, text: str) -> bool:
    """Whether ``text`` meets the request's constraint (``jsonschema`` / ``re.fullmatch``)."""
    import jsonschema

    if req.constraint.kind == "regex":
        return re.fullmatch(req.constraint.text, text) is not None
    try:
        value = json.loads(text)
    except ValueError:
        return False
    schema = json.loads(req.constraint.text)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return bool(cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(value))


class GpuMemorySampler:
    """Peak GPU memory in use (MiB, summed over the machine's GPUs) while the ``with`` block
    runs, sampled from ``nvidia-smi`` every ``interval_s`` seconds on a thread; ``peak_mib`` is
    None without ``nvidia-smi`` (a CPU machine, or a server elsewhere)."""

    def __init__(self, interval_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self.peak_mib: int | None = None
        self._smi = shutil.which("nvidia-smi")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> int | None:
        """MiB in use now over all GPUs, or None when ``nvidia-smi`` is absent or fails."""
        if self._smi is None:
            return None
        try:
            out = subprocess.run(
                [self._smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10
            ).stdout
            return sum(int(x) for x in out.split())
        except (OSError, ValueError, subprocess.SubprocessError):
            return None

    def _loop(self) -> None:
        while True:
            got = self.sample()
            if got is not None:
                self.peak_mib = max(self.peak_mib or 0, got)
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> GpuMemorySampler:
        if self._smi is not None:
            self._thread = threading.Thread(target=self._loop, name="gpu-memory", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def run_load(endpoint: Endpoint, reqs: Sequence[BenchRequest], concurrency: int) -> dict[str, Any]:
    """All of ``reqs`` against ``endpoint`` with at most ``concurrency`` in flight; the row."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    lock = threading.Lock()
    outcomes: list[tuple[BenchRequest, Outcome]] = []

    def one(r: BenchRequest) -> None:
        o = send(endpoint, r)
        with lock:
            outcomes.append((r, o))

    t0 = time.perf_counter()
    with GpuMemorySampler() as gpu, ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, reqs))
    wall = time.perf_counter() - t0
    ok = [(r, o) for r, o in outcomes if o.error is None]
    tokens = sum(o.tokens for _r, o in ok)
    ttft = [o.ttft * 1000 for _r, o in ok if o.ttft]
    tpot = [(o.latency - o.ttft) * 1000 / (o.tokens - 1) for _r, o in ok if o.ttft and o.tokens > 1]
    errors = [o.error for _r, o in outcomes if o.error is not None]
    invalid = [o for r, o in ok if not is_valid(r, o.text)]  # answered, but the output does not meet the constraint
    return {
        "endpoint": endpoint.label,
        "flavor": endpoint.flavor,
        "concurrency": concurrency,
        "requests": len(reqs),
        "failed": len(errors),
        "first_error": errors[0] if errors else None,
        "wall_s": round(wall, 3),
        "req_per_s": round(len(ok) / wall, 2) if wall else 0.0,
        "out_tok_per_s": round(tokens / wall, 1) if wall else 0.0,
        "mean_out_tokens": round(tokens / len(ok), 1) if ok else 0.0,
        "ttft_ms": {"p50": percentile(ttft, 0.5), "p99": percentile(ttft, 0.99)},
        "tpot_ms": {"p50": percentile(tpot, 0.5), "p99": percentile(tpot, 0.99)},
        "valid": round((len(ok) - len(invalid)) / len(reqs), 4) if reqs else 0.0,
        "invalid": len(invalid),
        "invalid_cut": sum(o.finish == "length" for o in invalid),
        "max_tokens_cuts": sum(o.finish == "length" for _r, o in ok),
        "peak_gpu_mib": gpu.peak_mib,
    }


def wait_ready(endpoint: Endpoint, timeout_s: float = 900.0) -> float:
    """Poll ``GET /health`` until it answers 200 (a server starting: weights, JIT, CUDA graphs);
    the seconds it took.  Raises ``TimeoutError``."""
    parts = urlsplit(endpoint.url)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        try:
            conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return time.perf_counter() - t0
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(1.0)
    raise TimeoutError(f"{endpoint.label} at {endpoint.url} was not ready after {timeout_s:.0f} s")


def race(
    endpoint: Endpoint,
    workloads: Sequence[str],
    concurrency: Sequence[int],
    num_requests: int,
    seed: int = 0,
    maskbench_dir: str | None = None,
    warmup: int = 4,
    warm: bool = False,
) -> list[dict[str, Any]]:
    """Every (workload, concurrency) against ``endpoint``: the same requests for every engine
    run with the same arguments; a level's requests are drawn with ``seed + level index`` (new
    schemas per level).  ``warmup`` requests of a regex no workload uses go first (kernel JIT,
    CUDA graphs), untimed.  With ``warm``, each level's requests are sent once untimed (same
    prompts, same concurrency) before the timed pass, so the timed pass sees schemas the server
    has served before (rows get ``"grammars": "warm"``, else ``"cold"``)."""
    if warmup:
        kernels = [
            r._replace(constraint=type(r.constraint).regex("[a-z ]{1,24}"), max_tokens=16)
            for r in build_workload("character", warmup, seed)
        ]
        run_load(endpoint, kernels, min(warmup, 4))
    rows = []
    for w in workloads:
        for i, c in enumerate(concurrency):
            reqs = distinct_schemas(build_workload(w, num_requests, seed + i, maskbench_dir=maskbench_dir), f"{seed + i}")
            if not reqs:
                continue
            if warm:
                run_load(endpoint, reqs, c)
            row = {"workload": w, "grammars": "warm" if warm else "cold", **run_load(endpoint, reqs, c)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows
