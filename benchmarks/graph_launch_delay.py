"""Does launching the batch-1 decode graph hold the GPU back? (H200, issue 4)

The decode step's wall time exceeds its CUDA graph's GPU time by the host work of
``ModelRunner.forward``.  One candidate was ``cudaGraphLaunch`` itself: a graph of a few hundred
kernels might reach the GPU only once its whole launch is submitted.  This script builds the
Llama-3-8B configuration (random bf16 weights, batch-1 decode graph with the Triton decode
kernel, no extend graphs) and replays the graph directly, alternating two modes per iteration:

- *idle*: the GPU is idle when the replay is launched; GPU ms = event before → event after;
- *busy*: a ~0.5 ms spin kernel runs first, so the whole launch is queued before the GPU
  reaches the graph; its GPU ms is the graph's own time.

idle − busy is the launch's delay of the GPU.  It also reports the CPU µs of ``replay()`` and
the idle mode's wall µs from launch to synchronize.

    python benchmarks/graph_launch_delay.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _gpu_common import HERE, run_meta, write_results

from structgen.memory import MemoryConfig
from structgen.model_runner import ModelRunner
from structgen.models import write_preset_folder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args()
    if args.iters < 1:
        ap.error(f"--iters must be ≥ 1, got {args.iters}")
    dev = torch.device("cuda")
    with tempfile.TemporaryDirectory() as tmp:
        write_preset_folder("llama3-8b", tmp)
        mem = MemoryConfig(max_total_tokens=4096, max_running_requests=1, max_context=2048)
        runner = ModelRunner(
            tmp, mem, device=dev, dtype="bfloat16", attention_backend="flashinfer", cuda_graph=True, cuda_graph_max_bs=1,
            cuda_graph_max_extend_tokens=0, random_weights_seed=0, decode_kernel="triton",
        )  # fmt: skip
    assert runner.graph_runner is not None
    graph = runner.graph_runner.graphs[1]
    for _ in range(5):
        graph.replay()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    gpu: dict[str, list[float]] = {"idle": [], "busy": []}
    cpu_launch: list[float] = []
    wall: list[float] = []
    for _ in range(args.iters):
        for mode in ("idle", "busy"):
            torch.cuda.synchronize()
            if mode == "busy":
                torch.cuda._sleep(1_000_000)  # ~0.5 ms of GPU spin before the graph
            t = time.perf_counter()
            e0.record()
            graph.replay()
            t_launched = time.perf_counter()
            e1.record()
            torch.cuda.synchronize()
            t_done = time.perf_counter()
            gpu[mode].append(e0.elapsed_time(e1) * 1e3)
            if mode == "idle":
                cpu_launch.append((t_launched - t) * 1e6)
                wall.append((t_done - t) * 1e6)
    rows = [
        [name, round(statistics.median(v), 1), round(min(v), 1), round(max(v), 1)]
        for name, v in (
            ("GPU µs, idle GPU at launch", gpu["idle"]),
            ("GPU µs, busy GPU at launch", gpu["busy"]),
            ("CPU µs of replay()", cpu_launch),
            ("wall µs, replay() to synchronize (idle)", wall),
        )
    ]
    delay = statistics.median(gpu["idle"]) - statistics.median(gpu["busy"])
    notes = [f"Launch delay of the GPU (idle − busy medians): {delay:.1f} µs over {args.iters} iterations per mode."]
    meta = {**run_meta(), "model": "llama3-8b random bf16, batch-1 decode graph, Triton decode"}
    write_results(
        args.out,
        "graph-launch-delay",
        "Decode graph launch: does the GPU wait for it?",
        meta,
        ["quantity", "median", "min", "max"],
        rows,
        notes,
    )


if __name__ == "__main__":
    main()
