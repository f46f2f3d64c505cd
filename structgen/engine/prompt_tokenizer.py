"""Prompt → token ids, and fitting ``max_tokens`` to the context: shared by the engine and the
HTTP front end (which tokenizes in its own process, off the engine's)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from structgen.engine.request import RequestError, SamplingParams


def load_tokenizer(path: str | os.PathLike[str], chat_template: str | None = None) -> Any:
    """The Hugging Face tokenizer in the local folder ``path`` (``local_files_only``), with
    ``chat_template`` (Jinja text) in place of its own when given.  Raises ``ValueError`` when
    that template cannot render a user message, and what ``AutoTokenizer`` raises for a folder
    without tokenizer files."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(os.fspath(path), local_files_only=True)
    if chat_template is not None:
        tok.chat_template = chat_template
        try:  # a template that cannot render a plain exchange is refused now, not at the first request
            tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
        except Exception as exc:  # jinja syntax or runtime errors
            raise ValueError(f"chat template: it cannot render a user message: {exc}") from None
    return tok


class PromptTokenizer:
    """Turns a prompt into token ids for one model.

    ``tokenizer``: a Hugging Face tokenizer; ``vocab_size``: the model's embedding rows (ids
    given directly must lie in ``[0, vocab_size)``); ``model_path``: named in errors.  Not
    thread-safe (Hugging Face fast tokenizers are not): callers serialize calls."""

    def __init__(self, tokenizer: Any, vocab_size: int, model_path: str) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.model_path = model_path

    def tokenize(self, prompt: Any, chat_template_kwargs: dict[str, Any] | None = None) -> list[int]:
        """Prompt → ids: text (the tokenizer's special tokens added), chat messages (the
        tokenizer's chat template with the generation prompt; ``chat_template_kwargs``: extra
        template variables, e.g. ``enable_thinking``) or a list of ids.  Raises ``RequestError``
        (``param="prompt"``)."""
        tok = self.tokenizer
        if isinstance(prompt, str):
            ids = list(tok(prompt)["input_ids"])
        elif isinstance(prompt, Sequence) and prompt and all(isinstance(m, dict) for m in prompt):
            if not getattr(tok, "chat_template", None):
                raise RequestError(
                    f"prompt: chat messages need a chat template, and the tokenizer of {self.model_path!r} has none; pass text",
                    param="prompt",
                )
            try:
                text = tok.apply_chat_template(list(prompt), add_generation_prompt=True, tokenize=False, **(chat_template_kwargs or {}))
            except Exception as exc:  # jinja errors, bad roles
                raise RequestError(f"prompt: the chat template rejected the messages: {exc}", param="prompt") from None
            ids = list(tok(text, add_special_tokens=False)["input_ids"])
        elif isinstance(prompt, Sequence) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            bad = [t for t in prompt if not 0 <= t < self.vocab_size]
            if bad:
                raise RequestError(f"prompt: token ids {bad[:5]} outside the vocabulary [0, {self.vocab_size})", param="prompt")
            ids = list(prompt)
        else:
            raise RequestError("prompt must be a non-empty string, a list of chat messages (dicts) or a list of token ids", param="prompt")
        if not ids:
            raise RequestError("prompt is empty after tokenization", param="prompt")
        return ids


def fit_context(context: int, num_prompt_tokens: int, params: SamplingParams, *, clip: bool = False) -> SamplingParams:
    """``params`` with ``max_tokens`` resolved for a prompt of ``num_prompt_tokens`` in a context
    of ``context`` tokens (None: the room left; beyond the room: clipped to it with ``clip``).
    Raises ``RequestError`` (code ``context_length_exceeded``) when the prompt leaves no room,
    or without ``clip`` when ``max_tokens`` exceeds the room left."""
    if num_prompt_tokens >= context:
        raise RequestError(
            f"the prompt has {num_prompt_tokens} tokens; the context is {context} tokens and at least one must be left to generate",
            param="prompt",
            code="context_length_exceeded",
        )
    room = context - num_prompt_tokens
    if params.max_tokens is None or (clip and params.max_tokens > room):
        return replace(params, max_tokens=room)
    if params.max_tokens > room:
        raise RequestError(
            f"max_tokens={params.max_tokens} plus the prompt's {num_prompt_tokens} tokens exceed the context of {context} tokens "
            f"(at most {room} completion tokens fit)",
            param="max_tokens",
            code="context_length_exceeded",
        )
    return params
