"""cProfile of one ``structgen bench json`` run on the GPU: where the host time of a constrained
workload goes (Llama-3-8B shapes, random bf16 weights, the real Llama-3 tokenizer).

The engine first serves an unmeasured 8-request warm-up (kernel JIT, CUDA graphs), then a fresh
engine on the same model runner (as ``bench json`` does) runs ``--num-requests`` requests of
``--workload`` at ``--concurrency`` under cProfile.  Writes the top functions by own time and
the count and mean cost of first-visit mask-row computations (``TokenFSM._compute_rows``).

    python benchmarks/profile_bench_json.py --tokenizer .carry/llama3 [--workload extraction]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _gpu_common import HERE, run_meta, write_results

from structgen.bench_json import build_workload, run
from structgen.engine import Engine, EngineConfig
from structgen.models.presets import write_preset_folder

PHASES = {  # file:function -> what it is in the engine step
    "structgen/engine.py:step": "whole step",
    "structgen/scheduler.py:schedule": "schedule",
    "structgen/model_runner.py:forward": "forward (eager + replays)",
    "structgen/flashinfer_backend.py:replay": "CUDA-graph replays",
    "structgen/scheduler.py:process_results": "process results",
    "structgen/sampling.py:sample": "sample (masks + sync)",
    "fsm/token_fsm.py:jump_forward": "jump-forward planning",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokenizer", required=True, help="Llama-3 tokenizer folder")
    ap.add_argument("--workload", default="extraction")
    ap.add_argument("--num-requests", type=int, default=128)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args()
    if args.num_requests < 1 or args.concurrency < 1 or args.top < 1:
        ap.error("--num-requests, --concurrency and --top must be ≥ 1")
    model = write_preset_folder("llama3-8b", tempfile.mkdtemp(prefix="structgen-prof-"), tokenizer_dir=args.tokenizer)
    cfg = EngineConfig(random_weights_seed=0)
    reqs = build_workload(args.workload, args.num_requests, 0)
    warm = Engine(model, cfg, tokenizer_path=args.tokenizer)
    run(warm, reqs[:8], 8, True)
    warm.close()
    engine = Engine(model, cfg, tokenizer_path=args.tokenizer, runner=warm.runner)
    prof = cProfile.Profile()
    prof.enable()
    records, wall = run(engine, reqs, args.concurrency, True)
    prof.disable()
    engine.close()
    stats = pstats.Stats(prof, stream=io.StringIO())
    rows_calls, rows_time = 0, 0.0
    phases: dict[str, tuple[int, float]] = {}
    for (file, _line, name), (_cc, nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if name == "_compute_rows" and file.endswith("token_fsm.py"):
            rows_calls, rows_time = nc, ct
        key = "/".join(Path(file).parts[-2:]) + f":{name}"  # package folder too: other projects have an engine.py
        if key in PHASES:
            phases[key] = (nc, ct)
    top = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[: args.top]  # type: ignore[attr-defined]
    table = [[f"{Path(f).name}:{line}({name})", nc, round(tt, 3), round(ct, 3)] for (f, line, name), (_cc, nc, tt, ct, _c) in top]
    meta = {**run_meta(), "workload": args.workload, "requests": len(records), "concurrency": args.concurrency}
    notes = [
        f"- wall time of the profiled run: {wall:.2f} s; valid outputs {sum(r.valid for r in records)}/{len(records)}",
        f"- first-visit mask rows (TokenFSM._compute_rows): {rows_calls} calls, {rows_time:.2f} s in all, "
        f"{1e3 * rows_time / max(1, rows_calls):.2f} ms each ({100 * rows_time / wall:.0f}% of the wall time)",
        "- engine step phases (calls, cumulative s): "
        + "; ".join(f"{PHASES[k]} {phases[k][0]} / {phases[k][1]:.2f}" for k in PHASES if k in phases),
    ]
    write_results(args.out, f"profile-bench-json-{args.workload}", "Host profile of one bench json run", meta,
                  ["function", "calls", "own s", "cumulative s"], table, notes)  # fmt: skip


if __name__ == "__main__":
    main()
