"""How much first-visit mask-row work recomputes rows that already exist, on the CPU, and how much
of it a row cache keyed by the state's bounded residual language would answer.

For a seeded sample of MaskBench schemas (drawn as ``structgen bench conformance`` draws them),
each schema is compiled cold and the canonical tokens of its first valid instance are walked
(the first 64, as the conformance command's cold µs-per-token figure): at every state whose mask
row is computed on first visit, the row's content is compared with every row computed before it,
in the same grammar and in earlier ones.  A row is *new*, a *copy within the grammar* or a *copy
of an earlier grammar's row*; each class reports its rows and the milliseconds computing them.

Each such state also gets a depth-L signature: a 128-bit hash of the byte strings of at most L
bytes that lead from it to a live state, and of where acceptance lies along them (the Moore-style
refinement ``sig_d(s) = mix(acc(s), Σ_b K[b] · sig_{d-1}(δ(s, b)))`` over the automaton's
states within L bytes, byte keys shared by every grammar so that signatures compare across
grammars).  States with equal depth-L signatures have equal mask rows for every token of at most
L bytes; with L the vocabulary's longest token (128 bytes for Llama-3) the whole row is equal.
Reported: the share of first-visit rows (and of their milliseconds) whose state's signature
matched an earlier state's, in the same grammar or any, for L = 16 and the longest token; and
rows whose full-depth signature matched a row of other content (0 unless hashes collide).

    python benchmarks/row_reuse_cpu.py --tokenizer LLAMA3_TOKENIZER --maskbench MASKBENCH_DATA
"""

from __future__ import annotations

import argparse
import gc
import time
from collections import Counter, defaultdict
from typing import Any

import numpy as np
from _gpu_common import HERE, run_meta, write_results
from structgen.fsm import CompilerConfig, Constraint, GrammarCompiler, Vocabulary
from structgen.fsm.compiler_config import GC_PAUSE
from structgen.fsm.lazy_dfa import LazyDFA
from structgen.schemas import SchemaOptions

from structgen.bench.conformance import accepts_tokens, instance_texts
from structgen.bench.conformance_items import Item, load_maskbench

TIMED_TOKENS = 64
MAX_REGION = 20_000  # automaton states expanded for one grammar's signatures; past it they are skipped
_RNG = np.random.default_rng(0x51617)
_BYTE_KEYS = _RNG.integers(1, 2**63, size=(2, 256), dtype=np.uint64)  # [2, 256]
_ACC_KEYS = _RNG.integers(1, 2**63, size=2, dtype=np.uint64)  # [2]


def _mix(x: np.ndarray) -> np.ndarray:
    """A 64-bit finalizer (splitmix64's), lane by lane."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def signatures(dfa: LazyDFA, states: list[int], depth: int) -> dict[int, tuple[int, int]] | None:
    """Depth-``depth`` signatures of ``states`` (see the module docstring), expanding the
    automaton within ``depth`` bytes of them; None past ``MAX_REGION`` states."""
    dist = {s: 0 for s in states}
    frontier = list(dict.fromkeys(states))
    for d in range(depth):
        nxt: list[int] = []
        for s in frontier:
            for t in set(dfa.expand(s).tolist()):
                if t and t not in dist:
                    dist[t] = d + 1
                    nxt.append(t)
        if len(dist) > MAX_REGION:
            return None
        frontier = nxt
    region = list(dist)
    local = {s: i + 1 for i, s in enumerate(region)}  # 0: the dead state
    n, c = len(region) + 1, dfa.num_classes
    table = np.zeros((n, c), dtype=np.int64)  # [n, C] local targets; frontier rows stay dead (only their depth-0 value is read)
    for s, i in local.items():
        if dist[s] < depth:
            table[i] = [local.get(t, 0) for t in dfa.expand(s).tolist()]
    acc = np.array([False] + [bool(dfa.acc[s]) for s in region])  # [n]
    class_keys = np.zeros((2, c), dtype=np.uint64)  # [2, C] each class's byte keys summed
    with np.errstate(over="ignore"):
        for b in range(256):
            class_keys[:, dfa.class_of_byte[b]] += _BYTE_KEYS[:, b]
        sig = np.zeros((2, n), dtype=np.uint64)  # [2, n]
        sig[:, 1:] = _mix(np.where(acc[1:], _ACC_KEYS[:, None], np.uint64(1)))
        for _ in range(depth):
            nxt_sig = (sig[:, table] * class_keys[:, None, :]).sum(axis=2, dtype=np.uint64)  # [2, n]
            nxt_sig = _mix(nxt_sig + np.where(acc, _ACC_KEYS[:, None], np.uint64(0)))
            nxt_sig[:, 0] = 0
            sig = nxt_sig
    return {s: (int(sig[0, local[s]]), int(sig[1, local[s]])) for s in states}


def first_tokens(item: Item, fsm: Any, vocab: Vocabulary, options: SchemaOptions) -> list[int] | None:
    """The canonical tokens of the item's first valid instance the grammar accepts, or None."""
    for texts, valid in instance_texts(item, options):
        if valid:
            for text in texts:
                ids = vocab.encode_bytes(text.encode())
                if ids is not None and accepts_tokens(fsm, ids):
                    return ids
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokenizer", required=True, help="local Hugging Face tokenizer folder")
    ap.add_argument("--maskbench", required=True, help="JSONSchemaBench maskbench/data folder")
    ap.add_argument("--limit", type=int, default=200, help="seeded sample of N MaskBench schemas")
    ap.add_argument("--out", default=str(HERE / "results" / "row-reuse-cpu"))
    args = ap.parse_args()
    if args.limit < 1:
        ap.error("--limit must be ≥ 1")
    vocab = Vocabulary.from_tokenizer(args.tokenizer)
    vocab.prepare()
    longest = max(len(b) for b in vocab.token_bytes if b)
    depths = (16, longest)
    compiler = GrammarCompiler(vocab, CompilerConfig(cache_size=0))
    options = SchemaOptions(allow_undeclared_properties=True)
    gc.collect()
    gc.freeze()
    rows: Counter[str] = Counter()
    ms: defaultdict[str, float] = defaultdict(float)
    seen_rows: set[bytes] = set()
    seen_sig: dict[int, set[tuple[int, int]]] = {d: set() for d in depths}
    sig_rows: dict[tuple[int, int], bytes] = {}
    hits: dict[tuple[int, str], defaultdict[str, float]] = {(d, k): defaultdict(float) for d in depths for k in ("grammar", "any")}
    grammars = skipped = collisions = 0
    for item in load_maskbench(args.maskbench, args.limit, 0):
        try:
            fsm = compiler.compile(Constraint.json_schema(item.schema, options))
        except Exception:  # refused or failed: counted by the conformance command, not here
            continue
        ids = first_tokens(item, fsm, vocab, options)
        if not ids:
            continue
        grammars += 1
        walk: list[tuple[int, bytes, float]] = []  # (state, row content, ms) per first-visit row
        cur = fsm.cursor()
        with GC_PAUSE.paused():
            for t in ids[:TIMED_TOKENS]:
                s = cur.state
                fresh = not fsm.has_row(s)
                t0 = time.perf_counter_ns()
                r = cur.mask_row_index
                dt = (time.perf_counter_ns() - t0) / 1e6
                if fresh:
                    walk.append((s, fsm.row(r).tobytes(), dt))
                cur.advance(t)
        local_rows: set[bytes] = set()
        for _s, content, dt in walk:
            kind = (
                "copy within the grammar"
                if content in local_rows
                else "copy of an earlier grammar's row"
                if content in seen_rows
                else "new"
            )
            rows[kind] += 1
            ms[kind] += dt
            local_rows.add(content)
            seen_rows.add(content)
        for d in depths:
            sigs = signatures(fsm.dfa, [s for s, _, _ in walk], d)
            if sigs is None:
                skipped += 1
                continue
            local_sig: set[tuple[int, int]] = set()
            for s, content, dt in walk:
                key = sigs[s]
                for scope, pool in (("grammar", local_sig), ("any", seen_sig[d])):
                    hits[(d, scope)]["rows"] += 1
                    hits[(d, scope)]["ms"] += dt
                    if key in pool:
                        hits[(d, scope)]["hit rows"] += 1
                        hits[(d, scope)]["hit ms"] += dt
                if d == longest:
                    collisions += sig_rows.setdefault(key, content) != content
                local_sig.add(key)
                seen_sig[d].add(key)
    total_rows, total_ms = sum(rows.values()), sum(ms.values())
    table: list[list[Any]] = [
        [f"first-visit rows: {k}", rows[k], round(100 * rows[k] / total_rows, 1), round(ms[k], 1), round(100 * ms[k] / total_ms, 1)]
        for k in ("new", "copy within the grammar", "copy of an earlier grammar's row")
    ]
    for (d, scope), h in hits.items():
        label = f"signature depth {d} seen before ({'same grammar' if scope == 'grammar' else 'any grammar'})"
        table.append(
            [
                label,
                int(h["hit rows"]),
                round(100 * h["hit rows"] / max(1, h["rows"]), 1),
                round(h["hit ms"], 1),
                round(100 * h["hit ms"] / max(1.0, h["ms"]), 1),
            ]
        )
    meta = {
        **run_meta(),
        "schemas": f"{args.limit} MaskBench (seed 0), {grammars} compiled with an accepted valid instance",
        "vocabulary": f"{vocab.size} tokens, longest {longest} bytes",
        "signatures": f"skipped for {skipped} (grammar, depth) pairs past {MAX_REGION} states; full-depth matches of other content: {collisions}",
    }
    notes = [
        "*ms*: time in `mask_row_index` computing the row (trie walk and the automaton states it expands), collector paused.",
        "Signature rows count only grammars whose signatures were computed at that depth; their shares are of those grammars' rows.",
    ]
    header = ["what", "rows", "% of rows", "ms", "% of ms"]
    write_results(args.out, "row-reuse-cpu", "First-visit mask rows that repeat earlier rows, on the CPU", meta, header, table, notes)


if __name__ == "__main__":
    main()
