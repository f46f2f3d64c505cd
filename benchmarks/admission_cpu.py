"""Host time of one admission step (``PrefillManager.schedule``) with many requests waiting.

When 256 clients send at once, every step scores the whole waiting queue by its cached prefix
(radix ``peek_prefix_len``) and checks each request it admits against those admitted in the same
step (in-batch prefix sharing), on the engine thread, before the forward.  Prompts are random
token ids: a *shared* prefix already in the radix cache (the few-shot examples of
``shared-prefix``, a chat template's header) and a *unique* rest per request.  The table gives
the median over ``--repeats`` fresh queues of the first two steps (admission stops at the
step's token budget, 4,096 extend tokens by default).

    python benchmarks/admission_cpu.py
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
from _gpu_common import HERE, write_results

from structgen.bench.common import run_meta
from structgen.engine.cache_manager import CacheManager
from structgen.engine.prefill_manager import PrefillManager
from structgen.engine.radix_cache import RadixCache
from structgen.engine.request import Req, SamplingParams
from structgen.engine.scheduler import SchedulerConfig
from structgen.runtime.memory import KVAllocator, ReqToTokenPool

SHAPES = {  # name -> (shared tokens, unique tokens)
    "shared-prefix (4 shots)": (630, 70),
    "long unique prompts": (30, 570),
    "short prompts": (30, 70),
}


def steps_ms(shared: int, unique: int, waiting: int, rng: random.Random) -> tuple[float, float, int]:
    """(first step ms, second step ms, requests admitted by the first) on a fresh queue."""
    alloc = KVAllocator(waiting * (shared + unique) + shared + 1)
    radix = RadixCache(alloc)
    prefix = [rng.randrange(128_000) for _ in range(shared)]
    slots = alloc.alloc(shared)
    assert slots is not None
    radix.insert(prefix, slots)
    cache = CacheManager(ReqToTokenPool(waiting + 1, shared + unique + 8), alloc, radix)
    pm = PrefillManager(SchedulerConfig(), cache)
    for i in range(waiting):
        prompt = prefix + [rng.randrange(128_000) for _ in range(unique)]
        pm.add(Req(i, prompt, SamplingParams(max_tokens=200), False, None, torch.Generator(), 0.0))
    budget = SchedulerConfig().max_batch_tokens
    t0 = time.perf_counter()
    first = pm.schedule(budget=budget, num_running=0, held_room=0)
    t1 = time.perf_counter()
    pm.schedule(budget=budget, num_running=len(first), held_room=0)
    t2 = time.perf_counter()
    return (t1 - t0) * 1e3, (t2 - t1) * 1e3, len(first)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--waiting", type=int, default=256, help="requests waiting when the step starts")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(HERE / "results" / "admission-cpu"))
    args = ap.parse_args()
    if args.waiting < 1 or args.repeats < 1:
        ap.error("--waiting and --repeats must be ≥ 1")
    rng = random.Random(args.seed)
    rows = []
    for name, (shared, unique) in SHAPES.items():
        runs = [steps_ms(shared, unique, args.waiting, rng) for _ in range(args.repeats)]
        rows.append([
            name, shared, unique, runs[0][2],
            round(statistics.median(r[0] for r in runs), 2), round(statistics.median(r[1] for r in runs), 2),
        ])  # fmt: skip
    meta = {**run_meta(), "waiting": args.waiting, "repeats": args.repeats}
    header = ["prompts", "shared tokens (cached)", "unique tokens", "admitted by step 1", "step 1 ms (median)", "step 2 ms (median)"]
    write_results(args.out, "admission-cpu", "Host time of one admission step, many requests waiting (CPU)", meta, header, rows, [])


if __name__ == "__main__":
    main()
