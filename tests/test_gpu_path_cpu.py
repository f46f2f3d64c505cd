"""CPU-side pieces of the GPU path: the mask-row pool, backend selection and fallbacks, random
weights drawn on the device, presets, CUDA-graph buckets."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from structgen.fsm import GrammarCompiler, Vocabulary

from structgen.engine import EngineConfig, SchedulerConfig
from structgen.engine.mask_pool import MaskRowPool
from structgen.engine.model_runner import ModelRunner
from structgen.runtime.attention import resolve_attention_backend
from structgen.runtime.memory import MemoryConfig

from .conftest import GPT2_DIR, tiny_config


@pytest.fixture(scope="module")
def fsms(gpt2_vocab: Vocabulary) -> list:  # type: ignore[type-arg]
    from structgen.fsm import Constraint

    comp = GrammarCompiler(gpt2_vocab)
    return [comp.compile(Constraint.regex(p)) for p in (r"[a-c]{1,3}x", r"(yes|no)", r"[0-9]{2,4}")]


def test_mask_pool_uploads_once_and_serves_the_fsm_rows(fsms: list) -> None:  # type: ignore[type-arg]
    pool = MaskRowPool(16, 50257, torch.device("cpu"))
    cursors = [f.cursor() for f in fsms] + [None]
    idx = pool.row_indices(cursors)
    assert idx.dtype == torch.int32 and idx[-1] == -1 and len(set(idx[:-1].tolist())) == 3
    for c, slot in zip(cursors[:-1], idx.tolist()):
        assert c is not None
        assert np.array_equal(pool.rows_gpu[slot, : c.fsm.mask_words].numpy(), c.fsm.mask_row(c.state))
    again = pool.row_indices(cursors)
    assert torch.equal(idx, again)
    s = pool.stats()
    assert s.uploads == 3 and s.hits == 3 and s.evictions == 0 and s.resident == 3


def test_mask_pool_evicts_least_recently_used(fsms: list) -> None:  # type: ignore[type-arg]
    pool = MaskRowPool(2, 50257, torch.device("cpu"))
    a, b, c = (f.cursor() for f in fsms)
    pool.row_indices([a])
    pool.row_indices([b])
    pool.row_indices([a])  # b is now least recent
    slot_c = int(pool.row_indices([c])[0])
    assert pool.stats().evictions == 1
    assert np.array_equal(pool.rows_gpu[slot_c, : c.fsm.mask_words].numpy(), c.fsm.mask_row(c.state))
    assert int(pool.row_indices([a])[0]) != slot_c and pool.stats().hits == 2  # a survived
    pool.row_indices([b])  # b comes back, evicting c
    assert pool.stats().evictions == 2
    with pytest.raises(RuntimeError, match="distinct mask rows"):
        pool.row_indices([a, b, c])
    with pytest.raises(ValueError, match="capacity"):
        MaskRowPool(0, 10, torch.device("cpu"))


def test_attention_backend_selection_falls_back_without_cuda() -> None:
    cpu = torch.device("cpu")
    assert resolve_attention_backend("auto", cpu, torch.bfloat16) == "torch"
    assert resolve_attention_backend("torch", cpu, torch.float32) == "torch"
    with pytest.raises(ValueError, match="needs CUDA, flashinfer installed"):
        resolve_attention_backend("flashinfer", cpu, torch.bfloat16)
    with pytest.raises(ValueError, match="not available"):
        resolve_attention_backend("xformers", cpu, torch.bfloat16)


def test_cuda_graph_buckets() -> None:
    from structgen.runtime.cuda_graphs import graph_buckets

    assert graph_buckets(256) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert graph_buckets(1) == [1]
    assert graph_buckets(48) == [1, 2, 4, 8, 16, 32, 48]
    assert graph_buckets(256, 512) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 320, 384, 448, 512]  # rows for flattened extends
    assert graph_buckets(6, 12) == [1, 2, 4, 6, 8, 9, 11, 12] and graph_buckets(4, 5) == [1, 2, 4, 5]


def test_extend_graph_keys_and_padding() -> None:
    from structgen.runtime.cuda_graphs import extend_graph_key, extend_token_buckets, pad_extend

    assert extend_token_buckets(1, 1024) == [2, 3, 4, 6, 8, 12, 16]
    assert extend_token_buckets(4, 1024) == [5, 6, 7, 8, 12, 16, 24, 32, 48, 64]  # at least bs + 1, no repeats
    assert extend_token_buckets(64, 1024) == [80, 96, 112, 128, 192, 256, 384, 512, 768, 1024]
    assert extend_token_buckets(256, 1024) == [320, 384, 448, 512, 768, 1024] and extend_token_buckets(1024, 1024) == []
    keys = {bs: extend_token_buckets(bs, 1024) for bs in (1, 2, 4, 64, 128)}
    assert extend_graph_key(1, 7, keys) == (1, 8)
    assert extend_graph_key(1, 5, keys) == (1, 6)
    assert extend_graph_key(1, 17, keys) == (2, 24)  # too many tokens for the bs-1 graphs
    assert extend_graph_key(3, 15, keys) == (4, 16)  # 15 real + 1 padding request
    assert extend_graph_key(3, 16, keys) == (4, 24)
    assert extend_graph_key(43, 130, keys) == (64, 192)  # 130 real + 21 padding requests
    assert extend_graph_key(3, 64, keys) == (64, 128)  # past the largest bs-4 graph (64 tokens)
    assert extend_graph_key(100, 1000, keys) is None  # no graph holds 1000 + 28 padding tokens: eager
    assert extend_graph_key(64, 300, keys) == (64, 384)
    assert extend_graph_key(65, 300, keys) == (128, 384)  # 300 + 63 padding requests
    assert extend_graph_key(129, 300, keys) is None
    assert extend_graph_key(64, 70, keys) == (64, 80)  # a full batch of decodes with one 7-token chain: a quarter more
    assert extend_graph_key(60, 100, keys) == (64, 112)
    # real requests first; padding requests one token each; the rest on the last request
    lay = pad_extend([3, 1], [10, 20], 4, 16)
    assert lay.qo_lens == [3, 1, 1, 11] and lay.kv_lens == [13, 21, 1, 11] and lay.pad_tail == 10
    assert sum(lay.qo_lens) == 16
    lay = pad_extend([5, 2], [0, 7], 2, 8)  # no padding request: the tail goes to the last real one
    assert lay.qo_lens == [5, 3] and lay.kv_lens == [5, 10] and lay.pad_tail == 1
    with pytest.raises(ValueError, match="do not fit"):
        pad_extend([5, 2, 1], [0, 0, 0], 2, 16)


def test_random_weights_on_device_need_only_a_config(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from structgen.models import write_model_folder

    write_model_folder(tmp_path, tiny_config("llama"), tokenizer_dir=GPT2_DIR)
    assert not list(tmp_path.glob("*.safetensors"))
    mem = MemoryConfig(max_total_tokens=64, max_context=32)
    cfg = EngineConfig(device="cpu", memory=mem, scheduler=SchedulerConfig(max_running_requests=2), random_weights_seed=3)
    a = ModelRunner(str(tmp_path), cfg)
    b = ModelRunner(str(tmp_path), cfg)
    for (name, p), q in zip(a.model.named_parameters(), b.model.parameters()):
        assert torch.equal(p, q), name
    norm = a.model.model.norm.weight
    assert abs(float(norm.mean()) - 1.0) < 0.05 and float(a.model.lm_head.weight.std()) == pytest.approx(0.02, rel=0.1)
    assert a.attention_backend == "torch" and a.graph_runner is None and a.extend_graph_runner is None
    with pytest.raises(ValueError, match="cuda_graph_max_extend_tokens must be ≥ 0, got -1"):
        EngineConfig(device="cpu", memory=mem, cuda_graph_max_extend_tokens=-1, random_weights_seed=3)


def test_presets() -> None:
    from structgen.models import ModelArgs, preset_config

    args = ModelArgs.from_hf_config(preset_config("llama3-8b"))
    assert (args.hidden_size, args.num_layers, args.num_heads, args.num_kv_heads, args.intermediate_size, args.vocab_size) == (
        4096, 32, 32, 8, 14336, 128256,
    )  # fmt: skip
    with pytest.raises(ValueError, match="unknown model preset"):
        preset_config("gpt-5")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("mask_backend", "cuda-magic", "mask_backend must be one of auto, torch, triton"),
        ("attention_backend", "xformers", "attention backend 'xformers' is not available"),
        ("decode_kernel", "cutlass", "decode kernel 'cutlass' is not available; available: auto, flashinfer, triton"),
        ("cuda_graph_max_bs", 0, "cuda_graph_max_bs must be ≥ 1"),
        ("cuda_graph_max_extend_tokens", -1, "cuda_graph_max_extend_tokens must be ≥ 0"),
        ("mask_pool_rows", 0, "mask_pool_rows must be ≥ 1"),
        ("prefill_kernel", "fa4", "prefill kernel 'fa4' is not available; available: auto, fa2, fa3"),
        ("extend_as_decode", 1, "extend_as_decode must be a bool"),
    ],
)
def test_engine_config_rejects_bad_gpu_settings(field: str, value: object, message: str) -> None:
    from structgen import EngineConfig

    with pytest.raises(ValueError, match=message):
        EngineConfig(**{field: value})  # type: ignore[arg-type]


def test_flatten_extend_lays_out_one_decode_row_per_token() -> None:
    from structgen.runtime.attention import ForwardBatch, flatten_extend

    batch = ForwardBatch(torch.arange(5), torch.tensor([7, 3, 4, 5, 9]), torch.arange(10, 15), [2, 0, 1], [7, 3, 9], [1, 3, 1], [0, 3, 4])
    flat = flatten_extend(batch, max_rows=8)
    assert flat is not None
    assert flat.req_pool_indices == [2, 0, 0, 0, 1] and flat.prefix_lens == [7, 3, 4, 5, 9]
    assert flat.extend_lens == [1] * 5 and flat.sample_rows == [0, 1, 2, 3, 4]
    assert flat.input_ids_cpu is batch.input_ids_cpu and flat.out_cache_loc_cpu is batch.out_cache_loc_cpu
    assert flatten_extend(batch, max_rows=4) is None  # more tokens than captured rows
    decodes = ForwardBatch(torch.arange(2), torch.tensor([4, 6]), torch.arange(2), [0, 1], [4, 6], [1, 1], [0, 1])
    assert flatten_extend(decodes, max_rows=8) is None  # already decodes
    # rows read 6 · 100 + 21 + 2 = 623 slots against 106 + 2 as one extend: more than twice
    chain = ForwardBatch(torch.arange(7), torch.arange(7), torch.arange(7), [0, 1], [100, 1], [6, 1], [5, 6])
    assert flatten_extend(chain, max_rows=8) is None
    assert flatten_extend(chain, max_rows=8, max_kv_ratio=6.0) is not None


def test_flattened_extend_gives_the_extend_logits(tiny_llama_dir: str) -> None:
    """Decode rows, one per token, attend exactly as the causal extend does (torch backend)."""
    from structgen.runtime.attention import ForwardBatch, flatten_extend

    mem = MemoryConfig(max_total_tokens=256, max_context=64)
    runner = ModelRunner(tiny_llama_dir, EngineConfig(device="cpu", memory=mem, scheduler=SchedulerConfig(max_running_requests=4)))
    table = runner.req_to_token.req_to_token_cpu
    rows = [runner.req_to_token.alloc(), runner.req_to_token.alloc()]
    assert None not in rows
    slots = runner.allocator.alloc(14)
    assert slots is not None
    table[rows[0], :6], table[rows[1], :8] = slots[:6], slots[6:]
    ids = torch.randint(0, runner.vocab_size, (14,), generator=torch.Generator().manual_seed(0))
    prompt = ForwardBatch(ids[:9], torch.tensor([*range(5), *range(4)]), torch.cat([slots[:5], slots[6:10]]), rows, [0, 0], [5, 4], [4, 8])  # type: ignore[arg-type]
    runner.forward(prompt)
    # request 0 decodes its 6th token; request 1 extends a 4-token chain
    locs = torch.cat([slots[5:6], slots[10:14]])
    step = ForwardBatch(torch.cat([ids[9:10], ids[10:14]]), torch.tensor([5, 4, 5, 6, 7]), locs, rows, [5, 4], [1, 4], [0, 4])  # type: ignore[arg-type]
    want = runner.forward(step)  # [2, V]
    flat = flatten_extend(step, max_rows=8, max_kv_ratio=4.0)  # short contexts: the chain's rows read 26 slots against 8
    assert flat is not None
    got = runner.forward(flat)[step.sample_rows]  # the same KV rewritten with the same values
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert runner.forward(flat).shape == (5, runner.vocab_size)  # every token's logits, in token order


def test_engine_rejects_flashinfer_without_cuda(tiny_llama_dir: str) -> None:
    from structgen import Engine, EngineConfig

    with pytest.raises(ValueError, match="needs CUDA, flashinfer installed"):
        Engine(tiny_llama_dir, EngineConfig(device="cpu", attention_backend="flashinfer"))


class _FakeEvent:
    """A CUDA event stand-in: done once ``done`` is set (by the test or by ``synchronize``)."""

    def __init__(self) -> None:
        self.done = False

    def record(self, stream: object) -> None:
        self.done = False

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.done = True


def test_pinned_staging_ring_reuses_regions_only_after_their_copies() -> None:
    from structgen.runtime.staging import PinnedStaging

    ring = PinnedStaging(4096, torch.device("cpu"), pin=False, event_factory=_FakeEvent)
    a = ring.alloc((100,), torch.int32)  # 400 bytes -> 512-byte region
    b = ring.alloc((3, 5), torch.int64)  # 120 bytes -> 256
    assert a.shape == (100,) and a.dtype == torch.int32 and b.shape == (3, 5) and b.dtype == torch.int64
    base = ring.buf_cpu.data_ptr()
    assert a.data_ptr() == base and b.data_ptr() == base + 512  # 256-byte aligned regions in ring order
    ring.commit()
    assert len(ring.pending) == 1 and not ring.uncommitted
    first = ring.pending[0][2]
    for _ in range(14):  # 13 x 256 bytes fill the ring; the 14th wraps onto the first commit's region
        ring.alloc((64,), torch.int32)
        ring.commit()
    assert ring.waits == 1  # the first commit's copies were waited for before its region was reused
    assert first in [ev for _, _, ev in ring.pending]  # and its event recycled, not created anew
    for _, _, ev in ring.pending:
        ev.done = True  # the GPU caught up: the next wrap needs no wait
    for _ in range(16):
        ring.alloc((64,), torch.int32)
    ring.commit()
    assert ring.waits == 1
    ring2 = PinnedStaging(1024, torch.device("cpu"), pin=False, event_factory=_FakeEvent)
    ring2.alloc((512,), torch.uint8)
    ring2.commit()
    ring2.pending[0][2].done = True
    ring2.alloc((256,), torch.uint8)  # [512, 768)
    ring2.alloc((512,), torch.uint8)  # no room at the end: wraps to [0, 512) inside one commit
    ring2.commit()
    spans = [(s0, e0) for s0, e0, _ev in ring2.pending]
    assert spans == [(512, 1024), (0, 512)] and ring2.pending[0][2] is not ring2.pending[1][2]  # one event per span
    big = ring.alloc((4096,), torch.uint8)  # over half the ring: its own buffer
    assert not (ring.buf_cpu.data_ptr() <= big.data_ptr() < ring.buf_cpu.data_ptr() + 4096)
    from structgen.runtime.staging import pinned_staging

    with pytest.raises(ValueError, match="pinned staging is for CUDA devices, got cpu"):
        pinned_staging(torch.device("cpu"))
    with pytest.raises(ValueError, match="at least 512 bytes"):
        PinnedStaging(100, torch.device("cpu"), pin=False, event_factory=_FakeEvent)
