"""Engine-side host work per cold grammar shipped from a compile process: shipped lazy, with its
NFA fragments built, or with the whole automaton expanded (what compile processes ship), and
with the automaton expanded in C (``fsm/_lazy_expand.c``) or in Python.

For each request of the ``extraction`` workload (the demo generator's held-out schemas) the
schema is compiled as a compile process does, its state pickled without the vocabulary and
loaded twice: the engine's copy and a row worker's copy.  A seeded random walk then draws each
token from the allowed set, which the row worker's copy computes (untimed, as rows come from the
workers), and times what the engine thread does with it: ``advance``, the jump-forward budget
check (``within_distance``) and the jump-forward plan.  Both variants walk the same schemas with
the same seeds in one process, the collector frozen after each load as the engine does.

With ``--maskbench`` the schemas are those of a seeded MaskBench sample whose automaton does not
fit a compile process's whole-expansion budget, shipped as compile processes ship them: the
engine's copy expands states and extends its NFA distances (the jump-forward budget check) while
it serves, in C or in Python.

    python benchmarks/cold_host_cpu.py --tokenizer LLAMA3_TOKENIZER
    python benchmarks/cold_host_cpu.py --tokenizer LLAMA3_TOKENIZER --maskbench MASKBENCH_DATA --num-requests 16 [--names FILE]
"""

from __future__ import annotations

import argparse
import gc
import pickle
import random
import statistics
import time

import numpy as np
from _gpu_common import HERE, run_meta, write_results
from structgen.fsm import CompilerConfig, Constraint, GrammarCompileError, GrammarCompiler, TokenFSM, Vocabulary
from structgen.fsm.compile_process import COMPLETE_BUDGET_S, COMPLETE_MAX_ENTRIES, FRAGMENT_BUDGET_S, FRAGMENT_MAX_NFA_STATES
from structgen.schemas.errors import ConstraintError

from structgen.demo.data import generate_examples

MAX_STEPS = 200  # the workload's max_tokens


SHIPPING = {"lazy": "lazy", "fragments": "fragments built", "complete": "fragments built, automaton expanded whole"}


def _shipped(fsm: TokenFSM, vocab: Vocabulary, shipping: str) -> tuple[bytes, TokenFSM, TokenFSM, float]:
    """What a compile process ships (``shipping``: a key of SHIPPING) and its two loads (the
    engine's copy, the row worker's); the engine load's seconds."""
    if shipping != "lazy":
        fsm.build_fragments(time.perf_counter() + FRAGMENT_BUDGET_S, FRAGMENT_MAX_NFA_STATES)
    if shipping == "complete":
        fsm.complete_dfa(time.perf_counter() + COMPLETE_BUDGET_S, COMPLETE_MAX_ENTRIES)
    state = fsm.__getstate__()
    state.pop("vocab")
    blob = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    copies = []
    load = 0.0
    for _ in range(2):
        t0 = time.perf_counter()
        copy = TokenFSM.__new__(TokenFSM)
        copy.__setstate__({**pickle.loads(blob), "vocab": vocab})
        load = load or time.perf_counter() - t0
        copies.append(copy)
    return blob, copies[0], copies[1], load


def _unfinished_maskbench(vocab: Vocabulary, root: str, n: int, seed: int, names_file: str | None) -> list:
    """The first ``n`` schemas of a seeded MaskBench sample whose automaton a compile process
    ships unfinished (its whole expansion does not fit the budget; refusals skipped): those
    whose engine copy expands states and extends NFA distances while it serves.  Which ones
    depends on the machine's speed (the budget is time), so with ``names_file`` the pick is
    read from it when it exists and written to it otherwise: runs compared take the same."""
    import os

    from structgen.bench.conformance_items import load_maskbench

    items = list(load_maskbench(root, seed=seed))
    if names_file and os.path.exists(names_file):
        with open(names_file, encoding="utf-8") as f:
            wanted = f.read().split("\n")
        by_name = {it.name: it.schema for it in items}
        unknown = [name for name in wanted if name and name not in by_name]
        if unknown:
            raise SystemExit(f"cold_host_cpu: {names_file} names schemas not in the seed-{seed} sample of {root}: {unknown[:3]}")
        return [by_name[name] for name in wanted if name]
    compiler = GrammarCompiler(vocab, CompilerConfig(cache_size=0))
    out, names = [], []
    for item in items:
        try:
            _blob, engine, _worker, _load = _shipped(compiler.compile(Constraint.json_schema(item.schema)), vocab, "complete")
        except (ConstraintError, GrammarCompileError):
            continue
        if engine.dfa.complete:
            continue
        out.append(item.schema)
        names.append(item.name)
        if len(out) == n:
            break
    if names_file:
        with open(names_file, "w", encoding="utf-8") as f:
            f.write("\n".join(names) + "\n")
    return out


def measure(vocab: Vocabulary, schemas: list, shipping: str, c_expand: bool, seed: int) -> list:
    compiler = GrammarCompiler(vocab, CompilerConfig(cache_size=0))
    per_request: list[float] = []
    ship_ms: list[float] = []
    sizes: list[int] = []
    loads: list[float] = []
    complete = 0
    tokens = 0
    nfa_loads = 0
    for k, schema in enumerate(schemas):
        t0 = time.perf_counter()
        try:
            blob, engine, worker, load = _shipped(compiler.compile(Constraint.json_schema(schema)), vocab, shipping)
        except (ConstraintError, GrammarCompileError):  # refused, or a state cap met while building fragments
            continue
        ship_ms.append((time.perf_counter() - t0) * 1e3)
        sizes.append(len(blob))
        loads.append(load * 1e3)
        complete += engine.dfa.complete
        engine.dfa.use_compiled = worker.dfa.use_compiled = c_expand
        gc.freeze()
        rng = random.Random(seed + k)
        cur = engine.cursor()
        spent = 0.0
        for _ in range(MAX_STEPS):
            shadow = worker.cursor()
            for t in cur.tokens():
                shadow.advance(t)
            bits = np.unpackbits(worker.mask_row(shadow.state).view(np.uint8), bitorder="little")[: vocab.size]
            allowed = np.setdiff1d(np.flatnonzero(bits), vocab.eos_token_ids)  # EOS ends the walk instead
            if not len(allowed) or (worker.is_accepting(shadow.state) and rng.random() < 0.3):
                break
            tok = int(allowed[rng.randrange(len(allowed))])
            t0 = time.perf_counter()
            cur.advance(tok)
            if engine.forced_bytes(cur.state) and engine.within_distance(cur.state, MAX_STEPS):
                plan = cur.peek_jump_forward(max_rollback=3)
                if plan is not None:
                    cur.apply_jump_forward(plan)
            spent += time.perf_counter() - t0
            tokens += 1
        per_request.append(spent * 1e3)
        nfa_loads += getattr(engine.dfa, "nfa_loaded", True) and not engine.dfa.complete
    return [
        SHIPPING[shipping],
        "C" if c_expand else "Python",
        complete,
        len(per_request),
        tokens,
        round(statistics.fmean(per_request), 2),
        round(sum(per_request) * 1e3 / tokens, 1),
        round(statistics.fmean(ship_ms), 2),
        round(statistics.fmean(sizes) / 1e3, 1),
        round(statistics.median(loads), 3),
        round(statistics.fmean(loads), 3),
        nfa_loads,
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokenizer", required=True, help="local Hugging Face tokenizer folder")
    ap.add_argument("--num-requests", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--maskbench", default=None, help="JSONSchemaBench maskbench/data folder: a seeded sample of its schemas instead")
    ap.add_argument("--names", default=None, help="with --maskbench: the schemas' names, read if the file exists, else written")
    ap.add_argument("--out", default=str(HERE / "results" / "cold-host-cpu"))
    args = ap.parse_args()
    if args.num_requests < 1:
        ap.error("--num-requests must be ≥ 1")
    vocab = Vocabulary.from_tokenizer(args.tokenizer)
    vocab.prepare()
    if args.maskbench:
        schemas = _unfinished_maskbench(vocab, args.maskbench, args.num_requests, args.seed, args.names)
        variants = [("complete", False), ("complete", True)]
        workload = f"MaskBench, the first {len(schemas)} schemas of the seed-{args.seed} sample shipped unfinished"
    else:
        schemas = [e.schema for e in generate_examples(args.num_requests, "heldout", args.seed)]
        variants = [("lazy", False), ("lazy", True), ("fragments", False), ("fragments", True), ("complete", True)]
        workload = f"extraction, held-out, seed {args.seed}"
    rows = [measure(vocab, schemas, shipping, c_expand, args.seed) for shipping, c_expand in variants]
    header = [
        "shipped",
        "expansion",
        "shipped whole",
        "requests",
        "sampled tokens",
        "engine ms per request",
        "engine µs per token",
        "compile + ship ms",
        "shipped KB",
        "engine load ms (p50)",
        "mean",
        "NFA loaded by the walk",
    ]
    meta = {**run_meta(), "workload": workload, "vocabulary": f"{vocab.size} tokens"}
    notes = [
        "*expansion*: automaton states expanded, and NFA distances extended, in C or in Python;",
        "*engine ms per request*: advance + jump-forward budget check + plan on the engine's copy, summed over a",
        "request's walk (tokens drawn at random from the allowed set, seeded); mask rows come from the worker's copy, untimed.",
        "*compile + ship ms*: compile, fragments (when built; at most the compile processes' budget), the whole",
        "expansion (when asked; within the compile processes' budget), pickle and two loads; *shipped whole*: schemas",
        "whose automaton was complete when shipped (no NFA); *engine load ms*: unpickling the engine's copy;",
        "*NFA loaded by the walk*: unfinished engine copies whose NFA side was loaded by the end of their walk (a tree that",
        "loads it with the grammar counts every unfinished one).",
    ]
    write_results(
        args.out,
        "cold-host-cpu-maskbench" if args.maskbench else "cold-host-cpu",
        "Engine-side host work on cold grammars shipped from a compile process",
        meta,
        header,
        rows,
        notes,
    )


if __name__ == "__main__":
    main()
