"""Where a cold compile's time goes, on the CPU: the 16 median MaskBench schemas, the trie walks,
a JSON string's loop state and the garbage collector.

Rows (all wall-clock, this process alone on the machine):

- ``split``: over the schemas of ``MEDIAN`` (compiled as ``structgen bench
  conformance`` does), the sum of each schema's fastest of ``--repeats`` cold compiles, split into
  schema → IR, automaton start (``compile_lazy``), the initial row, and ``precompute_rows`` (every
  reachable row);
- ``inside``: one more pass with the compiled walks and the lazy automaton's expansions timed
  (wrappers around ``_trie_walk.walk`` / ``walk_bits`` and the outermost ``LazyDFA.expand``);
- ``full walk``: one walk of the whole trie from a state that accepts every byte, with the general
  ``walk`` and with ``walk_bits`` (median of 7);
- ``string state``: ``mask_bits`` of a JSON string's loop state with the string-body skip and with
  the loop bytes alone (``BODY_MAX_STATES = 1``), median of 21, bits compared;
- ``gc``: four passes over the schemas in one process through ``GrammarCompiler`` (eager rows),
  with ``pause_gc`` off and on; the collector's cost grows with the process's heap.

Rows whose feature the checked-out code lacks are left out, so the script also runs on older
trees (a baseline).

    python benchmarks/compile_cpu.py --tokenizer ../shared/fixtures/tokenizers/llama3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _gpu_common import HERE, run_meta, write_results
from structgen.fsm import CompilerConfig, Constraint, GrammarCompiler, Vocabulary, lazy_dfa, trie_bodies
from structgen.fsm import trie as trie_mod
from structgen.fsm.dfa import Budget
from structgen.fsm.lazy_compile import compile_lazy
from structgen.fsm.token_fsm import TokenFSM
from structgen.schemas.schema_options import SchemaOptions

STRING = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a", "b"]}

MEDIAN = (  # 16 compiled schemas around the median first mask of MaskBench (d4360a7)
    "Github_medium---o61603 Github_medium---o31638 Github_easy---o73015 Github_medium---o9511 "
    "Github_easy---o69514 Glaiveai2K---calculate_area_104f2a83 Github_hard---o89724 "
    "Github_easy---o70017 Github_hard---o5399 Github_medium---o82281 Github_medium---o61623 "
    "Github_medium---o79423 Glaiveai2K---calculate_area_1b99ac0a Github_easy---o42984 "
    "Github_medium---o61598 Glaiveai2K---calculate_area_c9e24995 "
).split()


def load(maskbench: str) -> list[Constraint]:
    out = []
    for name in MEDIAN:
        schema = json.loads(Path(maskbench, f"{name}.json").read_text())
        out.append(Constraint.json_schema(schema.get("schema", schema), SchemaOptions(allow_undeclared_properties=True)))
    return out


def split(v: Vocabulary, c: Constraint) -> list[float]:
    """ms of IR, compile_lazy, first row, precompute_rows, total for one cold compile."""
    t0 = time.perf_counter()
    b = Budget(timeout_s=10.0, max_states=50_000)
    node = c.to_ir(check=b.check_time)
    t1 = time.perf_counter()
    dfa = compile_lazy(node, b)
    t2 = time.perf_counter()
    fsm = TokenFSM(dfa, v)
    fsm.mask_row_index(fsm.initial)
    t3 = time.perf_counter()
    fsm.precompute_rows(max_states=50_000)
    t4 = time.perf_counter()
    return [(t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t4 - t3) * 1e3, (t4 - t0) * 1e3]


def inside(v: Vocabulary, cs: list[Constraint]) -> dict[str, float]:
    """ms spent in the compiled walks and in outermost expansions over one pass."""
    acc = {"walk": 0.0, "expand": 0.0}
    saved: dict[str, Any] = {}

    def timed(fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*a: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a)
            finally:
                acc["walk"] += time.perf_counter() - t

        return call

    for name in ("_c_walk", "_c_walk_bits"):
        if getattr(trie_mod, name, None) is not None:
            saved[name] = getattr(trie_mod, name)
            setattr(trie_mod, name, timed(saved[name]))
    expand = lazy_dfa.LazyDFA.expand
    depth = [0]

    def outer(self: Any, state: int) -> Any:
        if depth[0]:
            return expand(self, state)
        depth[0] += 1
        t = time.perf_counter()
        try:
            return expand(self, state)
        finally:
            acc["expand"] += time.perf_counter() - t
            depth[0] -= 1

    lazy_dfa.LazyDFA.expand = outer  # type: ignore[method-assign]
    try:
        t0 = time.perf_counter()
        for c in cs:
            split(v, c)
        total = time.perf_counter() - t0
    finally:
        lazy_dfa.LazyDFA.expand = expand  # type: ignore[method-assign]
        for name, fn in saved.items():
            setattr(trie_mod, name, fn)
    return {"total": total * 1e3, "walk": acc["walk"] * 1e3, "expand": acc["expand"] * 1e3}


def median_us(fn: Callable[[], Any], n: int) -> float:
    fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def full_walks(v: Vocabulary) -> list[list[Any]]:
    trie = v.trie
    dfa = compile_lazy(Constraint.regex(r"(.|\n)*").to_ir(), Budget(timeout_s=10))  # any text
    s = dfa.initial
    k = 1
    while k < dfa.num_states:  # expand every state, so that neither walk stops to expand
        dfa.expand(k)
        k += 1
    cob = np.ascontiguousarray(dfa.class_of_byte, dtype=np.int32)
    words = (v.size + 31) // 32

    def general() -> None:
        stack = np.zeros(trie.max_depth + 1, dtype=np.int32)
        trie_mod._c_walk(dfa.table, dfa.num_classes, cob, trie.pre_byte, trie.pre_depth, trie.pre_skip, trie.pre_token, s, 0, stack,
                      np.zeros(words, np.uint32), None)  # fmt: skip

    rows: list[list[Any]] = [["full walk", "walk (general)", round(median_us(general, 7)), "µs"]]
    if getattr(trie_mod, "_c_walk_bits", None) is not None:
        nodes = trie.packed_nodes(trie_order=False).view(np.uint8)

        def packed() -> None:
            stack = np.zeros(trie.max_depth + 1, dtype=np.int32)
            trie_mod._c_walk_bits(dfa.table, dfa.num_classes, cob, nodes, s, 0, stack, np.zeros(words, np.uint32))

        rows.append(["full walk", "walk_bits (packed)", round(median_us(packed, 7)), "µs"])
    return rows


def string_state(v: Vocabulary) -> list[list[Any]]:
    node = Constraint.json_schema(STRING).to_ir()
    dfa = compile_lazy(node, Budget(timeout_s=10))
    s = dfa.walk(dfa.initial, b'{"a": "')
    rows: list[list[Any]] = []
    cap = getattr(trie_bodies, "BODY_MAX_STATES", None)
    body = v.trie.mask_bits(dfa, s)
    rows.append(
        [
            "string state",
            "mask_bits" + (" (body skip)" if cap is not None else ""),
            round(median_us(lambda: v.trie.mask_bits(dfa, s), 21)),
            "µs",
        ]
    )
    if cap is not None:
        trie_bodies.BODY_MAX_STATES = 1  # the loop bytes alone
        try:
            loop_only = v.trie.mask_bits(dfa, s)
            rows.append(["string state", "mask_bits (loop bytes only)", round(median_us(lambda: v.trie.mask_bits(dfa, s), 21)), "µs"])
        finally:
            trie_bodies.BODY_MAX_STATES = cap
        if not np.array_equal(body, loop_only):
            raise SystemExit("the body skip and the loop-only walk disagree")
    return rows


def gc_passes(v: Vocabulary, cs: list[Constraint], passes: int) -> list[list[Any]]:
    fields = {f.name for f in dataclasses.fields(CompilerConfig)}
    rows: list[list[Any]] = []
    for pause in (False, True) if "pause_gc" in fields else (None,):
        kw: dict[str, Any] = dict(timeout_s=10.0, max_states=50_000, cache_size=2, precompute_states=50_000)
        if pause is not None:
            kw["pause_gc"] = pause
        totals = []
        for _ in range(passes):
            t0 = time.perf_counter()
            for c in cs:
                GrammarCompiler(v, CompilerConfig(**kw)).compile(c)
            totals.append(round((time.perf_counter() - t0) * 1e3))
        label = "default (no pause_gc field)" if pause is None else f"pause_gc={pause}"
        rows.append(["gc", f"{passes} passes, {label}", " / ".join(map(str, totals)), "ms per pass"])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--maskbench", default=str(HERE.parent.parent / "shared/fixtures/maskbench/data"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gc-passes", type=int, default=4)
    ap.add_argument("--out", default=str(HERE / "results" / "compile-cpu"))
    ap.add_argument("--stem", default="compile-cpu")
    args = ap.parse_args()
    if args.repeats < 1 or args.gc_passes < 1:
        ap.error("--repeats and --gc-passes must be ≥ 1")
    if not Path(args.maskbench).is_dir():
        ap.error(f"--maskbench: no folder {args.maskbench}")
    v = Vocabulary.from_tokenizer(args.tokenizer)
    v.prepare()
    cs = load(args.maskbench)
    best = [[float("inf")] * 5 for _ in cs]
    for _ in range(args.repeats):
        for k, c in enumerate(cs):
            best[k] = [min(a, b) for a, b in zip(best[k], split(v, c))]
    sums = [round(sum(col), 1) for col in zip(*best)]
    rows: list[list[Any]] = [
        ["split", name, value, "ms, sum of per-schema min"]
        for name, value in zip(("schema → IR", "compile_lazy", "initial row", "precompute_rows", "total"), sums)
    ]
    got = inside(v, cs)
    rows += [["inside", f"one pass: {k}", round(x), "ms"] for k, x in got.items()]
    rows += full_walks(v)
    rows += string_state(v)
    rows += gc_passes(v, cs, args.gc_passes)
    write_results(
        args.out,
        args.stem,
        "Cold compile time on the CPU: where it goes",
        run_meta(),
        ["part", "measure", "value", "unit"],
        rows,
        [f"Schemas: the {len(cs)} median MaskBench schemas of `compile_cpu.MEDIAN`; split: fastest of {args.repeats} per schema."],
    )


if __name__ == "__main__":
    main()
