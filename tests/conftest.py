"""Shared fixtures: the vendored GPT-2 tokenizer, a tiny hand-built vocabulary, ../shared paths."""

from __future__ import annotations

import os

import pytest
import torch

# The Triton kernels run on CPU tensors through the interpreter where there is no GPU (CI).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
from structgen.fsm.vocab import Vocabulary

from structgen.models.presets import PLAIN_CHAT_TEMPLATE as CHAT_TEMPLATE

HERE = os.path.dirname(os.path.abspath(__file__))
GPT2_DIR = os.path.join(HERE, "fixtures", "gpt2")
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "fixtures"))


def shared_path(*parts: str) -> str:
    """A path under ../shared/fixtures; the test is skipped when it does not exist."""
    p = os.path.join(SHARED, *parts)
    if not os.path.exists(p):
        pytest.skip(f"../shared fixture not available: {p}")
    return p


@pytest.fixture(scope="session")
def gpt2_vocab() -> Vocabulary:
    return Vocabulary.from_tokenizer(GPT2_DIR)


TINY_TOKENS = [
    b"<eos>",
    b"{",
    b"}",
    b'"',
    b'{"',
    b'":',
    b'": ',
    b" ",
    b"a",
    b"b",
    b"ab",
    b"ba",
    b"1",
    b"12",
    b"2",
    b",",
    b", ",
    b'"a',
    b'a"',
    b"\xc3",
    b"\xa9",
    b"\xc3\xa9",
    b"[",
    b"]",
    b'", "',
]


@pytest.fixture(scope="session")
def tiny_vocab() -> Vocabulary:
    """Hand-built vocabulary: id 0 is EOS (special); multibyte 'é' split and whole."""
    return Vocabulary(TINY_TOKENS, eos_token_ids=[0], special_ids=[0])


def tiny_config(kind: str = "llama", **overrides: object) -> object:
    """A small config of a real architecture with the GPT-2 vocabulary size."""
    from transformers import LlamaConfig, MistralConfig, Qwen2Config

    base = dict(
        vocab_size=50257,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=50256,
        eos_token_id=50256,
    )
    base.update(overrides)
    cls = {"llama": LlamaConfig, "qwen2": Qwen2Config, "mistral": MistralConfig}[kind]
    return cls(**base)


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A seeded random-weight Llama checkpoint with the GPT-2 tokenizer and a chat template."""
    from structgen.models import write_random_checkpoint

    path = tmp_path_factory.mktemp("tiny-llama")
    write_random_checkpoint(path, tiny_config("llama"), seed=0, tokenizer_dir=GPT2_DIR, chat_template=CHAT_TEMPLATE)
    return str(path)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``gpu`` skip without CUDA."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
