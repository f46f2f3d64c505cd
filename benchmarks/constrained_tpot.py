"""Constrained vs unconstrained TPOT on the GPU (Llama-3-8B shapes, random bf16 weights, the
real Llama-3 tokenizer), at batch 1 and 64 on a JSON-schema workload.

Each request asks for one object of 12 required string fields (12–24 characters each), more
than ``max_tokens`` = 64 can hold: unconstrained requests decode 64 tokens (greedy), and
constrained ones end just under it (budget-aware completion closes the object).  Modes:
unconstrained; constrained with jump-forward off (every token sampled under the mask: the pure
cost of constraining); constrained with jump-forward on (forced tokens extended in bulk).  Each
mode first runs once unmeasured, so the grammar is compiled and its mask rows are resident (the
cold cost is what the conformance benchmark measures), then ``--repeats`` times, the modes interleaved.  TPOT of a request =
(latency − TTFT) / (completion tokens − 1), averaged over the requests of a run; the table gives
the median run, the range over runs, and the mean engine step time with its host-side
breakdown.

    python benchmarks/constrained_tpot.py --tokenizer .carry/llama3 [--batches 1,64] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict

import torch
from _gpu_common import HERE, ROOT, run_meta, write_results

from structgen import Constraint, Engine, EngineConfig, GenerateRequest, SamplingParams
from structgen.engine import SchedulerConfig
from structgen.engine.observer import StepObserver, StepPhases
from structgen.engine.scheduler import ScheduledBatch
from structgen.models import write_preset_folder
from structgen.runtime.memory import MemoryConfig

FIELDS = ["name", "company", "street", "city", "country", "email", "title", "department", "manager", "project", "team", "notes"]
SCHEMA = {
    "type": "object",
    "properties": {f: {"type": "string", "minLength": 12, "maxLength": 24} for f in FIELDS},
    "required": FIELDS,
    "additionalProperties": False,
}


class PhaseTimes(StepObserver):
    """Sums each engine step's phase seconds (host clock, no device sync: the overlap scheduler
    stays on)."""

    def __init__(self) -> None:
        self.acc: dict[str, float] = defaultdict(float)

    def on_step(self, batch: ScheduledBatch | None, forward_kind: str | None, phases: StepPhases) -> None:
        for name, seconds in phases._asdict().items():
            self.acc[name.removesuffix("_s")] += seconds


def run_mode(engine: Engine, batch: int, constrained: bool, jump_forward: bool, max_tokens: int, tag: str) -> dict[str, float]:
    constraint = Constraint.json_schema(SCHEMA) if constrained else None
    reqs = [
        GenerateRequest(
            f"Employee record {tag}-{i}: write the record as JSON with fields {', '.join(FIELDS)}.",
            SamplingParams(max_tokens=max_tokens, jump_forward=jump_forward),
            constraint,
        )
        for i in range(batch)
    ]
    rids = [engine.submit(r) for r in reqs]
    counts_before = engine.runner.forward_counts.copy()
    steps: list[float] = []
    while engine.has_unfinished():
        t = time.perf_counter()
        engine.step()
        steps.append(time.perf_counter() - t)
    ran = engine.runner.forward_counts - counts_before
    outs = [engine.output(r) for r in rids]
    for r in rids:
        engine.forget(r)
    tpots = [(o.usage.latency_s - o.usage.ttft_s) / (o.usage.completion_tokens - 1) for o in outs if o.usage.completion_tokens > 1]
    return {
        "tpot_ms": 1e3 * statistics.mean(tpots),
        "tokens": statistics.mean(o.usage.completion_tokens for o in outs),
        "forced": statistics.mean(o.usage.forced_tokens for o in outs),
        "finish_length": sum(o.finish_reason == "length" for o in outs) / len(outs),
        "step_ms": 1e3 * statistics.mean(steps[1:]) if len(steps) > 1 else float("nan"),
        "steps": len(steps),
        "graph_share": 1 - ran["eager"] / max(sum(ran.values()), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="llama3-8b")
    ap.add_argument("--tokenizer", default=str(ROOT / ".carry" / "llama3"))
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5, help="measured runs per mode, modes interleaved; TPOT is their median")
    ap.add_argument("--out", default=str(HERE / "results" / "decode"))
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error(f"--repeats must be >= 1, got {args.repeats}")
    batches = [int(b) for b in args.batches.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        write_preset_folder(args.config, tmp, tokenizer_dir=args.tokenizer)
        cfg = EngineConfig(
            device="cuda", dtype="bfloat16", random_weights_seed=0, cuda_graph_max_bs=max(batches),
            memory=MemoryConfig(max_total_tokens=max(batches) * 512, max_context=1024),
            scheduler=SchedulerConfig(max_running_requests=max(batches)),
        )  # fmt: skip
        engine = Engine(tmp, cfg)
    phases = PhaseTimes()
    engine.observe(phases)
    acc = phases.acc
    modes = [("unconstrained", False, False), ("constrained, jump-forward off", True, False), ("constrained, jump-forward on", True, True)]
    rows: list[list[object]] = []
    for b in batches:
        for _name, constrained, jf in modes:
            run_mode(engine, b, constrained, jf, args.max_tokens, "warm")
        runs: dict[str, list[tuple[dict[str, float], dict[str, float]]]] = defaultdict(list)
        for rep in range(args.repeats):  # modes interleaved, so drifts of the host hit all of them alike
            for name, constrained, jf in modes:
                acc.clear()
                torch.cuda.synchronize()
                r = run_mode(engine, b, constrained, jf, args.max_tokens, f"run{rep}")
                runs[name].append((r, {k: 1e3 * v / r["steps"] for k, v in acc.items()}))
        base = statistics.median(r["tpot_ms"] for r, _ in runs["unconstrained"])
        for name, _c, _j in modes:
            tp = [r["tpot_ms"] for r, _ in runs[name]]
            last = runs[name][-1][0]
            per_step = {k: statistics.mean(a.get(k, 0.0) for _, a in runs[name]) for k in ("schedule", "forward", "sample", "process")}
            rows.append([
                b, name, round(statistics.median(tp), 3), round(statistics.median(tp) / base, 3), f"{min(tp):.3f}–{max(tp):.3f}",
                round(last["tokens"], 1), round(last["forced"], 1), round(last["finish_length"], 2), round(last["graph_share"], 2),
                round(statistics.mean(r["step_ms"] for r, _ in runs[name]), 3), round(per_step["schedule"], 3),
                round(per_step["forward"], 3), round(per_step["sample"], 3), round(per_step["process"], 3),
            ])  # fmt: skip
            print(rows[-1], flush=True)
    meta = run_meta()
    meta.update({"model": f"{args.config} random bf16 weights, Llama-3 tokenizer", "attention": engine.runner.attention_backend,
                 "cuda_graph": engine.runner.graph_runner is not None, "max_tokens": args.max_tokens, "repeats": args.repeats})  # fmt: skip
    notes = [
        "TPOT ms: median over the repeats (modes interleaved within each repeat); ratio: against the unconstrained median at the same batch size; range: min–max over the repeats.",
        "Graph forwards: share of the run's forwards that replayed a CUDA graph (decode or extend). Step breakdown (ms per engine step): schedule (host), forward (host launch; graph replay is asynchronous), "
        "sample (mask rows, launching the mask kernel and draw), process (waiting for the sampled ids, FSM advance, jump-forward, stop checks; with the overlap scheduler the ids waited for are the previous step's, while this step's forward runs).",
    ]
    write_results(
        args.out, "constrained-tpot", "Constrained vs unconstrained TPOT", meta,
        ["batch", "mode", "TPOT ms", "ratio", "TPOT range ms", "tokens/req", "forced/req", "length-finished", "graph forwards", "step ms",
         "schedule ms", "forward ms", "sample ms", "process ms"],
        rows, notes,
    )  # fmt: skip


if __name__ == "__main__":
    main()
