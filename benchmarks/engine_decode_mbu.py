"""Engine decode steps vs the HBM roofline, with and without the overlap scheduler (H100 / H200).

``decode_roofline.py`` times ``ModelRunner.forward`` alone, synchronized, so the host's
staging work sits on every step.  Here whole engine steps run (schedule → forward → sampling
and result processing) on the Llama-3-8B configuration (random bf16 weights, the real Llama-3
tokenizer): B requests with prompts of ``--context`` random token ids decode greedily, and the
wall time of each engine step in the steady decode phase is recorded.  Modes, alternated on
one engine (same runner, graphs and mask pool; the scheduler's ``overlap`` switch flipped
between runs), each run ``--repeats`` times after one unmeasured warm run:

- *sync*: every step processes its own sampled ids (``overlap_schedule=False``);
- *overlap*: a step launches its forward before processing the previous step's ids;
- *overlap, constrained*: the same with each request under a regex of 40–400 letters and
  spaces (jump-forward off, so every token is sampled under a mask row).

MBU = (weight bytes read + KV bytes read) / step / copy bandwidth measured in the same run, as
``decode_roofline.py`` counts them (KV at the run's mean context).

    python benchmarks/engine_decode_mbu.py --tokenizer .carry/llama3 [--batches 1] [--context 512] [--steps 64] [--repeats 5]
        [--cuda-graph-max-bs N] [--profile]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

import torch
from _gpu_common import HERE, ROOT, apply_gemv_overrides, copy_bandwidth, decode_bytes_read, run_meta, write_results

from structgen import Constraint, Engine, EngineConfig, GenerateRequest, SamplingParams
from structgen.engine import SchedulerConfig
from structgen.models import write_preset_folder
from structgen.runtime.memory import MemoryConfig

MODES = [("sync", False, False), ("overlap", True, False), ("overlap, constrained", True, True)]


def run_mode(engine: Engine, timer: ForwardTimer, batch: int, context: int, steps: int, constrained: bool, seed: int) -> dict[str, float]:
    """One run of ``batch`` requests decoding ``steps`` tokens; returns the median steady-step
    seconds (the steps after the first quarter, while every request still decodes) and the
    median GPU seconds of those steps' decode-graph forwards, the mean TPOT, and how many
    requests ended early (EOS)."""
    gen = torch.Generator().manual_seed(seed)
    eos = set(engine.eos_token_ids)
    constraint = Constraint.regex("[a-z ]{40,400}") if constrained else None
    rids = []
    for _ in range(batch):
        ids = [t for t in torch.randint(0, engine.vocab.size, (context + 16,), generator=gen).tolist() if t not in eos][:context]
        params = SamplingParams(max_tokens=steps, jump_forward=False)
        rids.append(engine.submit(GenerateRequest(ids, params, constraint)))
    times: list[float] = []
    live: list[int] = []
    replay_step: list[int] = []  # the step index of each decode-graph forward timed
    timer.take()
    while engine.has_unfinished():
        t = time.perf_counter()
        before = len(timer.pairs)
        engine.step()
        times.append(time.perf_counter() - t)
        live.append(len(engine.scheduler.decode.running))
        replay_step += [len(times) - 1] * (len(timer.pairs) - before)
    gpu_by_step = dict(zip(replay_step, timer.take()))
    outs = [engine.output(r) for r in rids]
    for r in rids:
        engine.forget(r)
    full = [i for i, n in enumerate(live) if n == batch]  # steps while every request was running
    steady_idx = full[len(full) // 4 :]
    steady = [times[i] for i in steady_idx]
    graph = [gpu_by_step[i] for i in steady_idx if i in gpu_by_step]
    tpots = [(o.usage.latency_s - o.usage.ttft_s) / (o.usage.completion_tokens - 1) for o in outs if o.usage.completion_tokens > 1]
    return {
        "step_s": statistics.median(steady),
        "graph_s": statistics.median(graph) if graph else float("nan"),
        "steady_steps": len(steady),
        "tpot_s": statistics.mean(tpots),
        "early": sum(o.finish_reason != "length" for o in outs),
    }


class ForwardTimer:
    """CUDA events around every decode-graph forward (``DecodeGraphRunner.replay``: the input
    copy and the graph) of an engine; :meth:`take` returns their GPU seconds since the last
    call (synchronizing first)."""

    def __init__(self, engine: Engine) -> None:
        gr = engine.runner.graph_runner
        assert gr is not None, "engine_decode_mbu needs CUDA graphs"
        self.pairs: list[tuple[Any, Any]] = []
        replay = gr.replay

        def timed(batch: Any) -> torch.Tensor:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            out = replay(batch)
            e1.record()
            self.pairs.append((e0, e1))
            return out

        gr.replay = timed  # type: ignore[method-assign]

    def take(self) -> list[float]:
        torch.cuda.synchronize()
        out = [a.elapsed_time(b) / 1e3 for a, b in self.pairs]
        self.pairs = []
        return out


def profile_steps(engine: Engine, batch: int, context: int, steps: int = 16) -> list[str]:
    """Per-kernel GPU µs per step over ``steps`` steady overlapped decode steps (torch.profiler),
    as note lines: what the GPU runs between two graph replays."""
    from torch.profiler import ProfilerActivity, profile

    engine.scheduler.overlap = True
    rids = [engine.submit(GenerateRequest(list(range(1000, 1000 + context)), SamplingParams(max_tokens=3 * steps))) for _ in range(batch)]
    for _ in range(steps):
        engine.step()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            engine.step()
        torch.cuda.synchronize()
    while engine.has_unfinished():
        engine.step()
    for r in rids:
        engine.forget(r)
    totals: dict[str, list[float]] = {}
    for ev in prof.events():
        if ev.device_type.name == "CUDA":
            t = totals.setdefault(ev.name[:80], [0.0, 0])
            t[0] += ev.device_time_total
            t[1] += 1
    rows = sorted(totals.items(), key=lambda kv: -kv[1][0])
    lines = ["", f"GPU work of {steps} steady overlapped steps at batch {batch} (torch.profiler; PDL overlaps graph kernels), per step:", "",
             "| kernel / copy | calls per step | µs per step |", "|---|---|---|"]  # fmt: skip
    lines += [f"| `{name}` | {c / steps:.2f} | {us / steps:.1f} |" for name, (us, c) in rows[:30]]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="llama3-8b")
    ap.add_argument("--tokenizer", default=str(ROOT / ".carry" / "llama3"))
    ap.add_argument("--batches", default="1")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--steps", type=int, default=64, help="tokens each request decodes per run")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cuda-graph-max-bs", type=int, default=0, help="largest captured decode batch (0: the largest of --batches)")
    ap.add_argument("--profile", action="store_true", help="add the per-kernel GPU time of steady overlapped steps (first batch size)")
    ap.add_argument(
        "--gemv", default="", help="projection kernels at M = 1, e.g. qkv=dot:32:256:4:4,down=cublas (default: the tuned table)"
    )
    ap.add_argument("--out", default=str(HERE / "results" / "decode"))
    args = ap.parse_args()
    try:
        gemv_applied = apply_gemv_overrides(args.gemv, args.config)
    except ValueError as e:
        ap.error(str(e))
    if args.repeats < 1 or args.steps < 8 or args.context < 1:
        ap.error("--repeats must be ≥ 1, --steps ≥ 8 and --context ≥ 1")
    batches = [int(b) for b in args.batches.split(",")]
    device = torch.device("cuda")
    bw = copy_bandwidth(device)
    top = max(batches)
    max_bs = args.cuda_graph_max_bs or top
    if max_bs < top:
        ap.error(f"--cuda-graph-max-bs {max_bs} is below the largest batch {top}")
    with tempfile.TemporaryDirectory() as tmp:
        write_preset_folder(args.config, tmp, tokenizer_dir=args.tokenizer)
        cfg = EngineConfig(
            device="cuda", dtype="bfloat16", random_weights_seed=0, cuda_graph_max_bs=max_bs,
            memory=MemoryConfig(max_total_tokens=top * (args.context + args.steps + 64), max_context=args.context + args.steps + 64),
            scheduler=SchedulerConfig(max_running_requests=max_bs),
        )  # fmt: skip
        engine = Engine(tmp, cfg)
    timer = ForwardTimer(engine)
    rows: list[list[object]] = []
    for b in batches:
        runs: dict[str, list[dict[str, float]]] = {name: [] for name, _o, _c in MODES}
        for rep in range(args.repeats + 1):  # the first round warms graphs, mask rows and the grammar
            for name, overlap, constrained in MODES:
                engine.scheduler.overlap = overlap
                torch.cuda.synchronize()
                r = run_mode(engine, timer, b, args.context, args.steps, constrained, seed=rep)
                if rep:
                    runs[name].append(r)
        kv_tokens = args.context + args.steps // 2
        bytes_read = decode_bytes_read(engine.runner, b, kv_tokens)
        for name, _o, _c in MODES:
            step = statistics.median(r["step_s"] for r in runs[name])
            lo, hi = min(r["step_s"] for r in runs[name]), max(r["step_s"] for r in runs[name])
            graph_s = statistics.median(r["graph_s"] for r in runs[name])
            rows.append([
                b, name, round(step * 1e3, 3), f"{lo * 1e3:.3f}–{hi * 1e3:.3f}", round(100 * bytes_read / step / bw, 1),
                round(100 * bytes_read / hi / bw, 1), round(statistics.median(r["tpot_s"] for r in runs[name]) * 1e3, 3),
                int(statistics.median(r["steady_steps"] for r in runs[name])), sum(int(r["early"]) for r in runs[name]),
                round(graph_s * 1e3, 3), round(100 * bytes_read / graph_s / bw, 1),
            ])  # fmt: skip
            print(rows[-1], flush=True)
    prof_rows = profile_steps(engine, batches[0], args.context) if args.profile else []
    meta = run_meta()
    meta.update({
        "model": f"{args.config} random bf16 weights, Llama-3 tokenizer", "attention": engine.runner.attention_backend,
        "cuda_graph_max_bs": max_bs, "context": args.context, "steps": args.steps,
        "repeats": args.repeats, "gemv_overrides": "; ".join(gemv_applied) or "none", "copy_bandwidth_TBps": round(bw / 1e12, 3), "GB_read_per_step_b1": round(decode_bytes_read(engine.runner, 1, args.context + args.steps // 2) / 1e9, 2),
    })  # fmt: skip
    notes = [
        "Step ms: median over the runs of each run's median steady engine step (wall time of `Engine.step()` while every request "
        "decodes, the first quarter of those steps skipped); range: min–max of the runs' medians.",
        "MBU %: bytes read / step / copy bandwidth; worst-run MBU uses the slowest run's step.  TPOT ms: (latency − TTFT) / "
        "(completion tokens − 1), median of the runs' means.  Early: requests (all runs) that ended before `--steps` tokens (EOS).",
        "Forward GPU ms: CUDA events around each steady step's decode forward (input copy + graph replay), median per run, median "
        "of the runs; its MBU is the ceiling of a step.",
        *prof_rows,
    ]
    write_results(
        args.out, "engine-decode-mbu", "Engine decode steps vs HBM roofline (overlap scheduler)", meta,
        ["batch", "mode", "step ms", "range ms", "MBU %", "worst-run MBU %", "TPOT ms", "steady steps", "early", "forward GPU ms", "forward-only MBU %"], rows, notes,
    )  # fmt: skip


if __name__ == "__main__":
    main()
