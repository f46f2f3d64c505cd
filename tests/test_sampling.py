"""The sampler's filters and draws."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structgen.engine.request import RequestError, SamplingParams
from structgen.engine.sampling import DEAD_END, FutureIds, Sampler, top_k_filter, top_p_filter


def test_top_k_top_p() -> None:
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.25, 0.25, 0.25, 0.25]]))
    k = top_k_filter(logits.clone(), [2, 0])
    assert torch.isinf(k[0, 2:]).all() and not torch.isinf(k[1]).any()
    p = top_p_filter(logits.clone(), [0.7, 1.0])
    assert not torch.isinf(p[0, :2]).any() and torch.isinf(p[0, 2:]).all() and not torch.isinf(p[1]).any()
    p = top_p_filter(logits.clone(), [0.1, 0.5])
    assert torch.isinf(p[0, 1:]).all() and (~torch.isinf(p[1])).sum() == 2


class _R:
    def __init__(self, params: SamplingParams, seed: int) -> None:
        self.params = params
        self.cursor = None
        self.generator = torch.Generator().manual_seed(seed)
        self.output_ids: list[int] = []
        self.prompt_ids: list[int] = []

    def tokens_left(self) -> int | None:
        return None

    def penalized(self) -> bool:
        p = self.params
        return p.repetition_penalty != 1.0 or bool(p.frequency_penalty) or bool(p.presence_penalty)

    def suppress_eos(self) -> bool:
        return self.cursor is None and (self.params.ignore_eos or len(self.output_ids) < self.params.min_tokens)


def test_sampler_masks_padding_ids_and_follows_distribution() -> None:
    s = Sampler(vocab_size=40, tokenizer_size=4)
    logits = torch.zeros(1, 40)
    logits[0, 30] = 100.0  # a padding id above the tokenizer: never chosen
    assert s.sample(logits, [_R(SamplingParams(), 0)]) == [0]
    r = _R(SamplingParams(temperature=1.0), 0)
    counts = np.zeros(4)
    for _ in range(2000):
        lg = torch.log(torch.tensor([[0.1, 0.2, 0.3, 0.4] + [1e-9] * 36]))
        counts[s.sample(lg, [r])[0]] += 1
    assert np.allclose(counts / counts.sum(), [0.1, 0.2, 0.3, 0.4], atol=0.04)


def test_ignore_eos_and_min_tokens_mask_eos_until_due() -> None:
    s = Sampler(vocab_size=8, tokenizer_size=8, eos_ids=[5])
    logits = torch.zeros(3, 8)
    logits[:, 5] = 50.0  # EOS is the greedy choice of every row
    plain, ignoring, early = _R(SamplingParams(), 0), _R(SamplingParams(ignore_eos=True), 1), _R(SamplingParams(min_tokens=2), 2)
    early.output_ids = [1]
    assert s.sample(logits.clone(), [plain, ignoring, early]) == [5, 0, 0]
    early.output_ids = [1, 2]  # min_tokens reached: EOS may come
    assert s.sample(logits.clone(), [plain, ignoring, early]) == [5, 0, 5]
    with pytest.raises(RequestError, match="min_tokens"):
        SamplingParams(min_tokens=-1)
    with pytest.raises(RequestError, match="ignore_eos"):
        SamplingParams(ignore_eos="yes")  # type: ignore[arg-type]


def test_penalties_follow_vllm_and_openai() -> None:
    """repetition_penalty divides positive logits of prompt and output tokens (multiplies
    negative ones); frequency / presence penalties subtract per output count / occurrence."""
    s = Sampler(vocab_size=6, tokenizer_size=6)
    base = torch.tensor([[4.0, 3.0, -1.0, 0.0, 0.0, 0.0]])
    r = _R(SamplingParams(repetition_penalty=2.0), 0)
    r.prompt_ids, r.output_ids = [0], [2]
    logits = base.clone()
    assert s.sample(logits, [r]) == [1]  # 4 / 2 = 2 < 3
    assert logits[0, 2] == -2.0 or logits[0, 2] == float("-inf")  # multiplied, or masked past the tokenizer
    f = _R(SamplingParams(frequency_penalty=1.5), 1)
    f.output_ids = [0, 0]  # 4 − 2 × 1.5 = 1 < 3
    assert s.sample(base.clone(), [f]) == [1]
    p = _R(SamplingParams(presence_penalty=0.5), 2)
    p.output_ids = [0, 0, 0]  # presence counts once: 4 − 0.5 > 3
    assert s.sample(base.clone(), [p]) == [0]
    for bad in ({"repetition_penalty": 0.0}, {"frequency_penalty": 3.0}, {"presence_penalty": -2.5}):
        with pytest.raises(RequestError, match=next(iter(bad))):
            SamplingParams(**bad)  # type: ignore[arg-type]


def test_dead_end_state_is_reported_not_sampled(tiny_vocab) -> None:  # type: ignore[no-untyped-def]
    from structgen.fsm import Constraint, GrammarCompiler

    fsm = GrammarCompiler(tiny_vocab).compile(Constraint.regex("aq"))  # no token spells "q"
    cur = fsm.cursor()
    cur.advance(tiny_vocab.token_bytes.index(b"a"))
    assert fsm.row_is_empty(cur.mask_row_index) and not fsm.row_is_empty(fsm.mask_row_index(fsm.initial))
    r = _R(SamplingParams(), 0)
    r.cursor = cur  # type: ignore[assignment]
    free = _R(SamplingParams(), 1)
    s = Sampler(vocab_size=tiny_vocab.size, tokenizer_size=tiny_vocab.size)
    out = s.sample(torch.zeros(2, tiny_vocab.size), [r, free])  # type: ignore[list-item]
    assert out[0] == DEAD_END and 0 <= out[1] < tiny_vocab.size


def test_launch_checks_active_and_drops_inactive_rows(tiny_vocab) -> None:  # type: ignore[no-untyped-def]
    from structgen.fsm import Constraint, GrammarCompiler

    s = Sampler(vocab_size=tiny_vocab.size, tokenizer_size=tiny_vocab.size, future=FutureIds(2, torch.device("cpu")))
    reqs = [_R(SamplingParams(), 0), _R(SamplingParams(temperature=1.0), 1)]
    with pytest.raises(ValueError, match="active has 1 entries for 2"):
        s.launch(torch.zeros(2, tiny_vocab.size), reqs, [True])  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="future-ids buffer of 2"):
        s.launch(torch.zeros(3, tiny_vocab.size), [*reqs, reqs[0]])  # type: ignore[list-item]
    fsm = GrammarCompiler(tiny_vocab).compile(Constraint.regex("aq"))
    cur = fsm.cursor()
    cur.advance(tiny_vocab.token_bytes.index(b"a"))  # a dead end: reported only while active
    reqs[0].cursor = cur  # type: ignore[assignment]
    before = reqs[1].generator.get_state()
    logits = torch.zeros(2, tiny_vocab.size)
    logits[:, 3] = 5.0
    out = s.launch(logits, reqs, [False, False]).result()  # type: ignore[arg-type]
    assert out == [3, 3] and torch.equal(reqs[1].generator.get_state(), before)  # greedy, unmasked, no random draw
    assert s.future is not None and s.future.ids_gpu.tolist() == [3, 3]
    assert s.launch(torch.zeros(2, tiny_vocab.size), reqs, [True, False]).result()[0] == DEAD_END  # type: ignore[arg-type]
