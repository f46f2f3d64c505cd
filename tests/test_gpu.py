"""GPU path (CUDA only; skipped elsewhere): FlashInfer vs torch attention, CUDA-graph decode,
generate() on the GPU, and the decode step's host synchronizations."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import torch

from structgen import Constraint, Engine, EngineConfig, GenerateRequest, SamplingParams
from structgen.engine.scheduler import SchedulerConfig
from structgen.runtime.memory import MemoryConfig

from .conftest import CHAT_TEMPLATE, GPT2_DIR, tiny_config

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A bf16 Llama with FlashInfer-friendly shapes (head_dim 64) and the GPT-2 tokenizer."""
    from structgen.models import write_random_checkpoint

    path = tmp_path_factory.mktemp("gpu-llama")
    cfg = tiny_config("llama", hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2)
    write_random_checkpoint(path, cfg, seed=0, dtype=torch.bfloat16, tokenizer_dir=GPT2_DIR, chat_template=CHAT_TEMPLATE)
    return str(path)


@pytest.mark.parametrize("model", ["llama-gqa", "mistral-window"])
def test_flashinfer_matches_torch_backend(model: str, tmp_path: Path) -> None:
    from gpu_correctness import compare, model_configs

    records = compare(model_configs()[model], torch.device("cuda"), str(tmp_path))
    scenarios = {r["scenario"] for r in records}
    assert {"prefill", "decode", "chunked prefill 2/2", "reused prefix", "mixed extend+decode"} <= scenarios
    assert any(r["forward"] == "decode graph" for r in records)
    assert any(r["forward"] == "extend graph" for r in records)  # jump-forward extends replay graphs too
    for r in records:
        assert float(r["max_abs_diff"]) <= 0.05 * float(r["ref_max_abs"]) + 0.02, r  # type: ignore[arg-type]
        assert float(r["top1_agreement"]) >= 0.9, r  # type: ignore[arg-type]


def _engine(path: str, **kw: object) -> Engine:
    mem = MemoryConfig(max_total_tokens=8192, max_context=1024)
    sched = kw.pop("scheduler", SchedulerConfig())
    sched = SchedulerConfig(**{**sched.__dict__, "max_running_requests": 16})  # type: ignore[union-attr]
    return Engine(path, EngineConfig(device="cuda", dtype="bfloat16", memory=mem, scheduler=sched, cuda_graph_max_bs=16, **kw))  # type: ignore[arg-type]


def test_engine_picks_flashinfer_and_graphs(gpu_model_dir: str) -> None:
    with _engine(gpu_model_dir) as e:
        assert e.runner.attention_backend == "flashinfer"
        assert e.runner.graph_runner is not None and e.runner.graph_runner.buckets == [1, 2, 4, 8, 16]


def test_generate_on_gpu_gives_valid_objects(gpu_model_dir: str) -> None:
    import jsonschema

    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
                       "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}},
        "required": ["name", "age", "tags"],
        "additionalProperties": False,
    }  # fmt: skip
    with _engine(gpu_model_dir) as e:
        c = Constraint.json_schema(schema)
        reqs = [
            GenerateRequest(f"Person {i}:", SamplingParams(max_tokens=96, temperature=0.8 if i % 2 else 0.0, seed=i), c) for i in range(12)
        ]
        outs = e.generate(reqs)
        for o in outs:
            assert o.finish_reason == "stop", o
            jsonschema.validate(json.loads(o.text), schema)
        # same results with the torch backend on the same GPU (greedy rows)
    with _engine(gpu_model_dir, attention_backend="torch") as e2:
        outs2 = e2.generate(reqs)
    greedy_same = sum(a.text == b.text for a, b in list(zip(outs, outs2))[::2])
    assert greedy_same >= 4  # bf16 kernels may flip a near-tie; most greedy outputs agree


@pytest.mark.parametrize("overlap", [True, False])
def test_decode_step_synchronizes_only_for_sampled_ids(gpu_model_dir: str, overlap: bool) -> None:
    from torch.profiler import ProfilerActivity, profile

    with _engine(gpu_model_dir, scheduler=SchedulerConfig(jump_forward=False, overlap_schedule=overlap)) as e:
        reqs = [GenerateRequest(f"Item {i}", SamplingParams(max_tokens=60), Constraint.regex(r"[a-z ]{40,60}") if i % 2 else None)
                for i in range(8)]  # fmt: skip
        for r in reqs:
            e.submit(r)
        for _ in range(6):  # prefill, then warm decode steps (graphs, pinned buffers, mask rows)
            e.step()
        replays = 0
        gr = e.runner.graph_runner
        assert gr is not None
        orig = gr.replay

        def counted(batch):  # type: ignore[no-untyped-def]
            nonlocal replays
            replays += 1
            return orig(batch)

        gr.replay = counted  # type: ignore[method-assign]
        steps = 10
        blocking = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cudaHostAlloc")

        def count(body) -> Counter[str]:  # type: ignore[no-untyped-def]
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], acc_events=True) as prof:
                body()
            return Counter(ev.name for ev in prof.events() if ev.name in blocking)

        # what the profiler itself adds around any CUDA work (its flush at stop), to subtract
        baseline = count(lambda: torch.ones(8, device="cuda").add_(1))
        measured = count(lambda: [e.step() for _ in range(steps)])
        assert replays == steps  # every measured step was a CUDA-graph decode
        added = measured - baseline
        assert added == Counter({"cudaEventSynchronize": steps}), (measured, baseline)  # the sampled ids' copy, once per step


def test_overlap_matches_synchronous_steps_on_gpu(gpu_model_dir: str) -> None:
    """The overlap scheduler (forwards launched on device-resident sampled ids, CUDA graphs
    resolving the placeholders) gives the tokens of synchronous steps: exactly while the batch
    is the same at every step (unconstrained, one length); constrained requests end valid, and
    most agree (requests finishing one step later under overlap change later steps' batch
    sizes, and bf16 kernels of another size may flip a near-tie)."""
    import jsonschema

    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 10}, "n": {"type": "integer", "minimum": 0, "maximum": 99}},
        "required": ["name", "n"],
        "additionalProperties": False,
    }
    c = Constraint.json_schema(schema)
    free = [GenerateRequest(f"Story {i}:", SamplingParams(max_tokens=40, seed=i, temperature=0.7 * (i % 2))) for i in range(6)]
    constrained = [GenerateRequest(f"Person {i}:", SamplingParams(max_tokens=48), c) for i in range(8)]
    outs = {}
    for overlap in (False, True):
        with _engine(gpu_model_dir, scheduler=SchedulerConfig(overlap_schedule=overlap)) as e:
            outs[overlap] = ([o.token_ids for o in e.generate(free)], e.generate(constrained))
            while e.has_unfinished():
                e.step()
            assert e.runner.forward_counts["decode graph"] > 0
            if e.cache.radix is not None:
                e.cache.radix.evict(10**9)
            assert e.runner.pools_empty()
    assert outs[True][0] == outs[False][0]
    for o in outs[True][1]:
        assert o.finish_reason == "stop", o
        jsonschema.validate(json.loads(o.text), schema)
    assert sum(a.token_ids == b.token_ids for a, b in zip(outs[True][1], outs[False][1])) >= 6
