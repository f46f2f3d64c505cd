"""What a forward costs on the GPU as a batch's tokens per request grow (Llama-3-8B shapes,
random bf16 weights): the price of jump-forward chains riding along with decodes.

For batch sizes B, contexts L and query tokens per request k, B requests each hold L tokens of
KV and each step extends every request by k tokens through ``ModelRunner.forward`` (k = 1: the
decode graph; k > 1: the extend graph, FlashInfer's paged prefill); ``k = 1x`` sends decodes
through the extend graph, the path a decode batch takes once one request in it carries a chain.
Per configuration: wall time per step with the host plan included (synchronized), the host part
alone (until ``forward`` returns), the captured graph replayed alone (GPU time), and tokens per
second.  ``--shared-prefix P`` makes the first P of each request's L tokens the same KV slots (a
few-shot prompt the radix cache serves to all); ``--prefill-kernel`` picks FlashInfer's prefill
backend the extend graphs capture; ``--extend-as-decode`` replays k > 1 through the decode graphs,
one row per token (where the engine would); ``--profile B,L,K ...`` adds those configurations' per-kernel
GPU time.

    python benchmarks/extend_cost.py [--batches 64,256] [--contexts 200,650] [--tokens 1,1x,2,3,4]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

import torch
from _gpu_common import HERE, graph_kernel_rows, graph_replay_ms, run_meta, write_results

from structgen.engine import EngineConfig, SchedulerConfig
from structgen.engine.model_runner import ModelRunner
from structgen.models import write_preset_folder
from structgen.runtime.attention import ForwardBatch
from structgen.runtime.memory import MemoryConfig


def _graph_of(runner: ModelRunner, batch: ForwardBatch, via_extend: bool) -> Any:
    """The captured graph ``batch`` replayed on (decode, decode one row per token, or extend)."""
    if not via_extend and runner.graph_runner is not None and str(runner.last_forward_kind).startswith("decode graph"):
        bs = next(x for x in runner.graph_runner.buckets if x >= batch.num_tokens)
        return runner.graph_runner.graphs[bs]
    ext = runner.extend_graph_runner
    assert ext is not None
    key = ext.key_for(batch)
    return None if key is None else ext.graphs[key]


def _measure(
    runner: ModelRunner, b: int, ctx: int, k: int, via_extend: bool, steps: int, warmup: int, shared: int
) -> tuple[list[float], list[float], ForwardBatch]:
    """Steps of ``b`` requests over ``ctx`` tokens of KV (the first ``shared`` the same slots
    for all), each extending ``k`` tokens; returns (wall s, host s) per measured step and the
    last batch."""
    table = runner.req_to_token.req_to_token_cpu
    vocab = runner.vocab_size
    rows = [runner.req_to_token.alloc() for _ in range(b)]
    common = runner.allocator.alloc(shared) if shared else None
    held = [] if common is None else [common]
    for r in rows:
        slots = runner.allocator.alloc(ctx - shared)
        assert slots is not None and r is not None
        if common is not None:
            table[r, :shared] = common
        table[r, shared:ctx] = slots
        held.append(slots)
    walls: list[float] = []
    hosts: list[float] = []
    gen = torch.Generator().manual_seed(0)
    batch = None
    for it in range(warmup + steps):
        new = runner.allocator.alloc(b * k)
        assert new is not None
        held.append(new)
        pos0 = ctx + it * k
        for i, r in enumerate(rows):
            table[r, pos0 : pos0 + k] = new[i * k : (i + 1) * k]
        positions = torch.arange(pos0, pos0 + k, dtype=torch.int64).repeat(b)  # [b * k]
        batch = ForwardBatch(
            torch.randint(0, vocab, (b * k,), generator=gen), positions, new, rows,  # type: ignore[arg-type]
            [pos0] * b, [k] * b, [i * k + k - 1 for i in range(b)],
        )  # fmt: skip
        torch.cuda.synchronize()
        t = time.perf_counter()
        if via_extend:
            ext = runner.extend_graph_runner
            assert ext is not None
            key = ext.key_for(batch)
            assert key is not None, (b, k)
            ext.replay(batch, key)
        else:
            runner.forward(batch)
        t_host = time.perf_counter()
        torch.cuda.synchronize()
        if it >= warmup:
            walls.append(time.perf_counter() - t)
            hosts.append(t_host - t)
    for s in held:
        runner.allocator.free(s)
    for r in rows:
        runner.req_to_token.free(r)  # type: ignore[arg-type]
    assert batch is not None
    return walls, hosts, batch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="llama3-8b")
    ap.add_argument("--batches", default="64,256")
    ap.add_argument("--contexts", default="200,650")
    ap.add_argument("--tokens", default="1,1x,2,3,4", help="query tokens per request; 1x: decodes through the extend graph")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--prefill-kernel", default="auto", help="FlashInfer's paged prefill: auto, fa2, fa3")
    ap.add_argument("--extend-as-decode", action="store_true", help="small extends through the decode graphs, one row per token")
    ap.add_argument("--shared-prefix", type=int, default=0, help="leading KV slots every request shares (0: none)")
    ap.add_argument("--profile", nargs="*", default=[], help="B,L,K ...: add these configurations' per-kernel GPU time (K may be 1x)")
    ap.add_argument("--out", default=str(HERE / "results" / "decode"))
    args = ap.parse_args()
    batches = [int(x) for x in args.batches.split(",")]
    contexts = [int(x) for x in args.contexts.split(",")]
    tokens = [t.strip() for t in args.tokens.split(",")]
    for t in tokens:
        if not t.rstrip("x").isdigit() or int(t.rstrip("x")) < 1:
            ap.error(f"--tokens entries are positive integers or 1x, got {t!r}")
    kmax = max(int(t.rstrip("x")) for t in tokens)
    if not 0 <= args.shared_prefix <= min(contexts):
        ap.error(f"--shared-prefix must be in [0, the least context], got {args.shared_prefix}")
    device = torch.device("cuda")
    max_b, max_l = max(batches), max(contexts)
    extra = (args.steps + args.warmup + 1) * kmax
    with tempfile.TemporaryDirectory() as tmp:
        write_preset_folder(args.config, tmp)
        mem = MemoryConfig(max_total_tokens=max_b * (max_l + extra) + 16, max_context=max_l + extra)
        runner = ModelRunner(tmp, EngineConfig(
            device=str(device), dtype="bfloat16", attention_backend="flashinfer", cuda_graph=True, cuda_graph_max_bs=max_b,
            cuda_graph_max_extend_tokens=max(1024, max_b * kmax), random_weights_seed=0,
            memory=mem, scheduler=SchedulerConfig(max_running_requests=max_b), prefill_kernel=args.prefill_kernel,
            extend_as_decode=args.extend_as_decode,
        ))  # fmt: skip
    for kb, vb in zip(runner.kv_pool.k_buffers, runner.kv_pool.v_buffers):
        kb.normal_()
        vb.normal_()
    out_rows: list[list[object]] = []
    notes: list[str] = []
    for ctx in contexts:
        for b in batches:
            for t in tokens:
                k, via_extend = int(t.rstrip("x")), t.endswith("x")
                walls, hosts, last = _measure(runner, b, ctx, k, via_extend, args.steps, args.warmup, args.shared_prefix)
                kind = "extend graph" if via_extend else str(runner.last_forward_kind)
                graph = _graph_of(runner, last, via_extend)
                gpu_ms = graph_replay_ms(graph) if graph is not None else float("nan")
                step = statistics.median(walls)
                out_rows.append([
                    b, ctx, args.shared_prefix, t, b * k, kind, round(step * 1e3, 3), round(statistics.median(hosts) * 1e3, 3),
                    round(gpu_ms, 3), round(b * k / step), round(step * 1e3 / k, 3),
                ])  # fmt: skip
                print(out_rows[-1], flush=True)
                if f"{b},{ctx},{t}" in args.profile and graph is not None:
                    notes += graph_kernel_rows(graph, f"Per-kernel GPU time of one replay, B={b}, L={ctx}, k={t} ({kind}):", top=12)
    meta = run_meta()
    meta["model"] = f"{args.config} random bf16 weights, FlashInfer attention (prefill kernel {args.prefill_kernel}), CUDA graphs" + (
        ", extends as decode rows" if args.extend_as_decode else ""
    )
    notes = [
        "Step: `ModelRunner.forward` wall time incl. host plan and input copies, synchronized, median of the measured steps; "
        "host: until `forward` returned; graph GPU: the last step's graph replayed alone (CUDA events, mean of 10); "
        "ms per token position: step ÷ k, what one output position of every request costs.",
        *notes,
    ]
    write_results(
        args.out, "extend-cost", "Forward cost by query tokens per request", meta,
        ["batch", "context", "shared", "k", "tokens", "path", "step ms", "host ms", "graph GPU ms", "tokens/s", "ms per k"], out_rows, notes,
    )  # fmt: skip


if __name__ == "__main__":
    main()
