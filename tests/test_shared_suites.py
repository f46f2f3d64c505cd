"""Tests on ../shared fixtures (real tokenizers, MaskBench, JSON-Schema-Test-Suite); skipped when absent."""

from __future__ import annotations

import json
import os
import random
from typing import Any

import pytest
from structgen.fsm.errors import GrammarCompileError
from structgen.fsm.lazy_compile import compile_lazy
from structgen.fsm.token_fsm import TokenFSM
from structgen.fsm.vocab import Vocabulary
from structgen.schemas import SchemaError
from structgen.schemas.json_schema import schema_to_ir

from structgen.bench import conformance as conf
from structgen.bench import conformance_items, conformance_report

from .conftest import GPT2_DIR, shared_path
from .test_token_fsm import _simulate, check_distances

pytestmark = pytest.mark.shared

CHARACTER = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 16},
        "house": {"enum": ["Gryffindor", "Slytherin"]},
        "wand": {
            "type": "object",
            "properties": {"wood": {"type": "string"}, "length": {"type": "number"}},
            "required": ["wood", "length"],
        },
    },
    "required": ["name", "house", "wand"],
}


def _load_llama2() -> Any:
    """The Llama-2 folder holds only ``tokenizer.model``; transformers converts it."""
    shared_path("tokenizers", "llama2", "tokenizer.model")
    pytest.importorskip("sentencepiece")
    return shared_path("tokenizers", "llama2")


def test_sentencepiece_vocabulary() -> None:
    vocab = Vocabulary.from_tokenizer(_load_llama2())
    assert vocab.kind == "sentencepiece" and vocab.size == 32000
    by_bytes = {b: i for i, b in enumerate(vocab.token_bytes)}
    assert b" the" in by_bytes and b"\n" in by_bytes  # '▁the' and the <0x0A> byte-fallback token
    for text in ['{"a": 1}', " x y", "é中😀"]:
        ids = vocab.encode_bytes(text.encode())
        assert ids is not None and vocab.decode_bytes(ids) == text.encode()


@pytest.mark.parametrize("name", ["llama2", "llama3", "qwen2"])
def test_jump_forward_multibyte_real_tokenizers(name: str) -> None:
    vocab = Vocabulary.from_tokenizer(_load_llama2() if name == "llama2" else shared_path("tokenizers", name))
    node, _ = schema_to_ir(CHARACTER)
    fsm = TokenFSM(compile_lazy(node), vocab)
    text = json.dumps(
        {"name": "Hé中 😀", "house": "Slytherin", "wand": {"wood": "ébène", "length": 10.25}}, ensure_ascii=False, separators=(", ", ": ")
    ).encode()
    ids_on, fwd_on, forced = _simulate(fsm, text, jump=True)
    ids_off, fwd_off, _ = _simulate(fsm, text, jump=False)
    assert vocab.decode_bytes(ids_on) == vocab.decode_bytes(ids_off) == text
    assert forced > 0 and fwd_on < fwd_off


@pytest.mark.parametrize("name", ["llama2", "llama3", "qwen2"])
def test_real_vocabularies_spell_every_byte(name: str) -> None:
    """Budget completion's guarantee needs each byte as a token (byte-level BPE; SentencePiece
    byte fallback)."""
    vocab = Vocabulary.from_tokenizer(_load_llama2() if name == "llama2" else shared_path("tokenizers", name))
    assert vocab.covers_every_byte


def test_maskbench_distances_are_exact_and_bounded() -> None:
    """distance_to_accept against a BFS oracle, and distance_bound above it, at random states
    of 40 MaskBench schemas."""
    folder = shared_path("maskbench", "data")
    files = sorted(os.listdir(folder))
    rng = random.Random(5)
    rng.shuffle(files)
    checked = 0
    for name in files[:40]:
        with open(os.path.join(folder, name)) as f:
            schema = json.load(f)["schema"]
        try:
            dfa = compile_lazy(schema_to_ir(schema)[0])
        except (SchemaError, GrammarCompileError):  # refusals are the conformance tests' business
            continue
        assert dfa.distance_bound is not None
        checked += check_distances(dfa, rng, walks=4, max_steps=200, oracle_share=0.1)
    assert checked > 100


def _run(items: list[conformance_items.Item]) -> list[conformance_items.ItemResult]:
    conf._init_worker(GPT2_DIR, 10.0, 50_000, 3)
    return [conf.run_item(it) for it in items]


def test_maskbench_sample_is_sound_and_mostly_passing() -> None:
    items = list(conformance_items.load_maskbench(shared_path("maskbench", "data"), limit=200, seed=1))
    results = _run(items)
    s = conformance_report.summarize(results)
    assert s["soundness_violations_instances"] == 0, s["violation_examples"]
    assert s["soundness_violations_samples"] == 0, s["violation_examples"]
    assert s["passing_pct"] >= 80.0, s


def test_json_schema_test_suite_is_sound() -> None:
    items = list(conformance_items.load_test_suite(shared_path("json-schema-test-suite")))
    results = _run(items)
    s = conformance_report.summarize(results)
    assert s["soundness_violations_instances"] == 0, s["violation_examples"]
    assert s["soundness_violations_samples"] == 0, s["violation_examples"]
    assert s["compiled"] > 0


def test_precomputed_rows_equal_plain_walks_on_llama3_maskbench() -> None:
    """Eager rows (shared tails, the packed walk and its string-body skip) equal the general
    walk with no skips, state by state, on MaskBench schemas with the Llama-3 vocabulary
    (128k tokens, many of them multi-byte UTF-8)."""
    import numpy as np
    from structgen.fsm.trie import compiled_walk_available

    if not compiled_walk_available():
        pytest.skip("the C trie walk was not built (no compiler at install)")
    vocab = Vocabulary.from_tokenizer(shared_path("tokenizers", "llama3"))
    folder = shared_path("maskbench", "data")
    files = sorted(os.listdir(folder))
    rng = random.Random(7)
    rng.shuffle(files)
    checked = strings = 0
    for name in files[:30]:
        with open(os.path.join(folder, name)) as f:
            schema = json.load(f)["schema"]
        try:
            dfa = compile_lazy(schema_to_ir(schema)[0])
        except (SchemaError, GrammarCompileError):
            continue
        fsm = TokenFSM(dfa, vocab)
        fsm.precompute_rows(max_states=4000)
        states = sorted(s for s in fsm._state_to_row if s)
        for s in rng.sample(states, min(40, len(states))):
            ends = np.zeros(vocab.size, dtype=np.int32)
            plain = vocab.trie.mask_bits(dfa, s, ends=ends)  # the general walk: no skips, no shared tails
            want = plain.copy()
            if dfa.acc[s]:  # EOS where the state accepts
                for t in vocab.eos_token_ids:
                    want[t >> 5] |= np.uint32(1 << (t & 31))
            np.testing.assert_array_equal(fsm.mask_row(s).view(np.uint32), want)
            checked += 1
            strings += int(np.count_nonzero(np.asarray(dfa.expand(s))[dfa.class_of_byte] == s) >= 32)
        if checked >= 400:
            break
    assert checked >= 200 and strings >= 5, (checked, strings)


def test_mutated_maskbench_schemas_raise_only_named_errors() -> None:
    """Real-world schemas with one hostile change each (extreme or ill-typed keyword values, deep
    nesting, giant enums, broken references): the compile layer answers with an automaton or a
    named error, never another exception."""
    from structgen.fsm.dfa import Budget

    from structgen.bench.schema_fuzz import mutate_schema

    folder = shared_path("maskbench", "data")
    files = sorted(os.listdir(folder))
    rng = random.Random(11)
    checked = 0
    for name in rng.sample(files, 60):
        with open(os.path.join(folder, name)) as f:
            schema = json.load(f)["schema"]
        mutated = mutate_schema(schema, rng)
        try:
            node, _ = schema_to_ir(mutated)
            compile_lazy(node, Budget(timeout_s=5.0, max_states=20_000))
        except (SchemaError, GrammarCompileError):
            pass
        checked += 1
    assert checked == 60
