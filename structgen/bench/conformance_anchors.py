"""The anchors of ``structgen bench conformance``: llguidance and xgrammar run on the same
schemas, instances and tokenizer as structgen, in the same worker processes (each engine on a
schema is a task of its own, so an anchor that kills its worker costs only its own result), so
one command reads all three.

Each anchor compiles the schema with JSON Schema's semantics (xgrammar ``strict_mode=False``:
undeclared properties allowed, as structgen's conformance options; llguidance's defaults) and
structgen's layout (``", "`` / ``": "``, no other whitespace), then walks every test instance's
tokens (the Hugging Face tokenizer's encoding of the same texts structgen walks).  A refusal
(llguidance reports unimplemented keys, xgrammar raises) is *unsupported*; an invalid instance
accepted is *unsound*.  Timings: *first mask* = compile + the initial token bitmask;
*token µs* = consume one token + compute the next bitmask, over the first
``TIMED_TOKENS`` tokens of the first accepted instance.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from structgen.bench.conformance_items import tally

ANCHORS = ("llguidance", "xgrammar")
TIMED_TOKENS = 64


@dataclass
class AnchorResult:
    """One anchor on one schema (fields as :class:`~.conformance_items.ItemResult`'s)."""

    outcome: str = "error"  # compiled | unsupported | error
    detail: str = ""
    passing: bool = False
    valid_total: int = 0
    valid_accepted: int = 0
    invalid_total: int = 0
    invalid_accepted: int = 0
    first_mask_ms: float = 0.0
    token_ns: list[int] = field(default_factory=list)


class Anchor:
    """A loaded anchor: ``compile(schema)`` → matcher, ``walk(matcher, ids)`` → accepted."""

    def __init__(self, name: str, tokenizer_path: str) -> None:
        if name not in ANCHORS:
            raise ValueError(f"unknown anchor {name!r}; choose from {', '.join(ANCHORS)}")
        from transformers import AutoTokenizer

        self.name = name
        self.hf = AutoTokenizer.from_pretrained(tokenizer_path)
        self.eos = self.hf.eos_token_id
        if name == "llguidance":
            import llguidance
            import llguidance.hf

            self._llg = llguidance
            self.tok = llguidance.hf.from_tokenizer(self.hf)  # type: ignore[arg-type]
        else:
            import torch
            import xgrammar as xgr

            self._xgr = xgr
            info = xgr.TokenizerInfo.from_huggingface(self.hf)
            # one compile thread per worker, as structgen and llguidance use: the workers are
            # the parallelism (xgrammar's default of 8 threads each oversubscribes the cores)
            self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
            self.bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)
            self._torch = torch

    def compile(self, schema: Any) -> tuple[Any, str | None]:
        """(matcher with its first bitmask computed, None) or (None, why it was refused)."""
        text = json.dumps(schema)
        if self.name == "llguidance":
            llg = self._llg
            grammar = llg.LLMatcher.grammar_from_json_schema(
                text, defaults={"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
            )
            m = llg.LLMatcher(self.tok, grammar, log_level=0)
            if m.is_error():
                return None, m.get_error()[:200]
            m.compute_bitmask()
            return m, None
        try:
            compiled = self.compiler.compile_json_schema(text, any_whitespace=False, separators=(", ", ": "), strict_mode=False)
        except Exception as e:  # xgrammar raises RuntimeError / ValueError on what it cannot compile
            return None, f"{type(e).__name__}: {str(e)[:200]}"
        m = self._xgr.GrammarMatcher(compiled)
        m.fill_next_token_bitmask(self.bitmask)
        return m, None

    def walk(self, m: Any, ids: list[int], timings: list[int] | None = None) -> bool:
        """Whether the matcher accepts ``ids`` as a complete output (then end of sequence)."""
        m.reset()
        for t in ids:
            t0 = time.perf_counter_ns()
            ok = m.consume_token(t) if self.name == "llguidance" else m.accept_token(t)
            if not ok:
                return False
            if timings is not None and len(timings) < TIMED_TOKENS:
                if self.name == "llguidance":
                    m.compute_bitmask()
                else:
                    m.fill_next_token_bitmask(self.bitmask)
                timings.append(time.perf_counter_ns() - t0)
        if self.name == "llguidance":
            return bool(m.is_accepting())
        return bool(self.eos is not None and m.accept_token(self.eos) and m.is_terminated())


def anchor_version(name: str) -> str:
    """The installed version of anchor ``name`` ("missing" when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "missing"


def summarize_anchor(results: list[Any], name: str) -> dict[str, Any]:
    """One anchor's totals over ``results`` (ItemResults carrying ``anchors[name]``)."""
    from collections import Counter

    from structgen.bench.common import percentile

    rs = [r.anchors[name] for r in results if name in r.anchors]
    compiled = [a for a in rs if a["outcome"] == "compiled"]
    first = [a["first_mask_ms"] for a in compiled]
    tokens = [x / 1000 for a in compiled for x in a["token_ns"]]

    def pct(xs: list[float], q: float) -> float:
        return percentile(xs, q, interpolate=True) if xs else float("nan")

    return {
        "schemas": len(rs),
        "compiled": len(compiled),
        "passing": sum(a["passing"] for a in compiled),
        "passing_pct": 100 * sum(a["passing"] for a in compiled) / len(rs) if rs else 0.0,
        "unsupported": sum(a["outcome"] == "unsupported" for a in rs),
        "errors": sum(a["outcome"] == "error" for a in rs),
        "errors_by_kind": dict(Counter(a["detail"] for a in rs if a["outcome"] == "error").most_common(5)),
        "valid_instances": sum(a["valid_total"] for a in compiled),
        "valid_accepted": sum(a["valid_accepted"] for a in compiled),
        "invalid_instances": sum(a["invalid_total"] for a in compiled),
        "soundness_violations_instances": sum(a["invalid_accepted"] for a in compiled),
        "unsound_schemas": sum(1 for a in compiled if a["invalid_accepted"]),
        "first_mask_ms": {"p50": pct(first, 0.5), "p90": pct(first, 0.9), "p99": pct(first, 0.99)},
        "token_us": {"p50": pct(tokens, 0.5), "mean": sum(tokens) / len(tokens) if tokens else float("nan")},
        "both": _on_both(results, name, pct),
    }


def _on_both(results: list[Any], name: str, pct: Any) -> dict[str, Any]:
    """First mask (ms) and cold token (µs) figures of structgen and anchor ``name`` over only the
    schemas both compiled: the timings compared on the same schemas."""
    both = [r for r in results if r.outcome == "compiled" and r.anchors.get(name, {}).get("outcome") == "compiled"]
    out: dict[str, Any] = {"schemas": len(both)}
    for engine, first, tokens in (
        ("structgen", [r.first_mask_ms for r in both], [x / 1000 for r in both for x in r.token_ns_cold]),
        (name, [r.anchors[name]["first_mask_ms"] for r in both], [x / 1000 for r in both for x in r.anchors[name]["token_ns"]]),
    ):
        out[engine] = {
            "first_mask_ms": {"p50": pct(first, 0.5), "p90": pct(first, 0.9), "p99": pct(first, 0.99)},
            "token_us": {"p50": pct(tokens, 0.5), "mean": sum(tokens) / len(tokens) if tokens else float("nan")},
        }
    return out


def run_anchor(anchor: Anchor, schema: Any, texts_per_test: list[tuple[list[str], bool]]) -> AnchorResult:
    """Compile ``schema`` with ``anchor`` and check each test (its candidate texts, valid)."""
    res = AnchorResult()
    t0 = time.perf_counter()
    try:
        m, why = anchor.compile(schema)
    except Exception as e:  # a crash of the anchor is its error, recorded
        res.detail = f"crash:{type(e).__name__}"
        return res
    if m is None:
        res.outcome, res.detail = "unsupported", why or ""
        return res
    res.first_mask_ms = (time.perf_counter() - t0) * 1000
    res.outcome = "compiled"
    passing = True
    for texts, valid in texts_per_test:
        accepted = False
        for text in texts:
            ids = anchor.hf.encode(text, add_special_tokens=False)
            timings = res.token_ns if not res.token_ns else None
            if anchor.walk(m, ids, timings):
                accepted = True
                break
        passing &= tally(res, accepted, valid)
    res.passing = passing
    return res
