"""Where ``structgen serve``'s time goes on the peer race's requests: the race's own load
(:func:`structgen.bench.peers.race`'s requests, same seeds, every schema new to the server)
against a ``structgen serve`` it starts, with py-spy recording every process of the server
during each level.

Per (workload, concurrency): the race's metrics, then one table per role: the front end (HTTP,
validation, tokenization), the engine process (sampled with idle frames, so what its loop
waits on shows: the GPU, the row workers, the compile processes), the compile processes and
the row workers (each role's processes merged; *busy* = the role's samples over what its
processes could give in the level's wall time, i.e. its mean CPU use per process).

    python benchmarks/peer_profile.py --model CHECKPOINT --workload extraction --concurrency 64 256 \\
        --num-requests 256 --out OUT
needs ``py-spy`` on PATH (``pip install py-spy``) and permission to attach (root, or
``ptrace_scope`` 0).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from _pyspy import RATE, PySpy, descendants, proc_stat, summarize

from structgen.bench.common import run_meta
from structgen.bench.peers import Endpoint, race, run_load, wait_ready
from structgen.bench.workloads import build_workload, distinct_schemas

ENGINE_LOOP = "EngineLoop.run"  # the frame of the engine process's stepping thread
ROLES = (  # (role, files only its processes run), first match wins
    ("row workers", ("row_workers.py", "_worker_main")),
    ("compile processes", ("compile_process.py",)),
)


def role_of(raw: str) -> str:
    """The role of a worker process from its collapsed stacks ("other" when none matches)."""
    for role, marks in ROLES:
        if all(m in raw for m in marks):
            return role
    return "other"


def engine_pid(front: int) -> int:
    """The engine process: the front end's child with the most descendants (its compile and row
    workers), the resource tracker left out; the front end itself when the engine runs on a thread."""
    children = [p for p in descendants(front) if _parent(p) == front and b"resource_tracker" not in _cmdline(p)]
    return max(children, key=lambda p: len(descendants(p)), default=front)


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _parent(pid: int) -> int:
    fields = proc_stat(pid)
    return int(fields[1]) if fields else -1


def profile_level(front: int, endpoint: Endpoint, reqs: list[Any], conc: int) -> tuple[dict[str, Any], list[str]]:
    """One level under py-spy: the race row and the markdown of every role's profile."""
    engine = engine_pid(front)
    workers = [p for p in descendants(engine) if p != engine]
    spy, spy_engine = PySpy(), PySpy()
    spy.start({"front end": front, **{str(p): p for p in workers}})
    spy_engine.start({"engine process": engine}, idle=True)
    try:
        row = run_load(endpoint, reqs, conc)
    finally:
        raws = spy.stop_raw() + spy_engine.stop_raw()
    merged: dict[str, list[str]] = {}
    for label, raw in raws:
        role = label if label in ("front end", "engine process") else role_of(raw)
        if raw or role in ("front end", "engine process"):
            merged.setdefault(role, []).append(raw)
    md = []
    for role in ("front end", "engine process", "compile processes", "row workers", "other"):
        if role not in merged:
            continue
        texts = merged[role]
        p = summarize("\n".join(texts), role, top=16, keep=ENGINE_LOOP if role == "engine process" else None)
        cap = RATE * row["wall_s"] * len(texts)
        busy = "" if role == "engine process" else f", busy {100 * p.samples / cap:.0f}%" if cap else ""
        idle = f" of its loop thread (`{ENGINE_LOOP}`), idle frames included" if role == "engine process" else ""
        md += [f"#### {role}: {len(texts)} process{'es' if len(texts) > 1 else ''}, {p.samples} samples{busy}{idle}", ""]
        md += ["| self | share | inclusive | share |", "|---|---|---|---|"]
        for i in range(max(len(p.top_self), len(p.top_inclusive))):
            s = p.top_self[i] if i < len(p.top_self) else ("", 0.0)
            c = p.top_inclusive[i] if i < len(p.top_inclusive) else ("", 0.0)
            md.append(f"| `{s[0]}` | {100 * s[1]:.1f}% | `{c[0]}` | {100 * c[1]:.1f}% |")
        md.append("")
    return row, md


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="the checkpoint folder the race serves")
    ap.add_argument("--workload", default="extraction")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--num-requests", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0, help="the race's seed (level i draws with seed + i, as the race does)")
    ap.add_argument("--level-offset", type=int, default=0, help="index of the first --concurrency in the race's own list")
    ap.add_argument("--maskbench-dir", default=None)
    ap.add_argument("--serve-args", default="", help="extra `structgen serve` flags")
    ap.add_argument("--port", type=int, default=8100)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.num_requests < 1 or min(args.concurrency) < 1 or args.level_offset < 0:
        ap.error("--num-requests and every --concurrency must be ≥ 1, --level-offset ≥ 0")
    if not PySpy().available:
        ap.error("py-spy is not on PATH (pip install py-spy)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "structgen", "serve", "--model", args.model, "--port", str(args.port), "--log-level", "warning"]
    cmd += shlex.split(args.serve_args)
    log = open(out / "peer-profile-server.log", "w")
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    endpoint = Endpoint("structgen", "structgen", f"http://127.0.0.1:{args.port}")
    meta = run_meta()
    md = ["# Where structgen serve's time goes on the peer race's requests", "", f"- command: `{meta['command']}`",
          f"- machine: {meta['machine']}; commit {meta['commit']}, {meta['date']}", ""]  # fmt: skip
    rows = []
    try:
        wait_ready(endpoint, 900)
        race(endpoint, [], [], 1, warmup=4)  # kernels and CUDA graphs, untimed
        for w in args.workload.split(","):
            for k, conc in enumerate(args.concurrency):
                i = args.level_offset + k
                reqs = distinct_schemas(
                    build_workload(w, args.num_requests, args.seed + i, maskbench_dir=args.maskbench_dir), f"{args.seed + i}"
                )
                row, prof = profile_level(server.pid, endpoint, reqs, conc)
                rows.append({"workload": w, **row})
                print(json.dumps(rows[-1]), flush=True)
                md += [f"## {w}, concurrency {conc}, {len(reqs)} requests", ""]
                md += [f"{row['req_per_s']:.2f} req/s, {row['out_tok_per_s']:.0f} out tok/s, TTFT p50 / p99 {row['ttft_ms']['p50']:.1f} / "
                       f"{row['ttft_ms']['p99']:.1f} ms, TPOT p50 / p99 {row['tpot_ms']['p50']:.1f} / {row['tpot_ms']['p99']:.1f} ms, "
                       f"valid {100 * row['valid']:.1f}%, {row['failed']} failed (under py-spy at {RATE} samples/s per process).", ""]  # fmt: skip
                md += prof
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(120)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
    (out / "peer-profile.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    (out / "peer-profile.md").write_text("\n".join(md) + "\n")
    print(f"profile in {os.fspath(out / 'peer-profile.md')}")


if __name__ == "__main__":
    main()
