"""Model implementations (our own Llama / Mistral / Qwen2) and checkpoint loading."""

from __future__ import annotations

from .llama import SUPPORTED_ARCHITECTURES, LlamaForCausalLM, ModelArgs, UnsupportedModelError
from .loader import ModelLoadError, load_hf_config, load_model, write_random_checkpoint

__all__ = [
    "SUPPORTED_ARCHITECTURES",
    "LlamaForCausalLM",
    "ModelArgs",
    "ModelLoadError",
    "UnsupportedModelError",
    "load_hf_config",
    "load_model",
    "write_random_checkpoint",
]
