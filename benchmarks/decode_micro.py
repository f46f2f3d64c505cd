"""Micro-benchmarks of the batch-1 decode step's parts on the GPU (Llama-3-8B shapes).

Three sections, each timed as GPU time per call from a CUDA graph of many calls (host launch
cost excluded), with weights / KV of several layers cycled so the 50 MB L2 does not serve them:

- ``gemv``: ``x [M, K] @ W [N, K]ᵀ`` for the five projections (qkv, o, gate_up, down,
  lm_head) at M ∈ {1, 8}: torch (cuBLAS) against the Triton GEMV configurations of
  :mod:`structgen.kernels.linear_triton`; GB/s counts the weight bytes.
- ``attention``: FlashInfer batch decode at batch 1, contexts 512 and 4096, CUDA-core kernel
  (split-KV, as the engine plans it), the tensor-core kernel, and split-KV disabled; plus the
  host time of one ``plan`` call.
- ``decode_attn``: the engine's CUDA-graph decode attention, FlashInfer's CUDA-core decode
  wrapper against the Triton split-KV kernel (:mod:`structgen.kernels.decode_attention_triton`)
  at batch 1, 2, 4, 8, 32, 128 and contexts 512, 4096 (splits from ``decode_num_splits``, plus
  split / tile variants up to batch 8).
- ``rope_kv``: RoPE then two indexed KV stores (the engine's path) against the fused
  :func:`~structgen.kernels.model_ops_triton.rope_store_kv_triton`.

    python benchmarks/decode_micro.py --out DIR
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from _gpu_common import HERE, copy_bandwidth, run_meta, write_results
from structgen.kernels.linear_triton import GemvConfig, gemv_triton

SHAPES = {"qkv": (6144, 4096), "o_proj": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336), "lm_head": (128256, 4096)}
FMA_CONFIGS = [
    GemvConfig("fma", bn, bk, w, s)
    for bn, bk, w, s in [
        (4, 1024, 4, 3),
        (8, 512, 4, 3),
        (8, 1024, 8, 3),
        (16, 256, 4, 4),
        (16, 512, 8, 3),
        (32, 256, 8, 3),
        (8, 256, 4, 4),
    ]
]
DOT_CONFIGS = [
    GemvConfig("dot", bn, bk, w, s)
    for bn, bk, w, s in [(16, 256, 4, 4), (32, 256, 4, 4), (32, 128, 4, 5), (64, 128, 4, 4), (16, 512, 4, 3), (64, 256, 8, 3)]
]


def graph_us(calls: Sequence[Callable[[], Any]], reps: int = 10) -> float:
    """GPU µs per call of ``calls`` captured once into a CUDA graph, median of ``reps``
    replays."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for c in calls[:2]:
            c()
    torch.cuda.current_stream().wait_stream(stream)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        for c in calls:
            c()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / len(calls))
    times.sort()
    return times[len(times) // 2]


def _gemv_case(rows: list[list[Any]], name: str, ws: list[torch.Tensor], m: int) -> None:
    copies = len(ws)
    n, k = ws[0].shape
    nbytes = n * k * 2
    calls_per = max(copies, math.ceil(2e9 / nbytes))
    x = torch.randn(m, k, device=ws[0].device, dtype=torch.bfloat16)
    ref = F.linear(x, ws[0]).float()
    results: list[tuple[str, float]] = [("torch", graph_us([partial(F.linear, x, ws[i % copies]) for i in range(calls_per)]))]
    for cfg in (FMA_CONFIGS if m == 1 else []) + DOT_CONFIGS:
        try:
            err = (gemv_triton(x, ws[0], None, cfg).float() - ref).abs().max().item()
            us = graph_us([partial(gemv_triton, x, ws[i % copies], None, cfg) for i in range(calls_per)])
        except Exception as e:  # a configuration that does not compile is reported, not fatal
            print(f"gemv {name} M={m} {cfg}: {type(e).__name__}: {e}", flush=True)
            continue
        if err > 0.05 * ref.abs().max().item():
            print(f"gemv {name} M={m} {cfg}: max error {err:.3g}", flush=True)
            continue
        results.append((f"{cfg.kind} n{cfg.block_n} k{cfg.block_k} w{cfg.num_warps} s{cfg.num_stages}", us))
    torch_us = results[0][1]
    best = sorted(results, key=lambda r: r[1])[:6]
    for label, us in best + ([results[0]] if results[0] not in best else []):
        rows.append(["gemv", f"{name} M={m}", label, round(us, 2), round(nbytes / us / 1e3, 1), round(torch_us / us, 3)])
        print(rows[-1], flush=True)


def bench_gemv(rows: list[list[Any]], dev: torch.device) -> None:
    for name, (n, k) in SHAPES.items():
        copies = max(3, math.ceil(400e6 / (n * k * 2)))
        ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(copies)]
        for m in (1, 8):
            _gemv_case(rows, name, ws, m)
        del ws
        torch.cuda.empty_cache()


def _attention_case(
    rows: list[list[Any]], ctx: int, caches: list[tuple[torch.Tensor, torch.Tensor]], label: str, tc: bool, no_split: bool
) -> None:
    import flashinfer

    dev = caches[0][0].device
    layers = len(caches)
    kvh, d = caches[0][0].shape[2], caches[0][0].shape[3]
    qh = 4 * kvh
    workspace = torch.zeros(256 << 20, dtype=torch.uint8, device=dev)
    q = torch.randn(1, qh, d, device=dev, dtype=torch.bfloat16)
    indptr = torch.tensor([0, ctx], dtype=torch.int32)
    indices = torch.arange(1, ctx + 1, dtype=torch.int32, device=dev)
    last = torch.ones(1, dtype=torch.int32)
    w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
        workspace, "NHD", use_cuda_graph=True, use_tensor_cores=tc,
        paged_kv_indptr_buffer=torch.zeros(2, dtype=torch.int32, device=dev),
        paged_kv_indices_buffer=torch.zeros(ctx + 8, dtype=torch.int32, device=dev),
        paged_kv_last_page_len_buffer=torch.ones(1, dtype=torch.int32, device=dev),
    )  # fmt: skip
    plan = partial(
        w.plan, indptr, indices, last, qh, kvh, d, 1, q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16,
        sm_scale=d**-0.5, disable_split_kv=no_split,
    )  # fmt: skip
    plan()
    ref = w.run(q, caches[0])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(200):
        plan()
    host_us = (time.perf_counter() - t0) / 200 * 1e6
    torch.cuda.synchronize()
    us = graph_us([partial(w.run, q, caches[i % layers]) for i in range(layers * 4)])
    kv_bytes = 2 * ctx * kvh * d * 2
    rows.append(["attention", f"bs=1 ctx={ctx}", label, round(us, 2), round(kv_bytes / us / 1e3, 1), f"plan host {host_us:.0f} µs"])
    print(rows[-1], float(ref.float().abs().mean()), flush=True)


def bench_attention(rows: list[list[Any]], dev: torch.device) -> None:
    layers, kvh, d = 32, 8, 128
    for ctx in (512, 4096):
        caches = [
            (torch.randn(ctx + 1, 1, kvh, d, device=dev, dtype=torch.bfloat16), torch.randn(ctx + 1, 1, kvh, d, device=dev, dtype=torch.bfloat16))
            for _ in range(layers)
        ]  # fmt: skip
        for label, tc, no_split in [
            ("cuda-core split-kv", False, False),
            ("tensor-core", True, False),
            ("cuda-core no split", False, True),
        ]:
            try:
                _attention_case(rows, ctx, caches, label, tc, no_split)
            except Exception as e:  # a variant this flashinfer build lacks is reported, not fatal
                print(f"attention ctx={ctx} {label}: {type(e).__name__}: {e}", flush=True)
        del caches
        torch.cuda.empty_cache()


def bench_decode_attn(rows: list[list[Any]], dev: torch.device) -> None:
    import flashinfer
    from structgen.kernels import decode_num_splits
    from structgen.kernels.decode_attention_triton import decode_attention_triton

    kvh, qh, d = 8, 32, 128
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    workspace = torch.zeros(256 << 20, dtype=torch.uint8, device=dev)
    for ctx in (512, 4096):
        for bs in (1, 2, 4, 8, 16, 32, 128):
            per_layer = 2 * bs * ctx * kvh * d * 2
            layers = max(2, min(32, -(-(256 << 20) // per_layer)))  # KV cycled over > 256 MB
            slots = bs * ctx + 1
            caches = [
                (torch.randn(slots, kvh, d, device=dev, dtype=torch.bfloat16), torch.randn(slots, kvh, d, device=dev, dtype=torch.bfloat16))
                for _ in range(layers)
            ]  # fmt: skip
            q = torch.randn(bs, qh, d, device=dev, dtype=torch.bfloat16)
            indptr_host = torch.arange(0, bs + 1, dtype=torch.int32) * ctx
            indptr = indptr_host.to(dev)
            indices = torch.randperm(bs * ctx, device=dev).to(torch.int32) + 1  # scattered slots, as after eviction
            w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
                workspace, "NHD", use_cuda_graph=True,
                paged_kv_indptr_buffer=torch.zeros(bs + 1, dtype=torch.int32, device=dev),
                paged_kv_indices_buffer=torch.zeros(bs * ctx, dtype=torch.int32, device=dev),
                paged_kv_last_page_len_buffer=torch.ones(bs, dtype=torch.int32, device=dev),
            )  # fmt: skip
            w.plan(indptr_host, indices, torch.ones(bs, dtype=torch.int32), qh, kvh, d, 1,
                   q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16, sm_scale=d**-0.5)  # fmt: skip
            views = [(k.view(slots, 1, kvh, d), v.view(slots, 1, kvh, d)) for k, v in caches]
            ref = w.run(q, views[0])
            kv_bytes = per_layer
            case = f"bs={bs} ctx={ctx}"
            us = graph_us([partial(w.run, q, views[i % layers]) for i in range(layers * 4)])
            rows.append(["decode_attn", case, "flashinfer cuda-core", round(us, 2), round(kv_bytes / us / 1e3, 1), ""])
            print(rows[-1], flush=True)
            auto = decode_num_splits(bs, kvh, sms)
            variants = [(auto, 32, 4)]
            if bs <= 8:
                variants += [(auto * 2, 32, 4), (auto // 2 or 1, 32, 4), (auto, 64, 4), (auto, 16, 4)]
            for splits, block, warps in variants:
                run = partial(decode_attention_triton, scale=d**-0.5, num_splits=splits, block_n=block, num_warps=warps)
                got = run(q, *caches[0], indptr, indices)
                err = float((got.float() - ref.float()).abs().max())
                us = graph_us([partial(run, q, *caches[i % layers], indptr, indices) for i in range(layers * 4)])
                label = f"triton splits={splits} block={block} warps={warps}" + (" (auto)" if (splits, block, warps) == variants[0] else "")
                rows.append(["decode_attn", case, label, round(us, 2), round(kv_bytes / us / 1e3, 1), f"max |Δ| vs flashinfer {err:.1e}"])
                print(rows[-1], flush=True)
            del caches, views
            torch.cuda.empty_cache()


def _rope_split(
    qkv: torch.Tensor,
    pos: torch.Tensor,
    inv: torch.Tensor,
    slots: torch.Tensor,
    kc: torch.Tensor,
    vc: torch.Tensor,
    qh: int,
    kvh: int,
    d: int,
) -> None:
    from structgen.kernels.model_ops_triton import rope_qkv_inplace_triton

    t = qkv.shape[0]
    rope_qkv_inplace_triton(qkv, pos, inv, qh + kvh, d)
    kc[slots] = qkv[:, qh * d : (qh + kvh) * d].view(t, kvh, d)
    vc[slots] = qkv[:, (qh + kvh) * d :].view(t, kvh, d)


def bench_rope_kv(rows: list[list[Any]], dev: torch.device) -> None:
    from structgen.kernels.model_ops_triton import rope_store_kv_triton

    layers, qh, kvh, d, cap = 32, 32, 8, 128, 4096
    inv = (1.0 / (500000.0 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))).to(dev)
    for t in (1, 64):
        qkv = torch.randn(t, (qh + 2 * kvh) * d, device=dev, dtype=torch.bfloat16)
        pos = torch.randint(0, 4000, (t,), device=dev)
        slots = torch.randperm(cap, device=dev)[:t]
        kc = [torch.zeros(cap, kvh, d, device=dev, dtype=torch.bfloat16) for _ in range(layers)]
        vc = [torch.zeros(cap, kvh, d, device=dev, dtype=torch.bfloat16) for _ in range(layers)]
        for label, fn in [("rope + 2 index stores", _rope_split), ("fused rope_store_kv", rope_store_kv_triton)]:
            us = graph_us([partial(fn, qkv, pos, inv, slots, kc[i], vc[i], qh, kvh, d) for i in range(layers)])
            rows.append(["rope_kv", f"T={t}", label, round(us, 2), "", ""])
            print(rows[-1], flush=True)


@triton.jit
def _l2_prefetch_kernel(ptr, n_words, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    acc = tl.zeros((BLOCK,), dtype=tl.int32)
    for start in range(pid * BLOCK, n_words, step):
        offs = start + tl.arange(0, BLOCK)
        acc ^= tl.load(ptr + offs, mask=offs < n_words, other=0, eviction_policy="evict_last")
    tl.store(out_ptr + pid, tl.xor_sum(acc, axis=0))


def l2_prefetch_triton(t: torch.Tensor, sink: torch.Tensor, programs: int = 64, block: int = 2048) -> None:
    """Read ``t`` (contiguous, a multiple of 4 bytes) once so that it lands in L2 for a later
    kernel, marking its lines evict-last; ``sink`` int32 ``[≥ programs]`` receives one XOR per
    program so the loads are not eliminated.  Meant for a side stream while the main stream
    runs latency-bound kernels that leave HBM bandwidth idle."""
    words = t.view(torch.int32).view(-1)
    _l2_prefetch_kernel[(programs,)](words, words.numel(), sink, BLOCK=block, num_warps=8)


def _layer(x: torch.Tensor, w_qkv: torch.Tensor, w_o: torch.Tensor, run_attn: Any, cache: Any, q: torch.Tensor,
           side: torch.cuda.Stream | None, sink: torch.Tensor, programs: int) -> None:  # fmt: skip
    from structgen.kernels.linear_triton import tuned_config

    F.linear(x, w_qkv)
    main_s = torch.cuda.current_stream()
    if side is not None:  # o_proj's weights into L2 while attention runs
        side.wait_stream(main_s)
        with torch.cuda.stream(side):
            l2_prefetch_triton(w_o, sink, programs)
    attn = run_attn(q, cache)
    if side is not None:
        main_s.wait_stream(side)
    cfg = tuned_config(w_o.shape[0], w_o.shape[1], 1)
    assert cfg is not None
    gemv_triton(attn.view(1, -1), w_o, None, cfg)


def bench_prefetch(rows: list[list[Any]], dev: torch.device) -> None:
    """qkv GEMM → decode attention → o_proj per layer, 32 layers, with and without an L2
    prefetch of o_proj's weights on a side stream during attention."""
    import flashinfer

    layers, kvh, qh, d, hidden, ctx = 32, 8, 32, 128, 4096, 512
    w_qkv = [torch.randn(6144, hidden, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(layers)]
    w_o = [torch.randn(hidden, hidden, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(layers)]
    caches = [
        (torch.randn(ctx + 1, 1, kvh, d, device=dev, dtype=torch.bfloat16), torch.randn(ctx + 1, 1, kvh, d, device=dev, dtype=torch.bfloat16))
        for _ in range(layers)
    ]  # fmt: skip
    x = torch.randn(1, hidden, device=dev, dtype=torch.bfloat16)
    q = torch.randn(1, qh, d, device=dev, dtype=torch.bfloat16)
    workspace = torch.zeros(256 << 20, dtype=torch.uint8, device=dev)
    w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
        workspace, "NHD", use_cuda_graph=True,
        paged_kv_indptr_buffer=torch.zeros(2, dtype=torch.int32, device=dev),
        paged_kv_indices_buffer=torch.zeros(ctx + 8, dtype=torch.int32, device=dev),
        paged_kv_last_page_len_buffer=torch.ones(1, dtype=torch.int32, device=dev),
    )  # fmt: skip
    w.plan(torch.tensor([0, ctx], dtype=torch.int32), torch.arange(1, ctx + 1, dtype=torch.int32, device=dev),
           torch.ones(1, dtype=torch.int32), qh, kvh, d, 1, q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)  # fmt: skip
    sink = torch.zeros(1024, dtype=torch.int32, device=dev)
    side = torch.cuda.Stream()
    for label, use, programs in [
        ("no prefetch", False, 0),
        ("prefetch 32 CTAs", True, 32),
        ("prefetch 64 CTAs", True, 64),
        ("prefetch 128 CTAs", True, 128),
    ]:
        calls = [partial(_layer, x, w_qkv[i], w_o[i], w.run, caches[i], q, side if use else None, sink, programs) for i in range(layers)]
        us = graph_us(calls)
        rows.append(["prefetch", "qkv+attn+o_proj per layer", label, round(us, 2), "", ""])
        print(rows[-1], flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="gemv,attention,decode_attn,rope_kv,prefetch")
    ap.add_argument("--out", default=str(HERE / "results" / "decode"))
    args = ap.parse_args()
    dev = torch.device("cuda")
    bw = copy_bandwidth(dev)
    rows: list[list[Any]] = []
    sections = args.sections.split(",")
    known = ["gemv", "attention", "decode_attn", "rope_kv", "prefetch"]
    unknown = set(sections) - set(known)
    if unknown:
        ap.error(f"unknown --sections {sorted(unknown)}; known: {', '.join(known)}")
    if "prefetch" in sections:
        bench_prefetch(rows, dev)
    if "rope_kv" in sections:
        bench_rope_kv(rows, dev)
    if "attention" in sections:
        bench_attention(rows, dev)
    if "decode_attn" in sections:
        bench_decode_attn(rows, dev)
    if "gemv" in sections:
        bench_gemv(rows, dev)
    meta = run_meta()
    meta["copy_bandwidth_TBps"] = round(bw / 1e12, 3)
    notes = [
        "µs: GPU time per call from a CUDA graph of many calls (weights / KV cycled over copies larger than L2).",
        "GB/s: weight bytes (gemv) or KV bytes (attention) per call over its time; x torch: cuBLAS time over this row's.",
        "gemv rows: the six fastest configurations per shape, plus torch.",
    ]
    write_results(args.out, "decode-micro", "Decode step parts, batch 1 (micro-benchmarks)", meta,
                  ["section", "case", "variant", "µs", "GB/s", "x torch / note"], rows, notes)  # fmt: skip


if __name__ == "__main__":
    main()
