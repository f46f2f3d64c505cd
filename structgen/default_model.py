"""The embedded default model: an 11.75M-parameter Llama trained by ``tools/train_demo_model.py`` on
the project's synthetic extraction pairs (:mod:`structgen.demo.data`), shipped as package data
in ``structgen/assets/demo-extractor`` (a Hugging Face folder with its model card).

It is a demo, not a general model: it reads the extraction prompt of
:mod:`structgen.demo.prompting` (``structgen.generate`` builds it from the schema), and
constrained decoding supplies keys and syntax while the model picks the values.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_NAME = "demo-extractor"
# A plain role-prefixed template for test checkpoints that need one (the demo model has its own).
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
)


def cache_dir() -> Path:
    """``$STRUCTGEN_CACHE`` or ``~/.cache/structgen`` (compiled grammars, written models)."""
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
    """The packaged demo model folder.  Raises ``FileNotFoundError`` if the package was
    installed without its data files."""
    path = Path(__file__).resolve().parent / "assets" / DEFAULT_NAME
    if not (path / "model.safetensors").is_file():
        raise FileNotFoundError(f"the embedded demo model is missing from {path}; reinstall structgen with its package data")
    return path
