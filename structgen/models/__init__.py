"""Model implementations (our own Llama / Mistral / Qwen2) and checkpoint loading."""

from __future__ import annotations

from structgen.models.llama import SUPPORTED_ARCHITECTURES, LlamaForCausalLM, ModelArgs, UnsupportedModelError
from structgen.models.loader import (
    ModelLoadError,
    init_random_weights,
    load_hf_config,
    load_model,
    resolve_model_path,
    write_model_folder,
    write_random_checkpoint,
)
from structgen.models.presets import PRESETS, preset_config, write_preset_folder

__all__ = [
    "PRESETS",
    "SUPPORTED_ARCHITECTURES",
    "LlamaForCausalLM",
    "ModelArgs",
    "ModelLoadError",
    "UnsupportedModelError",
    "init_random_weights",
    "load_hf_config",
    "load_model",
    "preset_config",
    "resolve_model_path",
    "write_model_folder",
    "write_preset_folder",
    "write_random_checkpoint",
]
