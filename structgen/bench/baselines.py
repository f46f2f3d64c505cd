"""Baselines for ``structgen bench json``: Hugging Face transformers ``generate()`` with a grammar
logits processor, run batch-synchronous the way their users run them.

- ``hf-xgrammar``: xgrammar's own ``xgrammar.contrib.hf.LogitsProcessor``; JSON Schemas are
  compiled with ``any_whitespace=False`` and separators ``(", ", ": ")`` (our canonical layout),
  regexes with ``compile_regex``.
- ``hf-outlines-core``: a logits processor over outlines-core ``Guide`` objects (what Outlines
  does): the schema goes through outlines-core's own converter (``build_regex_from_schema``), the
  regex into an ``Index`` over the same vocabulary; each step every row advances its guide and
  writes its bitmask (``Guide.write_mask_into``), which is unpacked and applied on the device.

Same weights as the engine: :func:`load_hf_twin` loads our model the usual way (a checkpoint, or
the same seeded random draw on the same device) and hands its tensors to the transformers model
as views, so both run the very same bf16 numbers.

Requests go in batches of ``concurrency`` (left-padded); a batch returns when its longest row
ends, so every request of a batch has the batch's latency.  TTFT is the time of the first
logits-processor call (the prefill forward done).  Grammars are compiled when a batch first
needs them (cached across batches, as the libraries do) and that time counts in the batch; a
compile past ``compile_timeout_s`` (30 s) makes its requests refused ones.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from structgen.fsm import Constraint, Vocabulary

BASELINES = ("hf-xgrammar", "hf-outlines-core")


class BaselineUnavailable(RuntimeError):
    """The baseline's library is not installed."""


def load_hf_twin(model_dir: str, *, device: torch.device, dtype: str = "auto", random_weights_seed: int | None = None) -> tuple[Any, Any]:
    """``(transformers model, hf_config)`` holding the same weights as
    ``Engine(model_dir, EngineConfig(dtype=dtype, random_weights_seed=seed))`` on ``device``:
    our loader builds the weights, and the transformers model (built on the meta device from
    the folder's config) takes them as views (no copy).  Raises ``ModelLoadError`` /
    ``UnsupportedModelError`` like the engine."""
    from transformers import AutoModelForCausalLM

    from structgen.models.loader import hf_state_dict, load_model

    ours, hf_config = load_model(model_dir, dtype=dtype, device=device, random_weights_seed=random_weights_seed)
    weights = hf_state_dict(ours)
    dt = next(ours.parameters()).dtype
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config, dtype=dt)
    model.load_state_dict(weights, strict=False, assign=True)
    rotary = model.model.rotary_emb
    with torch.device(device):  # its inv_freq buffers are not in the checkpoint: recompute them
        model.model.rotary_emb = type(rotary)(config=hf_config).to(device)
    if getattr(hf_config, "tie_word_embeddings", False):
        model.tie_weights()
    missing = [n for n, p in model.named_parameters() if p.is_meta]
    if missing:
        raise RuntimeError(f"the transformers model has parameters our checkpoint layout lacks: {missing[:4]}")
    model.eval().requires_grad_(False)
    return model, hf_config


class _Timer:
    """A logits processor that only records the time of each call (one per forward)."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.calls.append(time.perf_counter())
        return scores


class OutlinesCoreLogitsProcessor:
    """Per-row outlines-core ``Guide`` masking for ``generate()`` (one instance per call).

    ``indexes``: one outlines-core ``Index`` per batch row; ``vocab_size``: the model's logits
    width (ids past the tokenizer are never allowed); ``eos_ids``: ids that end a row (its guide
    then stops advancing).  Mask: ``int32 [B, ceil(V/32)]`` bit ``j`` of word ``w`` allows token
    ``32w + j``, filled on the host and unpacked on the logits' device.
    """

    def __init__(self, indexes: Sequence[Any], vocab_size: int, eos_ids: Sequence[int]) -> None:
        from outlines_core import Guide

        self.guides = [Guide(ix) for ix in indexes]
        self.vocab_size = vocab_size
        self.eos_ids = frozenset(eos_ids)
        self.done = [False] * len(self.guides)
        self.started = False
        words = (vocab_size + 31) // 32
        self.mask_cpu = torch.zeros(len(self.guides), words, dtype=torch.int32)  # [B, W]
        self.shifts: torch.Tensor | None = None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:  # [B, L], [B, V]
        if self.started:
            last = input_ids[:, -1].tolist()
            for i, g in enumerate(self.guides):
                if self.done[i]:
                    continue
                if last[i] in self.eos_ids:
                    self.done[i] = True
                else:
                    g.advance(last[i], return_tokens=False)
        self.started = True
        self.mask_cpu.fill_(-1)
        for i, g in enumerate(self.guides):
            if not self.done[i]:
                row = self.mask_cpu[i]
                g.write_mask_into(row.data_ptr(), row.numel(), row.element_size())
        if self.shifts is None or self.shifts.device != scores.device:
            self.shifts = torch.arange(32, device=scores.device, dtype=torch.int32)
        words = self.mask_cpu.to(scores.device, non_blocking=True)  # [B, W]
        allowed = ((words.unsqueeze(-1) >> self.shifts) & 1).view(words.shape[0], -1)[:, : scores.shape[1]]  # [B, V]
        return scores.masked_fill(allowed == 0, float("-inf"))


class _Grammars:
    """Compiled grammars of one baseline, cached by constraint key."""

    def __init__(self, name: str, tokenizer: Any, vocab: Vocabulary, vocab_size: int, eos_ids: Sequence[int]) -> None:
        self.name, self.vocab_size, self.eos_ids = name, vocab_size, list(eos_ids)
        self.cache: dict[str, Any] = {}
        try:
            if name == "hf-xgrammar":
                import xgrammar as xgr

                info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=self.eos_ids)
                self.xgr_compiler = xgr.GrammarCompiler(info)
            else:
                import outlines_core

                tokens: dict[bytes, list[int]] = {}
                for i, b in enumerate(vocab.token_bytes):
                    if b and i not in vocab.special_ids:
                        tokens.setdefault(b, []).append(i)
                self.oc_vocab = outlines_core.Vocabulary(self.eos_ids[0], tokens)
        except ImportError as e:
            raise BaselineUnavailable(f"baseline {name!r} needs {e.name}: pip install structgen[dev]") from e

    def get(self, c: Constraint, timeout_s: float) -> Any:
        """The compiled grammar (xgrammar ``CompiledGrammar`` / outlines-core ``Index``).
        Raises whatever the library raises for a constraint it refuses, or ``TimeoutError``
        after ``timeout_s`` (the compile goes on in a daemon thread, its result unused); both
        outcomes are cached."""
        if c.key not in self.cache:
            box: list[Any] = []

            def work() -> None:
                try:
                    box.append(self._compile(c))
                except Exception as e:  # the library's refusal, re-raised below
                    box.append(e)

            t = threading.Thread(target=work, daemon=True, name=f"{self.name}-compile")
            t.start()
            t.join(timeout_s)
            self.cache[c.key] = box[0] if box else TimeoutError(f"{self.name}: compile took over {timeout_s:g} s")
        hit = self.cache[c.key]
        if isinstance(hit, Exception):
            raise hit
        return hit

    def _compile(self, c: Constraint) -> Any:
        if self.name == "hf-xgrammar":
            if c.kind == "regex":
                return self.xgr_compiler.compile_regex(c.text)
            return self.xgr_compiler.compile_json_schema(c.text, any_whitespace=False, separators=(", ", ": "))
        from outlines_core import Index
        from outlines_core.json_schema import build_regex_from_schema

        regex = c.text if c.kind == "regex" else build_regex_from_schema(c.text)
        return Index(regex, self.oc_vocab)

    def processor(self, grammars: list[Any]) -> Any:
        """A fresh logits processor for one ``generate()`` call over ``grammars`` (one per row)."""
        if self.name == "hf-xgrammar":
            from xgrammar.contrib.hf import LogitsProcessor

            return LogitsProcessor(grammars)
        return OutlinesCoreLogitsProcessor(grammars, self.vocab_size, self.eos_ids)


class HFBaseline:
    """A transformers model plus one grammar backend, run batch-synchronous.

    ``name``: one of :data:`BASELINES`; ``model``/``tokenizer``: a transformers causal LM (see
    :func:`load_hf_twin`) and its tokenizer; ``vocab``: our :class:`Vocabulary` of that
    tokenizer; ``eos_ids``: the ids that end a request; ``compile_timeout_s``: a grammar that
    takes longer makes its requests ``error`` records.  Raises :class:`BaselineUnavailable`
    when the grammar library is missing and ``ValueError`` for an unknown name.
    """

    def __init__(
        self, name: str, model: Any, tokenizer: Any, vocab: Vocabulary, eos_ids: Sequence[int], compile_timeout_s: float = 30.0
    ) -> None:
        if name not in BASELINES:
            raise ValueError(f"unknown baseline {name!r}; choose from {', '.join(BASELINES)}")
        self.name, self.model, self.tokenizer, self.eos_ids = name, model, tokenizer, list(eos_ids)
        self.compile_timeout_s = compile_timeout_s
        self.device = next(model.parameters()).device
        self.grammars = _Grammars(name, tokenizer, vocab, model.config.vocab_size, eos_ids)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]

    @torch.no_grad()
    def run_batch(self, batch: Sequence[Any], constrained: bool = True) -> list[Any]:
        """Generate greedily for ``batch`` (``BenchRequest``s) in one ``generate()`` call and
        return one ``bench_json.Record`` each (times from the batch's start).  A constraint the
        library refuses (or compiles past the timeout) makes that request an ``error`` record
        (and leaves it out of the batch); out of device memory makes the whole batch ``error``."""
        from transformers import GenerationConfig, LogitsProcessorList

        from structgen.bench.report import Record, valid_output

        t0 = time.perf_counter()
        records: list[Any] = [None] * len(batch)
        rows: list[int] = []
        grammars: list[Any] = []
        for i, r in enumerate(batch):
            if constrained:
                try:
                    grammars.append(self.grammars.get(r.constraint, self.compile_timeout_s))
                except Exception:  # any refusal of the library is a refused request
                    records[i] = Record(0, 0, 0, 0, 0, 0.0, 0.0, "error", False)
                    continue
            rows.append(i)
        if rows:
            encoded = [list(self.tokenizer(batch[i].prompt)["input_ids"]) for i in rows]  # as Engine.tokenize does
            width = max(len(e) for e in encoded)
            ids_cpu = torch.tensor([[self.pad_id] * (width - len(e)) + e for e in encoded])  # [B, L] left-padded
            attn_cpu = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded])  # [B, L]
            ids = ids_cpu.to(self.device)
            timer = _Timer()
            procs: list[Any] = [timer]
            if constrained:
                procs.insert(0, self.grammars.processor(grammars))
            gen = GenerationConfig(
                max_new_tokens=max(batch[i].max_tokens for i in rows), do_sample=False, eos_token_id=self.eos_ids,
                pad_token_id=self.pad_id,
            )  # fmt: skip
            try:
                out = self.model.generate(
                    input_ids=ids, attention_mask=attn_cpu.to(self.device), generation_config=gen,
                    logits_processor=LogitsProcessorList(procs),
                )  # fmt: skip
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
                for i in rows:
                    records[i] = Record(0, 0, 0, 0, 0, 0.0, 0.0, "error", False)
                return records
            latency = time.perf_counter() - t0
            ttft = (timer.calls[0] if timer.calls else time.perf_counter()) - t0
            new = out[:, ids.shape[1] :].tolist()  # [B, T]
            lengths = [len(e) for e in encoded]
            for row, i in enumerate(rows):
                toks = new[row]
                stop = next((k for k, t in enumerate(toks) if t in self.eos_ids), None)
                body = toks if stop is None else toks[:stop]
                text = self.tokenizer.decode(body, skip_special_tokens=False)
                n = len(toks) if stop is None else stop + 1
                reason = "stop" if stop is not None else "length"
                ok = valid_output(batch[i].constraint, text)  # the text as returned, cut or not
                records[i] = Record(lengths[row], 0, n, 0, len(timer.calls), ttft, latency, reason, ok)
        return records

    def run(
        self, requests: Sequence[Any], concurrency: int, constrained: bool = True, on_done: Callable[[], None] | None = None
    ) -> tuple[list[Any], float]:
        """All ``requests`` in batches of ``concurrency``: (records in input order, wall seconds)."""
        t0 = time.perf_counter()
        records: list[Any] = []
        for s in range(0, len(requests), concurrency):
            records += self.run_batch(requests[s : s + concurrency], constrained)
            if on_done is not None:
                for _ in range(min(concurrency, len(requests) - s)):
                    on_done()
        return records, time.perf_counter() - t0


DESCRIPTIONS = {
    "hf-xgrammar": "transformers generate() + xgrammar.contrib.hf.LogitsProcessor (any_whitespace=False), batch-synchronous",
    "hf-outlines-core": "transformers generate() + outlines-core Guide masks (its build_regex_from_schema), batch-synchronous",
}
