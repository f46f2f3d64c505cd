"""Host cost of first-visit mask rows on the CPU: the compiled trie walk vs the numpy walk, the
compiled automaton expansion (``fsm/_lazy_expand.c``) vs the Python one, and a grammar compiled
in-process vs the copy a compile process ships (fragments built whole, the automaton expanded
whole where it fits: what the engine and its row workers hold).

For each request of the ``extraction`` workload (the demo generator's held-out schemas, as
``structgen bench json`` uses them) the schema is compiled afresh and the canonical tokens of
the target JSON, or tokens drawn at random from each state's allowed set, are walked: at every token the state's mask row is fetched (computed on first
visit) and the cursor advances.  That is the mask work the engine's scheduler does for one
request when every token is sampled (jump-forward skips some of those states, so this is an
upper bound).  All variants run in the same process on the same schemas; the automaton
expansions they trigger are included in the row times.

    python benchmarks/mask_rows_cpu.py --tokenizer ../shared/fixtures/tokenizers/llama3
"""

from __future__ import annotations

import argparse
import pickle
import random
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

from _gpu_common import HERE, run_meta, write_results
from structgen.fsm import Constraint, TokenFSM, Vocabulary
from structgen.fsm.compile_process import ship_blob

from structgen import fsm
from structgen.bench.common import percentile
from structgen.demo.data import generate_examples

MAX_RANDOM_TOKENS = 200  # the extraction workload's max_tokens


def _tokens(token_fsm: Any, vocab: Vocabulary, ex: Any, walk: str, seed: int) -> Iterator[int]:
    """The tokens a request walks: its target's canonical tokens then EOS (``target``), or up to
    MAX_RANDOM_TOKENS drawn at random from each state's allowed set, as a random-weight model
    emits them (``random``; EOS only once the walk reaches it)."""
    if walk == "target":
        ids = vocab.encode_bytes(ex.target.encode())
        assert ids is not None, ex.target
        yield from [*ids, vocab.eos_token_ids[0]]
        return
    rng = random.Random(seed)
    eos = set(vocab.eos_token_ids)
    state = token_fsm.initial
    for _ in range(MAX_RANDOM_TOKENS):
        allowed = token_fsm.allowed_token_ids(state).tolist()
        body = [t for t in allowed if t not in eos]
        t = rng.choice(body) if body and (len(body) == len(allowed) or rng.random() < 0.9) else vocab.eos_token_ids[0]
        if t not in allowed:
            return
        yield t
        if t in eos:
            return
        state = token_fsm.next_state(state, t)


def _shipped(token_fsm: TokenFSM, vocab: Vocabulary) -> TokenFSM:
    """``token_fsm`` as a compile process ships it, loaded as the engine loads it."""
    copy = TokenFSM.__new__(TokenFSM)
    copy.__setstate__({**pickle.loads(ship_blob(token_fsm)), "vocab": vocab})
    return copy


def measure(vocab: Vocabulary, examples: list, compiled: bool, c_expand: bool, walk: str, shipped: bool = False) -> list:
    trie = vocab.trie
    trie.use_compiled = compiled
    row_ms: list[float] = []
    request_ms: list[float] = []
    compile_ms: list[float] = []
    tokens = 0
    for k, ex in enumerate(examples):
        t0 = time.perf_counter()
        token_fsm = fsm.compile(Constraint.json_schema(ex.schema), vocab)
        compile_ms.append((time.perf_counter() - t0) * 1e3)
        if shipped:
            token_fsm = _shipped(token_fsm, vocab)
        token_fsm.dfa.use_compiled = c_expand
        cur = token_fsm.cursor()
        spent = 0.0
        walked = list(_tokens(fsm.compile(Constraint.json_schema(ex.schema), vocab), vocab, ex, walk, k))  # on a copy: untimed
        for t in walked:
            cold = cur.state not in token_fsm._state_to_row
            t0 = time.perf_counter()
            row = token_fsm.mask_row_index(cur.state)
            dt = time.perf_counter() - t0
            spent += dt
            if cold:
                row_ms.append(dt * 1e3)
            assert token_fsm.row_allows(row, t), (ex.target, t)
            cur.advance(t)
            tokens += 1
        request_ms.append(spent * 1e3)
    return [
        walk,
        ("compiled (C)" if compiled else "numpy")
        + (", C expansion" if c_expand else ", Python expansion")
        + (", shipped copy" if shipped else ""),
        len(examples),
        tokens,
        len(row_ms),
        round(percentile(row_ms, 0.5), 3),
        round(percentile(row_ms, 0.9), 3),
        round(statistics.fmean(row_ms), 3),
        round(statistics.fmean(request_ms), 2),
        round(sum(request_ms) * 1e3 / tokens, 1),
        round(percentile(compile_ms, 0.5), 2),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokenizer", required=True, help="local Hugging Face tokenizer folder")
    ap.add_argument("--num-requests", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(HERE / "results" / "mask-rows-cpu"))
    args = ap.parse_args()
    if args.num_requests < 1:
        ap.error("--num-requests must be ≥ 1")
    vocab = Vocabulary.from_tokenizer(args.tokenizer)
    t0 = time.perf_counter()
    trie = vocab.trie
    trie_s = time.perf_counter() - t0
    if not fsm.trie.compiled_walk_available():
        sys.exit("the compiled trie walk is not built (pip install -e . with a C compiler)")
    examples = list(generate_examples(args.num_requests, "heldout", args.seed))
    variants = ((False, False, False), (True, False, False), (True, True, False), (True, True, True))
    rows = [
        measure(vocab, examples, compiled, c_expand, walk, shipped)
        for walk in ("target", "random")
        for compiled, c_expand, shipped in variants
    ]
    header = [
        "tokens walked",
        "trie walk, expansion",
        "requests",
        "tokens",
        "cold rows",
        "row ms p50",
        "row ms p90",
        "row ms mean",
        "mask ms per request",
        "mask µs per token",
        "compile ms p50",
    ]
    meta = {
        **run_meta(),
        "tokenizer": vocab.__repr__(),
        "trie": f"{trie.num_nodes} nodes, built in {trie_s:.2f} s",
        "workload": f"extraction, held-out, seed {args.seed}",
    }
    notes = [
        "Each request compiles its schema afresh (no cache) and walks either the canonical tokens of its target JSON plus EOS",
        f"(*target*) or up to {MAX_RANDOM_TOKENS} tokens drawn at random (seeded) from each state's allowed set (*random*: what a",
        "random-weight model emits, as in the GPU benchmarks);",
        "*cold rows* are first visits (the walk plus the automaton states it expands); *mask ms per request* sums every",
        "mask-row fetch of the request, cold and warm; *compile ms* leaves shipping out.  Every variant gives identical rows",
        "(tests/test_token_fsm.py, tests/test_lazy_expand.py, tests/test_length_product.py).",
    ]
    write_results(args.out, "mask-rows-cpu", "First-visit mask rows on the CPU", meta, header, rows, notes)


if __name__ == "__main__":
    main()
