"""The embedded default checkpoint: until a trained default ships, a seeded random-weight
Llama-architecture model with the GPT-2 tokenizer, written on first use into a cache folder.

It exercises the whole engine (and every output is valid by construction) but its choices
within the schema are arbitrary.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

DEFAULT_NAME = "random-llama-gpt2-v1"
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
)


def cache_dir() -> Path:
    """``$STRUCTGEN_CACHE`` or ``~/.cache/structgen``."""
    return Path(os.environ.get("STRUCTGEN_CACHE") or Path.home() / ".cache" / "structgen")


def gpt2_tokenizer_dir() -> Path:
    """The GPT-2 tokenizer vendored in the source tree (``tests/fixtures/gpt2``, MIT).

    Raises ``FileNotFoundError`` when the package was installed without its source tree."""
    path = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "gpt2"
    if not (path / "tokenizer.json").is_file():
        raise FileNotFoundError(
            f"the GPT-2 tokenizer is not at {path}; install structgen from its source tree (pip install -e .) or pass a model folder"
        )
    return path


def ensure_default_model() -> Path:
    """Path of the default checkpoint, writing it first if absent (atomic rename)."""
    from transformers import LlamaConfig

    from .models import write_random_checkpoint

    target = cache_dir() / "models" / DEFAULT_NAME
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    config = LlamaConfig(
        vocab_size=50257,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=50256,
        eos_token_id=50256,
        tie_word_embeddings=False,
    )
    tmp = Path(tempfile.mkdtemp(prefix=DEFAULT_NAME + ".", dir=target.parent))
    try:
        write_random_checkpoint(tmp, config, seed=0, tokenizer_dir=gpt2_tokenizer_dir(), chat_template=CHAT_TEMPLATE)
        try:
            tmp.rename(target)
        except OSError:  # another process won the race
            if not (target / "config.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
