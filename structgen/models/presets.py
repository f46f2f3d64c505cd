"""Named model configurations for random-weight benchmarks (no checkpoint needed).

``llama3-8b`` is Meta-Llama-3-8B's published config.json (hidden 4096, 32 layers, 32 heads,
8 KV heads, intermediate 14336, vocab 128256, RoPE θ 500000): used with the real Llama-3
tokenizer and weights drawn on the GPU, it has the 8B model's exact shapes and memory traffic.
``llama-gpt2-tiny`` / ``llama-gpt2-small`` are 2-layer Llamas sized for the vendored GPT-2
tokenizer (hidden 64 / 128): the CPU server-load and engine benchmarks write them with
:func:`write_random_preset_checkpoint` and the GPT-2 tokenizer folder they are given.
``llama3-tiny`` is the same 2-layer shape over the Llama-3 vocabulary: on a CPU its forward is
cheap, so a run with the real 128k-token vocabulary shows the engine's host work.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "llama3-8b": {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "rope_theta": 500000.0,
        "rms_norm_eps": 1e-5,
        "bos_token_id": 128000,
        "eos_token_id": 128001,
        "tie_word_embeddings": False,
        "initializer_range": 0.02,
        "dtype": "bfloat16",
    },
    "llama3-tiny": {
        "vocab_size": 128256,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 8192,
        "rope_theta": 500000.0,
        "bos_token_id": 128000,
        "eos_token_id": 128001,
        "tie_word_embeddings": False,
    },
    "llama-gpt2-tiny": {
        "vocab_size": 50257,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 1024,
        "bos_token_id": 50256,
        "eos_token_id": 50256,
        "tie_word_embeddings": False,
    },
    "llama-gpt2-small": {
        "vocab_size": 50257,
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 2048,
        "bos_token_id": 50256,
        "eos_token_id": 50256,
        "tie_word_embeddings": False,
    },
}


# A plain role-prefixed chat template for random-weight checkpoints whose tokenizer has none.
PLAIN_CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
)


def preset_config(name: str) -> Any:
    """A ``transformers.LlamaConfig`` for preset ``name``; raises ``ValueError`` listing the
    presets for an unknown one."""
    if name not in PRESETS:
        raise ValueError(f"unknown model preset {name!r}; available: {', '.join(PRESETS)}")
    from transformers import LlamaConfig

    return LlamaConfig(**PRESETS[name])


def write_preset_folder(name: str, path: str | os.PathLike[str], tokenizer_dir: str | os.PathLike[str] | None = None) -> Path:
    """Write preset ``name``'s config.json and the tokenizer of ``tokenizer_dir`` (if given) into
    ``path`` (no weights; load with ``random_weights_seed``)."""
    from structgen.models.loader import write_model_folder

    return write_model_folder(path, preset_config(name), tokenizer_dir=tokenizer_dir)


def write_random_preset_checkpoint(name: str, path: str | os.PathLike[str], tokenizer_dir: str | os.PathLike[str], seed: int = 0) -> Path:
    """A seeded random-weight checkpoint of preset ``name`` with the tokenizer of
    ``tokenizer_dir`` (``llama-gpt2-*``: a GPT-2 tokenizer folder) and
    :data:`PLAIN_CHAT_TEMPLATE` as its chat template, written into ``path``.  Raises ``ValueError``
    for an unknown preset and ``ModelLoadError`` for a folder without a tokenizer."""
    from .loader import write_random_checkpoint

    write_random_checkpoint(path, preset_config(name), seed=seed, tokenizer_dir=tokenizer_dir, chat_template=PLAIN_CHAT_TEMPLATE)
    return Path(path)
