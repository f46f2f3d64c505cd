"""Request bodies of the HTTP API (pydantic models, unknown fields rejected) and the error shape.

``StructuredRequest`` is structgen's own ``POST /v1/structured``; ``ChatCompletionRequest`` and
``CompletionRequest`` follow the OpenAI API (the fields the official ``openai`` client sends).
Fields we cannot honour are refused with a 400 naming the field rather than ignored.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from structgen.engine.request import SamplingParams

Whitespace = Literal["canonical", "compact", "flexible"]


class APIError(Exception):
    """An error answered as ``{"error": {"message", "type", "param", "code"}}`` with ``status``."""

    def __init__(self, status: int, message: str, *, type: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ChatMessage(_Strict):
    """One chat message; ``content`` is text or a list of ``{"type": "text", "text": ...}`` parts."""

    role: Literal["system", "user", "assistant", "developer", "tool"]
    content: str | list[dict[str, Any]]
    name: str | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        parts = []
        for i, part in enumerate(self.content):
            if part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ValueError(f"content[{i}]: only text parts ({{'type': 'text', 'text': ...}}) are supported")
            parts.append(part["text"])
        return "".join(parts)


class _Sampling(_Strict):
    max_tokens: int | None = Field(None, ge=1, description="completion tokens (forced ones included); default: the room left")
    temperature: float = Field(1.0, ge=0.0, le=100.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    seed: int | None = Field(None, ge=0, lt=2**63)
    stop: str | list[str] | None = None
    stream: bool = False
    repetition_penalty: float = Field(1.0, gt=0.0, description="vLLM / SGLang / HF; 1: off")
    frequency_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    presence_penalty: float = Field(0.0, ge=-2.0, le=2.0)

    @model_validator(mode="after")
    def _check_stop(self) -> _Sampling:
        stops = [self.stop] if isinstance(self.stop, str) else (self.stop or [])
        if len(stops) > 16 or any(not s or len(s) > 256 for s in stops):
            raise ValueError("stop: at most 16 non-empty strings of at most 256 characters")
        return self

    def stop_tuple(self) -> tuple[str, ...]:
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())

    def sampling_params(self) -> SamplingParams:
        """The body's decoding parameters (``max_tokens`` None: the room the context leaves).
        Raises ``RequestError`` naming a field out of range."""
        return SamplingParams(
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            seed=self.seed,
            stop=self.stop_tuple(),
            repetition_penalty=self.repetition_penalty,
            frequency_penalty=self.frequency_penalty,
            presence_penalty=self.presence_penalty,
        )


class StructuredRequest(_Sampling):
    """``POST /v1/structured``: ``prompt`` or ``messages``; at most one of ``json_schema`` and
    ``regex`` (neither: free text); ``strict`` False drops unenforceable keywords and
    post-validates (a failure is an error); ``budget_completion`` False cuts at ``max_tokens``
    instead of steering the output to end valid within it."""

    prompt: str | None = None
    messages: list[ChatMessage] | None = None
    json_schema: dict[str, Any] | bool | None = None
    regex: str | None = Field(None, max_length=65536)
    temperature: float = Field(0.0, ge=0.0, le=100.0)
    top_k: int = Field(0, ge=0)
    jump_forward: bool = True
    budget_completion: bool = True
    whitespace: Whitespace = "canonical"
    strict: bool = True
    model: str | None = None

    def sampling_params(self) -> SamplingParams:
        params = super().sampling_params()
        return replace(params, top_k=self.top_k, jump_forward=self.jump_forward, budget_completion=self.budget_completion)

    @model_validator(mode="after")
    def _check_inputs(self) -> StructuredRequest:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of prompt and messages")
        if self.json_schema is not None and self.regex is not None:
            raise ValueError("give at most one of json_schema and regex")
        if self.messages is not None and not self.messages:
            raise ValueError("messages must not be empty")
        return self


class JSONSchemaFormat(_Strict):
    name: str = Field(..., max_length=64)
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    description: str | None = None
    strict: bool | None = None


class ResponseFormat(_Strict):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JSONSchemaFormat | None = None

    @model_validator(mode="after")
    def _check(self) -> ResponseFormat:
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("response_format.json_schema is required when type is 'json_schema'")
        return self


class StreamOptions(_Strict):
    include_usage: bool = False


class StructuredOutputs(_Strict):
    """vLLM's ``structured_outputs`` request field (one of ``json``, ``regex``, ``choice``,
    ``json_object``; ``grammar`` and ``structural_tag`` are refused by name)."""

    json_: dict[str, Any] | bool | str | None = Field(None, alias="json")
    regex: str | None = Field(None, max_length=65536)
    choice: list[str] | None = Field(None, min_length=1)
    grammar: str | None = None
    json_object: bool | None = None
    structural_tag: str | dict[str, Any] | None = None
    whitespace_pattern: str | None = None
    disable_any_whitespace: bool = False  # structgen's JSON layout never has free whitespace
    disable_fallback: bool = False  # there is no other backend to fall back to
    disable_additional_properties: bool = False  # undeclared properties are never generated


class _PeerFields(_Sampling):
    """Request fields of vLLM and SGLang that clients of either send in ``extra_body``: honoured
    where they have a meaning here, refused by name otherwise (never "extra inputs")."""

    top_k: int | None = Field(None, ge=-1, description="-1 or 0: off (vLLM / SGLang)")
    min_p: float = Field(0.0, ge=0.0, le=1.0)
    min_tokens: int = Field(0, ge=0)
    min_new_tokens: int = Field(0, ge=0)
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    no_stop_trim: bool = False
    chat_template_kwargs: dict[str, Any] | None = None
    structured_outputs: StructuredOutputs | None = None
    guided_json: dict[str, Any] | bool | str | None = None
    guided_regex: str | None = Field(None, max_length=65536)
    guided_choice: list[str] | None = Field(None, min_length=1)
    guided_grammar: str | None = None
    guided_whitespace_pattern: str | None = None
    guided_decoding_backend: str | None = None  # one backend here: accepted, no effect
    regex: str | None = Field(None, max_length=65536)  # SGLang
    json_schema: dict[str, Any] | bool | str | None = None  # SGLang (a JSON string there)
    ebnf: str | None = None  # SGLang

    @model_validator(mode="after")
    def _peer_unsupported(self) -> _PeerFields:
        if self.min_p:
            raise ValueError("min_p: not supported (must be 0)")
        if not self.skip_special_tokens or not self.spaces_between_special_tokens:
            raise ValueError("skip_special_tokens / spaces_between_special_tokens: only true is supported")
        if self.include_stop_str_in_output or self.no_stop_trim:
            raise ValueError("include_stop_str_in_output / no_stop_trim: not supported (a stop string is never part of the output)")
        for name in ("add_generation_prompt", "tokenize", "conversation", "messages"):
            if name in (self.chat_template_kwargs or {}):
                raise ValueError(f"chat_template_kwargs: {name!r} is set by the server")
        return self

    def sampling_params(self) -> SamplingParams:
        params = super().sampling_params()
        min_tokens = max(self.min_tokens, self.min_new_tokens)
        return replace(
            params,
            top_k=max(self.top_k or 0, 0),
            ignore_eos=self.ignore_eos,
            min_tokens=min_tokens,
        )


class _OpenAICommon(_PeerFields):
    model: str
    n: int = 1
    stream_options: StreamOptions | None = None
    user: str | None = None
    logprobs: bool | int | None = None
    logit_bias: dict[str, float] | None = None

    @model_validator(mode="after")
    def _unsupported(self) -> _OpenAICommon:
        if self.n != 1:
            raise ValueError("n: only n=1 is supported")
        if self.logprobs:
            raise ValueError("logprobs: not supported")
        if self.logit_bias:
            raise ValueError("logit_bias: not supported")
        return self


class ChatCompletionRequest(_OpenAICommon):
    """``POST /v1/chat/completions`` (OpenAI).  ``response_format`` json_schema / json_object
    constrain the message content; ``max_completion_tokens`` is an alias of ``max_tokens``."""

    messages: list[ChatMessage] = Field(..., min_length=1)
    response_format: ResponseFormat | None = None
    max_completion_tokens: int | None = Field(None, ge=1)
    top_logprobs: int | None = None

    @model_validator(mode="after")
    def _tokens(self) -> ChatCompletionRequest:
        if self.max_completion_tokens is not None:
            if self.max_tokens is not None and self.max_tokens != self.max_completion_tokens:
                raise ValueError("max_tokens and max_completion_tokens disagree")
            self.max_tokens = self.max_completion_tokens
        if self.top_logprobs:
            raise ValueError("top_logprobs: not supported")
        return self


class CompletionRequest(_OpenAICommon):
    """``POST /v1/completions`` (OpenAI): one prompt (text, or token ids); ``max_tokens`` defaults to 16."""

    prompt: str | list[int] | list[str] | list[list[int]]
    max_tokens: int | None = Field(16, ge=1)
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = None

    @model_validator(mode="after")
    def _single(self) -> CompletionRequest:
        p = self.prompt
        if isinstance(p, list) and p and isinstance(p[0], (str, list)):
            if len(p) != 1:
                raise ValueError("prompt: only one prompt per request is supported")
            self.prompt = p[0]
        if not self.prompt:
            raise ValueError("prompt must not be empty")
        if self.echo:
            raise ValueError("echo: not supported")
        if self.suffix:
            raise ValueError("suffix: not supported")
        if self.best_of not in (None, 1):
            raise ValueError("best_of: only 1 is supported")
        return self
