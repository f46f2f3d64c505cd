"""FlashInfer attention (eager and CUDA-graph decode) against the torch backend on the GPU.

Drives six ModelRunners over the same bf16 checkpoint in lockstep (torch backend, FlashInfer
eager, CUDA-graph decode on FlashInfer's decode kernel and on the Triton split-KV kernel, extend
graphs on FlashInfer's FA2 prefill kernel, and small extends replayed as decode rows, one per
token) through prefill, decode, chunked prefill, a
reused radix prefix, a mixed extend + decode batch (a jump-forward chain among decodes) and
further decode steps, for a Llama (GQA) and a Mistral (sliding window) configuration, and reports the
logits' largest absolute difference and top-1 agreement per scenario.

    python benchmarks/gpu_correctness.py [--models llama-gqa,mistral-window] [--out benchmarks/results]

Head dimension 128, as in Llama-3-8B, so FlashInfer's kernels for the serving benchmarks serve here too.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch
from _gpu_common import run_meta

from structgen.engine import EngineConfig, SchedulerConfig
from structgen.engine.model_runner import ModelRunner
from structgen.runtime.attention import ForwardBatch
from structgen.runtime.memory import MemoryConfig

HERE = Path(__file__).resolve().parent
GPT2_DIR = HERE.parent / "tests" / "fixtures" / "gpt2"


def model_configs() -> dict[str, object]:
    from transformers import LlamaConfig, MistralConfig

    common: dict[str, Any] = dict(
        vocab_size=50257, hidden_size=1024, intermediate_size=2048, num_hidden_layers=3, num_attention_heads=8,
        num_key_value_heads=2, max_position_embeddings=1024, bos_token_id=50256, eos_token_id=50256,
    )  # fmt: skip
    return {"llama-gqa": LlamaConfig(**common), "mistral-window": MistralConfig(sliding_window=24, **common)}


class Lockstep:
    """The same requests driven through several runners; slots come from each runner's own
    (deterministic) allocator, so the layouts are identical."""

    def __init__(self, runners: dict[str, ModelRunner], seqs: dict[str, list[int]]) -> None:
        self.runners = runners
        self.seqs = seqs
        self.rows: dict[tuple[str, str], int] = {}  # (sequence, runner) -> req-to-token row
        self.lens: dict[str, int] = {}

    def _row(self, name: str, key: str) -> int:
        if (name, key) not in self.rows:
            row = self.runners[key].req_to_token.alloc()
            assert row is not None
            self.rows[name, key] = row
            self.lens.setdefault(name, 0)
        return self.rows[name, key]

    def share(self, name: str, source: str, n: int) -> None:
        """Start ``name`` on ``source``'s first ``n`` KV slots (a radix-cache hit)."""
        for key, r in self.runners.items():
            table = r.req_to_token.req_to_token_cpu
            table[self._row(name, key), :n] = table[self.rows[source, key], :n]
        self.lens[name] = n

    def step(self, parts: list[tuple[str, int]], last_only: bool = False) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
        """Extend each ``(name, n)`` by its next ``n`` tokens; returns float32 logits of every
        extended position ``[sum n, V]`` (``last_only``: of each request's last one, as the
        engine samples) per runner, and how each runner ran the forward."""
        out: dict[str, torch.Tensor] = {}
        kinds: dict[str, str] = {}
        for key, r in self.runners.items():
            ids, pos, locs, rows, prefix, ext = [], [], [], [], [], []
            for name, n in parts:
                row = self._row(name, key)
                start = self.lens[name]
                slots = r.allocator.alloc(n)
                assert slots is not None
                r.req_to_token.req_to_token_cpu[row, start : start + n] = slots
                ids += self.seqs[name][start : start + n]
                pos += list(range(start, start + n))
                locs += slots.tolist()
                rows.append(row)
                prefix.append(start)
                ext.append(n)
            sample = list(itertools.accumulate(ext, initial=-1))[1:] if last_only else list(range(len(ids)))
            batch = ForwardBatch(torch.tensor(ids), torch.tensor(pos), torch.tensor(locs), rows, prefix, ext, sample)
            before = r.forward_counts.copy()
            out[key] = r.forward(batch).float().clone()
            (kinds[key],) = (r.forward_counts - before).keys()
        for name, n in parts:
            self.lens[name] += n
        return out, kinds


def compare(config: object, device: torch.device, workdir: str) -> list[dict[str, object]]:
    """Run the scenarios on ``config``; one record per (scenario, runner vs torch)."""
    from structgen.models import write_random_checkpoint

    path = write_random_checkpoint(Path(workdir), config, seed=0, dtype=torch.bfloat16, tokenizer_dir=GPT2_DIR)
    mem = MemoryConfig(max_total_tokens=4096, max_context=512)

    def runner(**kw: Any) -> ModelRunner:
        cfg = EngineConfig(device=str(device), memory=mem, scheduler=SchedulerConfig(max_running_requests=16), **kw)
        return ModelRunner(str(path), cfg)

    runners = {
        "torch": runner(attention_backend="torch"),
        "flashinfer": runner(attention_backend="flashinfer", cuda_graph=False),
        "flashinfer+graph": runner(attention_backend="flashinfer", cuda_graph=True, cuda_graph_max_bs=8, decode_kernel="flashinfer"),
        "flashinfer+graph, triton decode": runner(
            attention_backend="flashinfer", cuda_graph=True, cuda_graph_max_bs=8, decode_kernel="triton"
        ),
        "flashinfer+graph, auto prefill": runner(
            attention_backend="flashinfer", cuda_graph=True, cuda_graph_max_bs=8, prefill_kernel="auto"
        ),
        "flashinfer+graph, extends as extends": runner(
            attention_backend="flashinfer", cuda_graph=True, cuda_graph_max_bs=8, extend_as_decode=False
        ),
    }
    g = torch.Generator().manual_seed(1)
    seq = {n: torch.randint(0, 50000, (256,), generator=g).tolist() for n in "ABCDEFG"}
    seq["E"] = seq["B"][:64] + seq["E"][64:]
    ls = Lockstep(runners, seq)
    scenarios: list[tuple[str, list[tuple[str, int]]]] = [
        ("prefill", [("A", 37), ("B", 64), ("C", 5)]),
        ("decode", [("A", 1), ("B", 1), ("C", 1)]),
        ("chunked prefill 1/2", [("D", 60)]),
        ("chunked prefill 2/2", [("D", 90)]),
        ("reused prefix", [("E", 20)]),
        ("mixed extend+decode", [("A", 1), ("B", 4), ("F", 30), ("C", 1), ("D", 1)]),
    ]
    scenarios += [(f"decode step {i}", [(n, 1) for n in "ABCDEF"]) for i in range(1, 6)]
    # sampled like the engine (last row per request): small extends replay the extend graphs
    scenarios += [
        ("jump-forward extend, last rows", [("A", 1), ("B", 6), ("C", 1), ("D", 3), ("E", 1), ("F", 2)]),
        ("single chain, last row", [("B", 9)]),
        ("short prefill joins decodes, last rows", [("A", 1), ("G", 40), ("C", 1)]),
    ]
    records: list[dict[str, object]] = []
    for title, parts in scenarios:
        if title == "reused prefix":
            ls.share("E", "B", 64)
        logits, kinds = ls.step(parts, last_only="last row" in title)
        ref = logits["torch"]
        for key in (
            "flashinfer",
            "flashinfer+graph",
            "flashinfer+graph, triton decode",
            "flashinfer+graph, fa2 prefill",
            "flashinfer+graph, extends as decodes",
        ):
            got = logits[key]
            diff = (got - ref).abs().max().item()
            scale = ref.abs().max().item()
            agree = (got.argmax(-1) == ref.argmax(-1)).float().mean().item()
            records.append(
                {"scenario": title, "runner": key, "forward": kinds[key], "graph_replay": kinds[key] != "eager",
                 "tokens": int(ref.shape[0]), "max_abs_diff": diff, "ref_max_abs": scale, "top1_agreement": agree}
            )  # fmt: skip
    return records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(model_configs()), help="comma list of " + ", ".join(model_configs()))
    ap.add_argument("--out", default=str(HERE / "results" / "decode"))
    args = ap.parse_args()
    configs = model_configs()
    unknown = sorted(set(args.models.split(",")) - set(configs))
    if unknown:
        ap.error(f"unknown model {', '.join(unknown)}; choose from {', '.join(configs)}")
    device = torch.device("cuda")
    rows: list[dict[str, object]] = []
    for name in args.models.split(","):
        cfg = configs[name]
        with tempfile.TemporaryDirectory() as tmp:
            for r in compare(cfg, device, tmp):
                rows.append({"model": name, **r})
    worst = max(float(r["max_abs_diff"]) / max(float(r["ref_max_abs"]), 1e-6) for r in rows)  # type: ignore[arg-type]
    meta = {**run_meta(), "worst_relative_diff": round(worst, 5)}
    os.makedirs(args.out, exist_ok=True)
    Path(args.out, "gpu-correctness.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [
        "# FlashInfer vs torch attention backend (bf16 logits)",
        "",
        *(f"- {k}: {v}" for k, v in meta.items()),
        "",
        "| model | scenario | runner | forward | tokens | max abs diff | max abs logit | top-1 agreement |",
        "|---|---|---|---|---|---|---|---|",
        *(
            f"| {r['model']} | {r['scenario']} | {r['runner']} | {r['forward']} | {r['tokens']} | {float(r['max_abs_diff']):.4f} | {float(r['ref_max_abs']):.3f} | {float(r['top1_agreement']):.3f} |"  # type: ignore[arg-type]
            for r in rows
        ),
    ]
    Path(args.out, "gpu-correctness.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
