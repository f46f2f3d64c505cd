"""Our Llama / Qwen2 / Mistral forward against transformers' reference on tiny random checkpoints:
prefill, decode, chunked prefill, a radix-reused prefix, and a mixed batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from structgen.engine import EngineConfig, SchedulerConfig
from structgen.engine.model_runner import ModelRunner
from structgen.models import ModelLoadError, UnsupportedModelError, load_hf_config, load_model, write_random_checkpoint
from structgen.runtime.attention import ForwardBatch
from structgen.runtime.memory import MemoryConfig

from .conftest import tiny_config

CONFIGS = {
    "llama3-gqa-rope-scaling": (
        "llama",
        dict(
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
        ),
    ),
    "llama2-mha": ("llama", dict(num_key_value_heads=4, vocab_size=300)),
    "qwen2-bias-tied": ("qwen2", dict(tie_word_embeddings=True, vocab_size=300)),
    "mistral-window": ("mistral", dict(sliding_window=4, vocab_size=300, head_dim=32)),
}


def _reference_logits(path: Path, ids: list[int]) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    ref = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32, attn_implementation="eager")
    ref.eval()
    with torch.no_grad():
        return ref(torch.tensor([ids])).logits[0].float()  # [T, V]


class Runner:
    """Drives a ModelRunner by hand: one request row per sequence, slots allocated per extend."""

    def __init__(self, path: Path) -> None:
        self.mr = ModelRunner(
            str(path),
            EngineConfig(
                device="cpu", memory=MemoryConfig(max_total_tokens=256, max_context=128), scheduler=SchedulerConfig(max_running_requests=4)
            ),
        )
        self.rows: dict[str, int] = {}
        self.lens: dict[str, int] = {}

    def extend(self, parts: list[tuple[str, list[int], int]]) -> list[torch.Tensor]:
        """``parts``: (sequence name, full token list, tokens to extend); returns logits of
        every extended position, per part."""
        ids, pos, locs, rows, prefix, ext, sample = [], [], [], [], [], [], []
        for name, seq, n in parts:
            if name not in self.rows:
                self.rows[name] = self.mr.req_to_token.alloc()  # type: ignore[assignment]
                self.lens[name] = 0
            row, start = self.rows[name], self.lens[name]
            slots = self.mr.allocator.alloc(n)
            assert slots is not None
            self.mr.req_to_token.req_to_token_cpu[row, start : start + n] = slots
            sample.extend(range(len(ids), len(ids) + n))
            ids.extend(seq[start : start + n])
            pos.extend(range(start, start + n))
            locs.append(slots)
            rows.append(row)
            prefix.append(start)
            ext.append(n)
            self.lens[name] = start + n
        fb = ForwardBatch(torch.tensor(ids), torch.tensor(pos), torch.cat(locs), rows, prefix, ext, sample)
        with torch.inference_mode():
            logits = self.mr.forward(fb)
        out, k = [], 0
        for _name, _seq, n in parts:
            out.append(logits[k : k + n])
            k += n
        return out

    def share_prefix(self, src: str, dst: str, n: int) -> None:
        """Give ``dst`` the first ``n`` KV slots of ``src`` (what a radix-cache hit does)."""
        self.rows[dst] = self.mr.req_to_token.alloc()  # type: ignore[assignment]
        table = self.mr.req_to_token.req_to_token_cpu
        table[self.rows[dst], :n] = table[self.rows[src], :n]
        self.lens[dst] = n


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_logits_match_transformers(tmp_path: Path, name: str) -> None:
    kind, overrides = CONFIGS[name]
    path = write_random_checkpoint(tmp_path / name, tiny_config(kind, **overrides), seed=1)
    vocab = tiny_config(kind, **overrides).vocab_size  # type: ignore[attr-defined]
    g = torch.Generator().manual_seed(0)
    seq_a = torch.randint(0, vocab, (20,), generator=g).tolist()
    seq_b = seq_a[:9] + torch.randint(0, vocab, (8,), generator=g).tolist()
    ref_a, ref_b = _reference_logits(path, seq_a), _reference_logits(path, seq_b)
    tol = dict(atol=2e-4, rtol=1e-3)

    r = Runner(path)
    (prefill,) = r.extend([("a", seq_a, 12)])  # prefill
    torch.testing.assert_close(prefill, ref_a[:12], **tol)
    for i in range(12, 15):  # decode
        (dec,) = r.extend([("a", seq_a, 1)])
        torch.testing.assert_close(dec[0], ref_a[i], **tol)
    r.share_prefix("a", "b", 9)  # radix-reused prefix, then a mixed batch: decode a + extend b
    dec_a, ext_b = r.extend([("a", seq_a, 1), ("b", seq_b, 8)])
    torch.testing.assert_close(dec_a[0], ref_a[15], **tol)
    torch.testing.assert_close(ext_b, ref_b[9:], **tol)

    c = Runner(path)  # chunked prefill: 7 + 6 + 7 tokens
    chunks = [c.extend([("a", seq_a, n)])[0] for n in (7, 6, 7)]
    torch.testing.assert_close(torch.cat(chunks), ref_a, **tol)


def test_sharded_checkpoint_and_half_dtypes(tmp_path: Path) -> None:
    cfg = tiny_config("llama", vocab_size=300)
    one = write_random_checkpoint(tmp_path / "one", cfg, seed=5)
    two = write_random_checkpoint(tmp_path / "two", tiny_config("llama", vocab_size=300), seed=5, num_shards=3)
    assert (two / "model.safetensors.index.json").is_file()
    m1, _ = load_model(one)
    m2, _ = load_model(two)
    for (n1, p1), (n2, p2) in zip(m1.state_dict().items(), m2.state_dict().items()):
        assert n1 == n2 and torch.equal(p1, p2)
    for dtype, torch_dtype in (("bfloat16", torch.bfloat16), ("float16", torch.float16)):
        m, _ = load_model(one, dtype=dtype)
        assert m.lm_head.weight.dtype == torch_dtype


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_model(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match=r"no config\.json"):
        load_model(tmp_path / "empty")
    from transformers import GPT2Config

    gpt2 = tmp_path / "gpt2"
    GPT2Config(n_layer=1, n_embd=32, n_head=2).save_pretrained(str(gpt2))
    with pytest.raises(UnsupportedModelError, match=r"LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM"):
        load_model(gpt2)
    path = write_random_checkpoint(tmp_path / "cut", tiny_config("llama", vocab_size=300), seed=0)
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(path / "model.safetensors"))
    del tensors["model.layers.1.mlp.up_proj.weight"]
    save_file(tensors, str(path / "model.safetensors"))
    with pytest.raises(ModelLoadError, match="missing"):
        load_model(path)
    cfg = json.loads((path / "config.json").read_text())
    cfg["rope_parameters"] = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0}
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UnsupportedModelError, match="yarn"):
        load_model(path)


def test_a_hub_id_resolves_from_the_local_hugging_face_cache(tiny_llama_dir: str, tmp_path: Path) -> None:
    """``org/name`` is found in the local Hugging Face cache (no network), as the peers do; an
    existing folder and an id that is not cached are returned unchanged."""
    import shutil

    from structgen.models import resolve_model_path

    repo = tmp_path / "models--acme--tiny"
    snap = repo / "snapshots" / ("0" * 40)
    shutil.copytree(tiny_llama_dir, snap)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    assert resolve_model_path("acme/tiny", cache_dir=tmp_path) == str(snap)
    assert resolve_model_path("acme/other", cache_dir=tmp_path) == "acme/other"
    assert resolve_model_path(tiny_llama_dir, cache_dir=tmp_path) == tiny_llama_dir
    assert load_hf_config(resolve_model_path("acme/tiny", cache_dir=tmp_path)).model_type == "llama"
