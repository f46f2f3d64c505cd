"""Request-level types: sampling parameters, the caller's request, outputs and usage."""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

if TYPE_CHECKING:
    from structgen.engine.radix_cache import TreeNode
    from structgen.fsm import Constraint, Cursor


class RequestError(ValueError):
    """A request that cannot be served as given (prompt too long, bad parameter); names the field.

    ``param``: the offending field (``"prompt"``, ``"max_tokens"``, …) or None; ``code``: a
    machine-readable reason where one is standard (``"context_length_exceeded"``) or None."""

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


@dataclass(frozen=True)
class SamplingParams:
    """Per-request decoding parameters (validated on construction; ``RequestError`` names the field).

    ``max_tokens`` ≥ 1 completion tokens (forced tokens included; None: the room the context
    leaves after the prompt); ``temperature`` ≥ 0 (0: greedy);
    ``top_k`` ≥ 0 (0: off); ``top_p`` in (0, 1]; ``seed``: per-request generator seed
    (reproducible whatever the batch); ``stop``: strings that end the output (not included);
    ``jump_forward``: None follows the engine default; ``budget_completion``: in a constrained
    request, once ``max_tokens`` comes near, only tokens after which the output can still be
    completed within ``max_tokens`` are allowed, so it ends valid instead of cut (guaranteed
    for vocabularies with every byte as a token and ``max_tokens`` ≥ the shortest valid
    output's bytes); False cuts at ``max_tokens`` as vLLM and SGLang do (finish reason
    "length"); ``ignore_eos``: never sample EOS, so the output runs to ``max_tokens`` (throughput
    benchmarks); ``min_tokens``: no EOS before that many output tokens (stop strings still
    apply).  Both are for requests without a constraint, whose grammar decides where they end.
    ``repetition_penalty`` > 0 (1: off), ``frequency_penalty`` and ``presence_penalty`` in
    [-2, 2] (0: off): :mod:`structgen.engine.penalties`.
    """

    max_tokens: int | None = 256
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    jump_forward: bool | None = None
    budget_completion: bool = True
    ignore_eos: bool = False
    min_tokens: int = 0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0

    def __post_init__(self) -> None:
        m = self.max_tokens
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
            raise RequestError(f"max_tokens must be an integer ≥ 1, got {self.max_tokens!r}", param="max_tokens")
        if not isinstance(self.temperature, (int, float)) or not math.isfinite(self.temperature) or self.temperature < 0:
            raise RequestError(f"temperature must be a finite number ≥ 0, got {self.temperature!r}", param="temperature")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise RequestError(f"top_k must be an integer ≥ 0 (0 disables it), got {self.top_k!r}", param="top_k")
        if not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1:
            raise RequestError(f"top_p must be in (0, 1], got {self.top_p!r}", param="top_p")
        if self.seed is not None and (not isinstance(self.seed, int) or self.seed < 0):
            raise RequestError(f"seed must be a non-negative integer, got {self.seed!r}", param="seed")
        if not isinstance(self.budget_completion, bool):
            raise RequestError(f"budget_completion must be a boolean, got {self.budget_completion!r}", param="budget_completion")
        if not isinstance(self.ignore_eos, bool):
            raise RequestError(f"ignore_eos must be a boolean, got {self.ignore_eos!r}", param="ignore_eos")
        if isinstance(self.min_tokens, bool) or not isinstance(self.min_tokens, int) or self.min_tokens < 0:
            raise RequestError(f"min_tokens must be an integer ≥ 0, got {self.min_tokens!r}", param="min_tokens")
        rp = self.repetition_penalty
        if isinstance(rp, bool) or not isinstance(rp, (int, float)) or not math.isfinite(rp) or rp <= 0:
            raise RequestError(f"repetition_penalty must be a number > 0 (1: off), got {rp!r}", param="repetition_penalty")
        for name in ("frequency_penalty", "presence_penalty"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not -2 <= v <= 2:
                raise RequestError(f"{name} must be a number in [-2, 2] (0: off), got {v!r}", param=name)
        if isinstance(self.stop, str):  # type: ignore[unreachable]  # callers may pass one string
            object.__setattr__(self, "stop", (self.stop,))  # type: ignore[unreachable]
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise RequestError(f"stop must be non-empty strings, got {self.stop!r}", param="stop")


@dataclass(frozen=True)
class GenerateRequest:
    """What a caller submits: a prompt (text, chat messages, or token ids), sampling
    parameters and an optional constraint."""

    prompt: Any
    params: SamplingParams = field(default_factory=SamplingParams)
    constraint: Constraint | None = None


class Usage(NamedTuple):
    """Token accounting of one request.

    ``completion_tokens`` = ``sampled_tokens`` + ``forced_tokens`` − ``rolled_back_tokens`` (an EOS
    that ends the output counts as sampled and completion).  ``cached_tokens``: prompt tokens
    served by the radix cache.  ``forwards``: model forwards the request took part in.
    ``ttft_s`` / ``latency_s`` / ``queue_s``: seconds from submission to the first token / to the
    end / to the first forward that included it; ``grammar_s``: seconds from submission until its
    grammar was compiled (or failed to; 0 without a constraint); the prompt prefills meanwhile
    (``SchedulerConfig.prefill_while_compiling``), so ``queue_s`` may end first.
    """

    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    sampled_tokens: int
    forced_tokens: int
    rolled_back_tokens: int
    forwards: int
    retractions: int
    ttft_s: float
    latency_s: float
    queue_s: float = 0.0
    grammar_s: float = 0.0


class RequestOutput(NamedTuple):
    """Final result: ``finish_reason`` in {"stop", "length", "error", "abort"}; ``error`` set
    (and ``text`` possibly partial) when it is "error"; ``stop_reason``: the stop string that
    ended the output (its text cut before it, so a constrained output may be incomplete), None
    otherwise (vLLM's field).  ``token_ids``: the output's tokens without the EOS that ended
    it, which ``usage.completion_tokens`` does count (a token the model produced, as vLLM and the
    OpenAI API count it): ``completion_tokens == len(token_ids) + 1`` after a sampled EOS."""

    rid: int
    text: str
    token_ids: list[int]
    finish_reason: str
    usage: Usage
    error: BaseException | None = None
    stop_reason: str | None = None


class StreamChunk(NamedTuple):
    """Incremental output: ``delta`` is new text only (rolled-back tokens never repeat text);
    the last chunk of a request has ``finished`` True with its finish reason, usage and
    ``stop_reason`` (the stop string that ended it, if one did)."""

    rid: int
    delta: str
    finished: bool
    finish_reason: str | None = None
    usage: Usage | None = None
    error: BaseException | None = None
    stop_reason: str | None = None


class Status(enum.Enum):
    GRAMMAR = "waiting for grammar"  # and not queued for prefill (prefill_while_compiling off)
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class Req:
    """Engine-internal state of one request (host side).

    Token positions: ``prompt_ids + output_ids`` is the request's sequence; the first ``kv_len``
    have KV slots (row ``req_pool_idx`` of the req-to-token pool); the first
    ``cache_protected_len`` of those belong to the radix cache (pinned through ``last_node``).
    With the overlap scheduler, ``kv_len`` counts tokens whose forward was launched, and may
    exceed the sequence by the one sampled token still on the device (``sample_ref``) or by a
    launched one whose sample went stale.
    """

    rid: int
    prompt_ids: list[int]
    params: SamplingParams
    jump_forward: bool
    constraint: Constraint | None
    generator: torch.Generator
    arrival_s: float
    cursor: Cursor | None = None
    output_ids: list[int] = field(default_factory=list)
    status: Status = Status.WAITING
    kv_len: int = 0
    cache_protected_len: int = 0
    last_node: TreeNode | None = None
    req_pool_idx: int | None = None
    prefill_done: bool = False
    finish_reason: str | None = None
    error: BaseException | None = None
    stop_at: int | None = None
    matched_stop: str | None = None  # the stop string found at stop_at
    eos_sampled: bool = False
    budget_narrowed: bool = False  # a budget-restricted mask row left out tokens the plain row allows
    cached_tokens: int = 0
    sampled_tokens: int = 0
    forced_tokens: int = 0
    rolled_back_tokens: int = 0
    forwards: int = 0
    retractions: int = 0
    wait_steps: int = 0
    scheduled_s: float | None = None
    grammar_s: float = 0.0  # seconds from arrival until the grammar compiled (or failed)
    first_token_s: float | None = None
    finished_s: float | None = None
    sent_bytes: int = 0
    text_cache: bytearray = field(default_factory=bytearray)  # bytes of output_ids[:text_tokens]
    text_tokens: int = 0
    stop_scanned: int = 0  # bytes of text_cache already searched for stop strings
    sample_ref: int | None = None  # placeholder id of this request's sampled token still on the device (overlap)
    # [V] float32 on the device: logits kept while the grammar compiles or a row worker computes the mask row
    held_logits: torch.Tensor | None = None
    version: int = 0  # bumped when the sequence changes other than by its sampled token (a launched sample goes stale)

    @property
    def max_tokens(self) -> int:
        """``params.max_tokens``, resolved by :meth:`Engine.check_context` before the request is queued."""
        m = self.params.max_tokens
        assert m is not None, "max_tokens is resolved when the request is submitted"
        return m

    @property
    def grammar_pending(self) -> bool:
        """Whether this request's grammar is still compiling (a constraint, no cursor yet)."""
        return self.constraint is not None and self.cursor is None

    @property
    def seq_len(self) -> int:
        return len(self.prompt_ids) + len(self.output_ids)

    @property
    def pending(self) -> int:
        """Tokens of the sequence without KV yet (what the next forward must extend), counting
        a sampled token the host has not seen yet (:attr:`sample_ref`)."""
        return self.seq_len + (self.sample_ref is not None) - self.kv_len

    def penalized(self) -> bool:
        """Whether this request's logits get a repetition, frequency or presence penalty."""
        p = self.params
        return p.repetition_penalty != 1.0 or bool(p.frequency_penalty) or bool(p.presence_penalty)

    def suppress_eos(self) -> bool:
        """Whether EOS is masked out of this request's next sample (``ignore_eos``, or fewer
        output tokens than ``min_tokens``; requests without a constraint only)."""
        p = self.params
        return self.cursor is None and (p.ignore_eos or len(self.output_ids) < p.min_tokens)

    def tokens_left(self) -> int | None:
        """Output tokens this request may still emit (≥ 1 while it runs), or None when its
        masks ignore the budget: unconstrained, ``budget_completion`` off, or a language whose
        longest string fits in ``max_tokens`` (every token spells ≥ 1 byte, so it cannot be
        cut)."""
        if self.cursor is None or not self.params.budget_completion:
            return None
        longest = self.cursor.fsm.dfa.length_bound
        if longest is not None and longest <= self.max_tokens:
            return None
        return max(self.max_tokens - len(self.output_ids), 1)

    def token_at(self, start: int, end: int) -> list[int]:
        """Sequence tokens ``[start, end)``."""
        p = len(self.prompt_ids)
        if end <= p:
            return self.prompt_ids[start:end]
        if start >= p:
            return self.output_ids[start - p : end - p]
        return self.prompt_ids[start:] + self.output_ids[: end - p]

    def output_bytes(self, vocab_bytes: Sequence[bytes]) -> bytearray:
        """The output's bytes (``vocab_bytes[t]`` per output token), cached: only the tokens
        added since the last call are joined.  The cache is owned by this request; callers must
        not modify it."""
        if self.text_tokens < len(self.output_ids):
            self.text_cache += b"".join(vocab_bytes[t] for t in self.output_ids[self.text_tokens :])
            self.text_tokens = len(self.output_ids)
        return self.text_cache

    def visible_bytes(self, vocab_bytes: Sequence[bytes]) -> bytearray:
        """:meth:`output_bytes` cut at the stop string that finished the request (if any)."""
        data = self.output_bytes(vocab_bytes)
        return data if self.stop_at is None else data[: self.stop_at]

    def rollback(self, n: int, vocab_bytes: Sequence[bytes]) -> None:
        """Drop the last ``n`` output tokens (jump-forward re-tokenization), trimming the byte
        cache and the stop-string scan mark to what is left."""
        gone = self.output_ids[-n:]
        del self.output_ids[-n:]
        self.rolled_back_tokens += n
        if self.text_tokens > len(self.output_ids):
            cut = sum(len(vocab_bytes[t]) for t in gone[: self.text_tokens - len(self.output_ids)])
            del self.text_cache[len(self.text_cache) - cut :]
            self.text_tokens = len(self.output_ids)
        self.stop_scanned = min(self.stop_scanned, len(self.text_cache))

    def find_stop(self, vocab_bytes: Sequence[bytes]) -> bool:
        """Search the output bytes not searched yet (plus the overlap a stop string can span)
        for ``params.stop``; on a hit sets ``stop_at`` (byte offset of the earliest one) and
        returns True."""
        data = self.output_bytes(vocab_bytes)
        stops = [s.encode() for s in self.params.stop]
        start = max(0, self.stop_scanned - max(len(s) for s in stops) + 1)
        hits = [(i, k) for k, i in enumerate(data.find(s, start) for s in stops) if i >= 0]
        self.stop_scanned = len(data)
        if hits:
            self.stop_at, k = min(hits)
            self.matched_stop = self.params.stop[k]
        return bool(hits)

    def usage(self) -> Usage:
        end = self.finished_s if self.finished_s is not None else self.arrival_s
        first = self.first_token_s if self.first_token_s is not None else end
        return Usage(
            prompt_tokens=len(self.prompt_ids),
            cached_tokens=self.cached_tokens,
            completion_tokens=len(self.output_ids) + int(self.eos_sampled),
            sampled_tokens=self.sampled_tokens,
            forced_tokens=self.forced_tokens,
            rolled_back_tokens=self.rolled_back_tokens,
            forwards=self.forwards,
            retractions=self.retractions,
            ttft_s=first - self.arrival_s,
            latency_s=end - self.arrival_s,
            queue_s=(self.scheduled_s if self.scheduled_s is not None else end) - self.arrival_s,
            grammar_s=self.grammar_s,
        )
