"""Decode step time vs the HBM roofline on the GPU (Llama-3-8B shapes, random bf16 weights).

For batch sizes B and contexts L, B requests each hold L tokens of KV; each step decodes one
token per request through ``ModelRunner.forward`` (FlashInfer decode, CUDA-graph replay):
wall time per step with the host plan included (synchronized), median over the steps.
MBU = (weight bytes read + KV bytes read) / step time / device copy bandwidth measured in the
same run (read + write counted).  Weight bytes read: every parameter except the embedding
table, plus B embedding rows.

    python benchmarks/decode_roofline.py [--config llama3-8b] [--batches 1,8,32,128] [--contexts 512,4096]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import tempfile
import time
from pathlib import Path

import torch
from _gpu_common import (
    HERE,
    apply_gemv_overrides,
    copy_bandwidth,
    decode_bytes_read,
    graph_kernel_rows,
    graph_replay_ms,
    run_meta,
    write_results,
)

from structgen.engine import EngineConfig, SchedulerConfig
from structgen.engine.model_runner import ModelRunner
from structgen.models import write_preset_folder
from structgen.runtime.attention import ForwardBatch
from structgen.runtime.flashinfer_backend import DECODE_KERNELS
from structgen.runtime.memory import MemoryConfig


def _host_profile(prof: cProfile.Profile, steps: int, host_median_s: float) -> list[str]:
    """The heaviest host functions of ``steps`` profiled forwards, as note lines (µs per step,
    own time and cumulative; cProfile inflates both)."""
    stats = pstats.Stats(prof)
    entries = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:25]  # type: ignore[attr-defined]
    lines = [
        "",
        f"Host side of `ModelRunner.forward` (first configuration): median {host_median_s * 1e6:.0f} µs per step from return of "
        f"forward, unprofiled. cProfile of {steps} more steps, µs per step (profiling overhead included):",
        "",
        "| function | calls/step | own µs | cumulative µs |",
        "|---|---|---|---|",
    ]
    for (file, line, fn), (cc, _nc, tt, ct, _callers) in entries:
        where = f"{Path(file).name}:{line}" if line else file
        lines.append(f"| `{fn}` ({where}) | {cc / steps:.1f} | {tt / steps * 1e6:.1f} | {ct / steps * 1e6:.1f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="llama3-8b")
    ap.add_argument("--batches", default="1,8,32,128")
    ap.add_argument("--contexts", default="512,4096")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--no-cuda-graph", action="store_true")
    ap.add_argument("--extend-graph-tokens", type=int, default=1024, help="cuda_graph_max_extend_tokens (0: decode graphs only)")
    ap.add_argument("--profile", action="store_true", help="add the first configuration's per-kernel GPU time to the notes")
    ap.add_argument(
        "--host-profile", action="store_true", help="add a cProfile of the first configuration's forwards (host side) to the notes"
    )
    ap.add_argument("--cuda-graph-max-bs", type=int, default=0, help="largest captured decode batch (0: the largest of --batches)")
    ap.add_argument("--decode-kernel", default="auto", choices=DECODE_KERNELS, help="decode graphs' attention")
    ap.add_argument(
        "--gemv", default="", help="projection kernels at M = 1, e.g. qkv=dot:32:256:4:4,down=cublas (default: the tuned table)"
    )
    ap.add_argument("--out", default=str(HERE / "results" / "decode"))
    args = ap.parse_args()
    try:
        gemv_applied = apply_gemv_overrides(args.gemv, args.config)
    except ValueError as e:
        ap.error(str(e))
    if args.extend_graph_tokens < 0:
        ap.error(f"--extend-graph-tokens must be ≥ 0, got {args.extend_graph_tokens}")
    batches = [int(b) for b in args.batches.split(",")]
    contexts = [int(c) for c in args.contexts.split(",")]
    device = torch.device("cuda")
    bw = copy_bandwidth(device)
    max_b, max_l = max(batches), max(contexts)
    graph_bs = args.cuda_graph_max_bs or max_b
    if graph_bs < max_b:
        ap.error(f"--cuda-graph-max-bs {graph_bs} is below the largest batch {max_b}")
    extra = 2 * args.steps + args.warmup + 1  # the timed steps, then as many profiled ones
    with tempfile.TemporaryDirectory() as tmp:
        write_preset_folder(args.config, tmp)
        mem = MemoryConfig(max_total_tokens=max_b * (max_l + extra) + 16, max_context=max_l + extra)
        t0 = time.perf_counter()
        runner = ModelRunner(tmp, EngineConfig(
            device=str(device), dtype="bfloat16", attention_backend="flashinfer", cuda_graph=not args.no_cuda_graph,
            cuda_graph_max_bs=graph_bs, cuda_graph_max_extend_tokens=args.extend_graph_tokens, random_weights_seed=0,
            decode_kernel=args.decode_kernel, memory=mem, scheduler=SchedulerConfig(max_running_requests=graph_bs),
        ))  # fmt: skip
        load_s = time.perf_counter() - t0
    model = runner.model
    m = model.args
    elt = 2
    weight_bytes_all = sum(p.numel() * p.element_size() for p in model.parameters())
    weight_bytes_read = weight_bytes_all - model.model.embed_tokens.weight.numel() * elt
    for kb, vb in zip(runner.kv_pool.k_buffers, runner.kv_pool.v_buffers):
        kb.normal_()
        vb.normal_()
    rows_out: list[list[object]] = []
    profile_rows: list[str] = []
    host_rows: list[str] = []
    gen = torch.Generator().manual_seed(0)
    for ctx in contexts:
        for b in batches:
            rows = [runner.req_to_token.alloc() for _ in range(b)]
            host_times: list[float] = []
            table = runner.req_to_token.req_to_token_cpu
            held = []
            for r in rows:
                slots = runner.allocator.alloc(ctx)
                assert slots is not None and r is not None
                table[r, :ctx] = slots
                held.append(slots)
            times = []
            prof = cProfile.Profile() if args.host_profile and b == batches[0] and ctx == contexts[0] else None
            for it in range(args.warmup + args.steps):
                new = runner.allocator.alloc(b)
                assert new is not None
                held.append(new)
                for i, r in enumerate(rows):
                    table[r, ctx + it] = new[i]
                batch = ForwardBatch(
                    torch.randint(0, m.vocab_size, (b,), generator=gen), torch.full((b,), ctx + it, dtype=torch.int64), new,
                    rows, [ctx + it] * b, [1] * b, list(range(b)),  # type: ignore[arg-type]
                )  # fmt: skip
                torch.cuda.synchronize()
                t = time.perf_counter()
                runner.forward(batch)
                t_host = time.perf_counter()
                torch.cuda.synchronize()
                if it >= args.warmup:
                    times.append(time.perf_counter() - t)
                    host_times.append(t_host - t)
            if prof is not None:  # the same steps again under cProfile (host side of forward only)
                for it in range(args.steps):
                    new = runner.allocator.alloc(b)
                    assert new is not None
                    held.append(new)
                    pos = ctx + args.warmup + args.steps + it
                    for i, r in enumerate(rows):
                        table[r, pos] = new[i]
                    batch = ForwardBatch(
                        torch.randint(0, m.vocab_size, (b,), generator=gen), torch.full((b,), pos, dtype=torch.int64), new,
                        rows, [pos] * b, [1] * b, list(range(b)),  # type: ignore[arg-type]
                    )  # fmt: skip
                    torch.cuda.synchronize()
                    prof.enable()
                    runner.forward(batch)
                    prof.disable()
                    torch.cuda.synchronize()
                host_rows = _host_profile(prof, args.steps, statistics.median(host_times))
            step = statistics.median(times)
            gpu_s = float("nan")
            if runner.graph_runner is not None:  # the last step's graph again, GPU time only
                bs = next(x for x in runner.graph_runner.buckets if x >= b)
                graph = runner.graph_runner.graphs[bs]
                gpu_s = graph_replay_ms(graph) / 1e3
                if args.profile and b == batches[0] and ctx == contexts[0]:
                    profile_rows = graph_kernel_rows(graph, "Per-kernel GPU time of one replay (first configuration):")
            bytes_read = decode_bytes_read(runner, b, ctx + args.warmup + args.steps // 2)
            mbu = bytes_read / step / bw
            rows_out.append([
                b, ctx, round(step * 1e3, 3), round(gpu_s * 1e3, 3), round(bytes_read / 1e9, 2), round(bytes_read / step / 1e12, 3),
                round(mbu * 100, 1), round(100 * bytes_read / gpu_s / bw, 1),
            ])  # fmt: skip
            print(rows_out[-1], flush=True)
            for s in held:
                runner.allocator.free(s)
            for r in rows:
                runner.req_to_token.free(r)  # type: ignore[arg-type]
    meta = run_meta()
    meta.update(
        {
            "model": f"{args.config} random bf16 weights ({weight_bytes_all / 1e9:.2f} GB; {weight_bytes_read / 1e9:.2f} GB read per step)",
            "attention": runner.attention_backend,
            "cuda_graph": runner.graph_runner is not None,
            "decode_kernel": args.decode_kernel,
            "cuda_graph_max_bs": graph_bs,
            "copy_bandwidth_TBps": round(bw / 1e12, 3),
            "model_build_s": round(load_s, 1),
            "gemv_overrides": "; ".join(gemv_applied) or "none",
        }
    )
    notes = [
        "Step = `ModelRunner.forward` wall time incl. host plan and input copies, synchronized, median of the measured steps.",
        "MBU = bytes read / step / copy bandwidth (read + write counted).",
        "Graph GPU ms: the same step's CUDA graph replayed alone (no host plan, no sync gap); its MBU isolates kernel efficiency.",
        *profile_rows,
        *host_rows,
    ]
    write_results(
        args.out, "decode-roofline", "Decode step vs HBM roofline", meta,
        ["batch", "context", "step ms", "graph GPU ms", "GB read", "TB/s", "MBU %", "graph-only MBU %"], rows_out, notes,
    )  # fmt: skip


if __name__ == "__main__":
    main()
