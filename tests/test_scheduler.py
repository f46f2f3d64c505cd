"""Admission policy of the PrefillManager (longest cached prefix first, aging, in-batch sharing) and a request's output-byte cache."""

from __future__ import annotations

import torch
from structgen.fsm import Vocabulary

from structgen.engine.cache_manager import CacheManager
from structgen.engine.prefill_manager import PrefillManager
from structgen.engine.radix_cache import RadixCache
from structgen.engine.request import Req, SamplingParams
from structgen.engine.scheduler import SchedulerConfig
from structgen.runtime.memory import KVAllocator, ReqToTokenPool


def _req(rid: int, prompt: list[int]) -> Req:
    return Req(rid, prompt, SamplingParams(max_tokens=4), False, None, torch.Generator(), 0.0)


def _setup(rows: int = 8, **cfg: int) -> tuple[PrefillManager, CacheManager]:
    alloc = KVAllocator(1000)
    radix = RadixCache(alloc)
    cached = list(range(1, 21))
    slots = alloc.alloc(20)
    assert slots is not None
    radix.insert(cached, slots)
    cache = CacheManager(ReqToTokenPool(rows, 128), alloc, radix)
    return PrefillManager(SchedulerConfig(**cfg), cache), cache


def test_longest_prefix_first_then_aging() -> None:
    pm, cache = _setup(rows=1, aging_tokens_per_step=16)  # one request runs at a time
    a = _req(0, list(range(50, 60)))  # arrives first, nothing cached
    b = _req(1, [*range(1, 21), 99])  # 20 cached tokens
    pm.add(a)
    pm.add(b)
    ((got, n),) = pm.schedule(budget=100, num_running=0, held_room=0)
    assert got is b and n == 1 and b.cached_tokens == 20  # only the uncached token is computed
    cache.unadmit(b)  # b leaves: its row, the only one, is free again
    d = _req(2, [*range(1, 21), 98])
    pm.add(d)
    ((got, _n),) = pm.schedule(budget=100, num_running=0, held_room=0)
    assert got is d  # a waited 1 step: 16 < 20
    cache.unadmit(d)
    e = _req(3, [*range(1, 21), 97])
    pm.add(e)
    ((got, _n),) = pm.schedule(budget=100, num_running=0, held_room=0)
    assert got is a  # a waited 2 steps: 32 > 20, it no longer starves


def test_in_batch_prefix_sharing_and_chunking() -> None:
    pm, cache = _setup(in_batch_prefix_min=8)
    shared = list(range(200, 240))
    first, second = _req(0, [*shared, 1]), _req(1, [*shared, 2])
    other = _req(2, list(range(300, 310)))
    for r in (first, second, other):
        pm.add(r)
    admitted = pm.schedule(budget=100, num_running=0, held_room=0)
    # second shares 40 uncached tokens with first: it waits a step to reuse them
    assert [(r.rid, n) for r, n in admitted] == [(0, 41), (2, 10)]
    first.kv_len += 41  # what process_results does after the forward
    cache.cache_prefix(first)
    ((got, n),) = pm.schedule(budget=100, num_running=2, held_room=0)
    assert got is second and n == 1 and second.cached_tokens == 40
    long = _req(3, list(range(400, 480)))
    pm.add(long)
    ((got, n),) = pm.schedule(budget=30, num_running=3, held_room=0)
    assert got is long and n == 30 and long.pending == 80  # a first chunk of 30 at the step's token budget
    assert cache.req_to_token.available == 8 - 4


def test_in_batch_sharing_is_found_whatever_was_admitted_between() -> None:
    """A waiting prompt sharing an uncached prefix with any request admitted in the step waits,
    however many unrelated ones were admitted before or after that one (prompts sort around
    it)."""
    pm, _cache = _setup(rows=16, in_batch_prefix_min=8)
    shared = list(range(500, 540))
    reqs = [
        _req(0, [600, *range(700, 720)]),
        _req(1, [*shared, 1]),
        _req(2, [550, *range(800, 820)]),
        _req(3, [499, *range(900, 920)]),
        _req(4, [*shared, 2]),  # shares 40 uncached tokens with request 1
        _req(5, [*shared[:5], 3]),  # 5 shared tokens: below the minimum, admitted
        _req(6, [600, *range(700, 720), 4]),  # shares 21 with request 0
    ]
    for r in reqs:
        pm.add(r)
    admitted = pm.schedule(budget=1000, num_running=0, held_room=0)
    assert sorted(r.rid for r, _n in admitted) == [0, 1, 2, 3, 5]


def test_output_bytes_survive_rollbacks_and_stop_search_rescans_what_they_removed() -> None:
    vocab = [b"a", b"b", b"c", b"d", b"\xc3", b"\xa9"]
    r = Req(0, [1], SamplingParams(max_tokens=20, stop=("bd",)), True, None, torch.Generator(), 0.0)
    r.output_ids += [0, 2, 2, 2]
    assert r.output_bytes(vocab) == b"accc" and not r.find_stop(vocab) and r.stop_scanned == 4
    r.rollback(3, vocab)  # jump-forward re-tokenization dropped "ccc"
    assert r.output_bytes(vocab) == b"a" and r.rolled_back_tokens == 3 and r.stop_scanned == 1
    r.output_ids += [1, 3]  # "bd" now stands where bytes were already scanned before the rollback
    assert r.find_stop(vocab) and r.stop_at == 1 and r.visible_bytes(vocab) == b"a"
    r2 = Req(1, [1], SamplingParams(max_tokens=20), True, None, torch.Generator(), 0.0)
    r2.output_ids += [0, 4]
    assert r2.output_bytes(vocab) == b"a\xc3"
    r2.output_ids += [5]
    r2.rollback(1, vocab)  # a token never joined into the cache: nothing to trim
    assert r2.output_bytes(vocab) == b"a\xc3" and r2.visible_bytes(vocab) == b"a\xc3"
    r2.output_ids += [5]
    assert bytes(r2.output_bytes(vocab)).decode() == "aé"


def test_a_grammar_filling_its_state_cap_is_retired_from_the_cache(gpt2_vocab: Vocabulary) -> None:
    """A request done on a grammar past three quarters of its state cap takes it out of the
    compiler's cache (later requests start on a fresh copy); below that it stays."""
    from types import SimpleNamespace

    from structgen.fsm import CompilerConfig, Constraint, GrammarCompiler

    from structgen.engine.grammar_manager import GrammarManager

    compiler = GrammarCompiler(gpt2_vocab, CompilerConfig(max_states=40))
    constraint = Constraint.regex("[ab]{0,60}1")
    manager = GrammarManager(compiler)
    fsm = compiler.compile(constraint)
    manager.finished(SimpleNamespace(constraint=constraint, cursor=fsm.cursor(), error=None))  # type: ignore[arg-type]
    assert compiler.compile(constraint) is fsm  # a few states: kept
    fsm.dfa.walk(fsm.dfa.initial, b"ab" * 16)  # one new state per byte
    assert fsm.num_states * 4 >= 3 * 40
    manager.finished(SimpleNamespace(constraint=constraint, cursor=fsm.cursor(), error=None))  # type: ignore[arg-type]
    assert compiler.compile(constraint) is not fsm
