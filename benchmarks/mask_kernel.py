"""Mask-row kernel throughput on the GPU against device copy bandwidth.

``apply_mask_rows`` (mask + temperature, in place: reads and writes every logit) and
``masked_argmax`` (mask + greedy pick: reads every logit) for B ∈ {1, 64, 256}, V = 128,256,
float32 and bfloat16, pool rows chosen at random from 512 rows.  The logits buffers rotate over
more memory than the L2 cache holds, so every launch streams from HBM.  Bytes counted: logits
read (+ written) and the mask words read.

    python benchmarks/mask_kernel.py [--batches 1,64,256] [--vocab 128256]
"""

from __future__ import annotations

import argparse

import torch
from _gpu_common import HERE, copy_bandwidth, run_meta, write_results
from structgen.kernels import apply_mask_rows, masked_argmax


def time_it(fn, iters: int) -> float:  # type: ignore[no-untyped-def]
    """GPU seconds per call: ``iters`` calls captured in one CUDA graph and replayed (host launch
    cost excluded; the engine pays it once per step)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(3):
            fn(i)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for i in range(iters):
            fn(i)
    graph.replay()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    graph.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / 1e3 / iters


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,64,256")
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--out", default=str(HERE / "results" / "decode"))
    args = ap.parse_args()
    device = torch.device("cuda")
    bw = copy_bandwidth(device)
    vocab = args.vocab
    words = (vocab + 31) // 32
    gen = torch.Generator(device=device).manual_seed(0)
    pool = torch.randint(-(2**31), 2**31 - 1, (512, words), dtype=torch.int32, device=device, generator=gen)
    rows: list[list[object]] = []
    for dtype in (torch.float32, torch.bfloat16):
        for b in [int(x) for x in args.batches.split(",")]:
            per = b * vocab * torch.empty((), dtype=dtype).element_size()
            nbuf = max(2, (512 << 20) // per + 1)  # > L2 in total
            bufs = [torch.randn(b, vocab, device=device, generator=gen).to(dtype) for _ in range(nbuf)]
            idx = torch.randint(-1, 512, (b,), dtype=torch.int32, device=device, generator=gen)
            temp = torch.rand(b, device=device, generator=gen) + 0.5
            mask_bytes = b * words * 4

            def apply(i: int, bufs=bufs, idx=idx, temp=temp) -> None:  # type: ignore[no-untyped-def]
                apply_mask_rows(bufs[i % len(bufs)], idx, pool, temperature=temp, backend="triton")

            def argmax(i: int, bufs=bufs, idx=idx) -> None:  # type: ignore[no-untyped-def]
                masked_argmax(bufs[i % len(bufs)], idx, pool, backend="triton")

            t_apply = time_it(apply, args.iters)
            t_arg = time_it(argmax, args.iters)
            gbs_apply = (2 * per + mask_bytes) / t_apply
            gbs_arg = (per + mask_bytes) / t_arg
            name = "fp32" if dtype == torch.float32 else "bf16"
            rows.append([name, b, round(t_apply * 1e6, 1), round(gbs_apply / 1e9, 1), round(100 * gbs_apply / bw, 1),
                         round(t_arg * 1e6, 1), round(gbs_arg / 1e9, 1), round(100 * gbs_arg / bw, 1)])  # fmt: skip
            print(rows[-1], flush=True)
            del bufs
    meta = run_meta()
    meta.update({"vocab": vocab, "copy_bandwidth_GBps": round(bw / 1e9, 1)})
    write_results(
        args.out, "mask-kernel", "Mask-row kernel vs copy bandwidth", meta,
        ["dtype", "B", "apply µs", "apply GB/s", "apply % of copy", "argmax µs", "argmax GB/s", "argmax % of copy"],
        rows, ["Copy bandwidth counts read + write; kernel bytes: logits read (+ written for apply) + mask words read.",
               "Times are GPU time per call from a CUDA graph of the calls (host launch overhead excluded)."],
    )  # fmt: skip


if __name__ == "__main__":
    main()
