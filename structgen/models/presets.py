"""Named model configurations for random-weight benchmarks (no checkpoint needed).

``llama3-8b`` is Meta-Llama-3-8B's published config.json (hidden 4096, 32 layers, 32 heads,
8 KV heads, intermediate 14336, vocab 128256, RoPE θ 500000): used with the real Llama-3
tokenizer and weights drawn on the GPU, it has the 8B model's exact shapes and memory traffic.
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
}


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
    from .loader import write_model_folder

    return write_model_folder(path, preset_config(name), tokenizer_dir=tokenizer_dir)
