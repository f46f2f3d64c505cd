"""Repetition, frequency and presence penalties on the logits of the rows that ask for them.

``repetition_penalty`` r (CTRL, Keskar et al. 2019, as vLLM and Hugging Face apply it): every
token of the prompt and the output so far has its logit divided by r when positive and
multiplied by r otherwise.  ``frequency_penalty`` f and ``presence_penalty`` p (the OpenAI API's):
each token's logit loses ``f × (its count in the output) + p × (1 if it occurs)``.  Applied on the
logits' device before masks and temperature; a grammar's mask still decides what is allowed.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from structgen.engine.request import Req
from structgen.runtime.staging import to_device


def apply_penalties(logits: torch.Tensor, reqs: Sequence[Req], rows: Sequence[int]) -> None:
    """Penalize ``logits`` (float32 ``[S, V]``, in place) at ``rows`` from each request's own
    ``SamplingParams`` and tokens so far (its output is complete at sample time: the
    previous step's tokens are processed before the next sample is launched)."""
    vocab = logits.shape[1]
    for i in rows:
        req = reqs[i]
        p = req.params
        row = logits[i]  # [V]
        if p.repetition_penalty != 1.0:
            seen = sorted({t for t in (*req.prompt_ids, *req.output_ids) if 0 <= t < vocab})
            if seen:
                idx = to_device(torch.tensor(seen, dtype=torch.int64), logits.device)  # [T]
                vals = row[idx]  # [T]
                row[idx] = torch.where(vals > 0, vals / p.repetition_penalty, vals * p.repetition_penalty)
        if (p.frequency_penalty or p.presence_penalty) and req.output_ids:
            ids = to_device(torch.tensor(req.output_ids, dtype=torch.int64), logits.device)  # [N]
            counts = torch.bincount(ids, minlength=vocab)[:vocab].to(row.dtype)  # [V]
            row -= p.frequency_penalty * counts + p.presence_penalty * (counts > 0).to(row.dtype)
