"""CPU engine benchmarks on the embedded default model (random-weight Llama, GPT-2 tokenizer).

1. radix: 32 requests sharing a 512-token prefix; prompt tokens computed by prefill with the
   radix cache on vs off (target: ≥ 90% fewer with it on).
2. jump-forward: SGLang's ``json_jump_forward`` character regex over the 50 names of
   ``structgen/bench/data/harry_potter_names.txt``; model forwards with jump-forward on vs
   off (target: ≥ 40% fewer), forced-token share, wall time.

Usage: ``python benchmarks/engine_cpu.py [--out benchmarks/results] [--names FILE]``.
Writes ``engine-cpu.json`` and ``engine-cpu.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from structgen import Constraint, Engine, EngineConfig, GenerateRequest, SamplingParams
from structgen.bench.common import run_meta
from structgen.bench.workloads import ASSETS, CHARACTER_REGEX
from structgen.engine.scheduler import SchedulerConfig
from structgen.models.presets import write_random_preset_checkpoint
from structgen.runtime.memory import MemoryConfig

GPT2_DIR = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "gpt2"


def _engine(path: str, **sched: Any) -> Engine:
    return Engine(
        path,
        EngineConfig(
            device="cpu",
            memory=MemoryConfig(max_total_tokens=65536, max_context=2048),
            scheduler=SchedulerConfig(max_running_requests=64, **sched),
        ),
    )


def bench_radix(path: str) -> dict[str, Any]:
    g = torch.Generator().manual_seed(0)
    prefix = torch.randint(0, 50000, (512,), generator=g).tolist()
    prompts = [prefix + torch.randint(0, 50000, (8,), generator=g).tolist() for _ in range(32)]
    out: dict[str, Any] = {"requests": 32, "shared_prefix_tokens": 512, "suffix_tokens": 8, "max_tokens": 16}
    for radix in (False, True):
        with _engine(path, radix_cache=radix) as eng:
            t0 = time.perf_counter()
            res = eng.generate([GenerateRequest(p, SamplingParams(max_tokens=16)) for p in prompts])
            wall = time.perf_counter() - t0
            st = eng.stats()
            out["on" if radix else "off"] = {
                "prefill_tokens_computed": st.prefill_tokens_computed,
                "cache_hit_tokens": st.cache_hit_tokens,
                "forwards": st.forwards,
                "wall_s": round(wall, 3),
                "texts": [r.text for r in res],
            }
    on, off = out["on"], out["off"]
    out["same_outputs"] = on.pop("texts") == off.pop("texts")
    out["prefill_drop"] = 1 - on["prefill_tokens_computed"] / off["prefill_tokens_computed"]
    return out


def bench_jump_forward(path: str, names: list[str]) -> dict[str, Any]:
    constraint = Constraint.regex(CHARACTER_REGEX)
    prompts = [f"{n} is a character in Harry Potter. Please fill in the following information about this character.\n" for n in names]
    out: dict[str, Any] = {"requests": len(prompts), "max_tokens": 256}
    for jf in (False, True):
        with _engine(path, jump_forward=jf) as eng:
            eng.generate([GenerateRequest(prompts[0], SamplingParams(max_tokens=256), constraint)])  # compile + warm
            base = eng.stats().forwards
            t0 = time.perf_counter()
            res = eng.generate([GenerateRequest(p, SamplingParams(max_tokens=256), constraint) for p in prompts])
            wall = time.perf_counter() - t0
            import re

            valid = sum(1 for r in res if r.finish_reason == "stop" and re.fullmatch(CHARACTER_REGEX, r.text))
            completion = sum(r.usage.completion_tokens for r in res)
            forced = sum(r.usage.forced_tokens for r in res)
            out["on" if jf else "off"] = {
                "engine_forwards": eng.stats().forwards - base,
                "request_forwards": sum(r.usage.forwards for r in res),
                "completion_tokens": completion,
                "forced_tokens": forced,
                "sampled_tokens": sum(r.usage.sampled_tokens for r in res),
                "rolled_back_tokens": sum(r.usage.rolled_back_tokens for r in res),
                "forced_share": forced / completion if completion else 0.0,
                "valid": valid,
                "wall_s": round(wall, 3),
            }
    on, off = out["on"], out["off"]
    out["request_forward_drop"] = 1 - on["request_forwards"] / off["request_forwards"]
    out["engine_forward_drop"] = 1 - on["engine_forwards"] / off["engine_forwards"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/engine-cpu")
    ap.add_argument("--names", default=str(ASSETS / "harry_potter_names.txt"))
    ap.add_argument("--tokenizer", default=str(GPT2_DIR), help="GPT-2 tokenizer folder (default: the test fixture)")
    args = ap.parse_args()
    if not os.path.isfile(args.names):
        print(f"names file {args.names!r} not found", file=sys.stderr)
        return 2
    names = [line.strip() for line in Path(args.names).read_text().splitlines() if line.strip()]
    path = str(write_random_preset_checkpoint("llama-gpt2-small", tempfile.mkdtemp(prefix="structgen-engine-bench-"), args.tokenizer))
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    radix = bench_radix(path)
    jf = bench_jump_forward(path, names)
    meta = {
        **run_meta(),
        "model": "preset llama-gpt2-small: seeded random-weight Llama (2 layers, hidden 128), GPT-2 tokenizer, float32",
    }
    result = {"meta": meta, "radix": radix, "jump_forward": jf}
    os.makedirs(args.out, exist_ok=True)
    Path(args.out, "engine-cpu.json").write_text(json.dumps(result, indent=1) + "\n")
    md = [
        "# Engine benchmarks (CPU)",
        "",
        f"- command: `{meta['command']}`",
        f"- machine: {meta['machine']}; commit {meta['commit']}, {meta['date']}",
        f"- model: {meta['model']}",
        "",
        "## Radix cache: 32 requests sharing a 512-token prefix (8-token suffixes, 16 new tokens)",
        "",
        "| radix cache | prompt tokens computed by prefill | cache hit tokens | forwards | wall s |",
        "|---|---|---|---|---|",
        *(
            f"| {k} | {radix[k]['prefill_tokens_computed']} | {radix[k]['cache_hit_tokens']} | {radix[k]['forwards']} | {radix[k]['wall_s']} |"
            for k in ("off", "on")
        ),
        "",
        f"Prefill tokens computed drop by **{radix['prefill_drop']:.1%}** (target ≥ 90%); identical outputs: {radix['same_outputs']}.",
        "",
        f"## Jump-forward: SGLang character regex, {jf['requests']} names, greedy, max 256 tokens",
        "",
        "| jump-forward | forwards (per request, summed) | engine forwards | completion tokens | forced | sampled | rolled back | forced share | valid | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {k} | {jf[k]['request_forwards']} | {jf[k]['engine_forwards']} | {jf[k]['completion_tokens']} | {jf[k]['forced_tokens']} | "
            f"{jf[k]['sampled_tokens']} | {jf[k]['rolled_back_tokens']} | {jf[k]['forced_share']:.1%} | {jf[k]['valid']}/{jf['requests']} | {jf[k]['wall_s']} |"
            for k in ("off", "on")
        ),
        "",
        f"Forwards drop by **{jf['request_forward_drop']:.1%}** per request (target ≥ 40%) and {jf['engine_forward_drop']:.1%} "
        "engine-wide (the requests run as one continuous batch, so engine forwards track the longest request).",
        "",
    ]
    Path(args.out, "engine-cpu.md").write_text("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
