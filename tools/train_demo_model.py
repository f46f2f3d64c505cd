"""Train the embedded demo extraction model: a small Llama on the project's synthetic extraction
pairs (:mod:`structgen.demo.data`).  Plain PyTorch loop, bf16 autocast, AdamW with warmup + cosine
decay, fixed seed; the weights kept are those of the validation step whose greedy argmax
reproduces the most validation answers.  Runs on one GPU in a few minutes (H200: see the model
card for the figure).

    python tools/train_demo_model.py tokenizer --out structgen/assets/demo-extractor     # CPU, seconds
    python tools/train_demo_model.py train --tokenizer structgen/assets/demo-extractor --out OUT   # GPU
    python tools/train_demo_model.py plot OUT/train_log.json OUT/loss.png

The tokenizer is a byte-level BPE trained with the ``tokenizers`` library on the training split
(4,096 tokens): GPT-2's 50,257-token vocabulary alone would take 19.3M parameters of embeddings at
this width, more than the whole model and over the 25 MB package budget.  The model is trained
with ``transformers.LlamaForCausalLM`` (the same architecture our engine runs) and exported as a
Hugging Face folder in bf16.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from structgen.demo.data import SOURCES, generate_examples

ROOT = Path(__file__).resolve().parents[1]

CHAT_TEMPLATE = (
    "{% set fields = messages | selectattr('role', 'equalto', 'system') | map(attribute='content') | join(' ') %}"
    "{% set text = messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(' ') %}"
    "Extract the fields as JSON.\nFields: {{ fields }}\nText: {{ text }}\n{% if add_generation_prompt %}JSON: {% endif %}"
)
EOS = "<|endoftext|>"
VALIDATION_SEED_OFFSET = 7  # the validation stream: held-out split, seed + 7 (benchmarks score seed 0)
PAD = "<|pad|>"
MODEL_SHAPE: dict[str, Any] = {  # 11.75M parameters: 23.5 MB in bf16, inside the 25 MB package budget
    "hidden_size": 384,
    "intermediate_size": 960,
    "num_hidden_layers": 6,
    "num_attention_heads": 6,
    "num_key_value_heads": 6,
    "max_position_embeddings": 1024,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True,
}


def train_tokenizer(out: str, *, vocab_size: int = 4096, examples: int = 40000, seed: int = 0) -> None:
    """Byte-level BPE on ``examples`` training pairs (prompt + answer); saved as a Hugging Face
    fast tokenizer (tokenizer.json, tokenizer_config.json with the chat template)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    texts = [e.prompt + e.target for e in generate_examples(examples, "train", seed)]
    tok = Tokenizer(models.BPE())
    # digits split one by one: numbers are copied digit by digit instead of through ~1,000
    # multi-digit tokens the model would have to learn one by one
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[EOS, PAD], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), min_frequency=2
    )
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=PAD)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    print(f"tokenizer: {len(fast)} tokens -> {out}")


def _encode(tok: Any, examples: list[Any], max_len: int) -> list[tuple[Any, int]]:
    """(ids as ``int16 [T]``, prompt length) per example: prompt and answer tokenized apart, as
    at inference (the engine sees the prompt's tokens, then generates the answer's), then EOS."""
    import numpy as np

    prompts = tok([e.prompt for e in examples], add_special_tokens=False)["input_ids"]
    targets = tok([e.target for e in examples], add_special_tokens=False)["input_ids"]
    out = []
    for p, t in zip(prompts, targets):
        ids = p + t + [tok.eos_token_id]
        if len(ids) <= max_len:
            out.append((np.array(ids, dtype=np.int16), len(p)))
    return out


def _encode_chunk(job: tuple[str, int, str, int, int, str, float]) -> list[tuple[Any, int]]:
    """Worker: generate and encode one chunk (tokenizer folder, count, split, seed, max_len,
    source, natural share)."""
    from transformers import AutoTokenizer

    tok_dir, n, split, seed, max_len, source, share = job
    tok = AutoTokenizer.from_pretrained(tok_dir)
    return _encode(tok, list(generate_examples(n, split, seed, source, share)), max_len)


def encode_examples(
    tok_dir: str, n: int, split: str, seed: int, max_len: int, source: str, share: float, chunk: int = 25_000
) -> list[tuple[Any, int]]:
    """``n`` examples of ``split`` from ``source`` (:func:`generate_examples`) encoded in parallel
    chunks; chunk ``i`` uses generator seed ``seed * 100_000 + i`` (deterministic for a given
    ``n``, ``seed`` and ``chunk``)."""
    import multiprocessing as mp

    jobs = [
        (tok_dir, min(chunk, n - i * chunk), split, seed * 100_000 + i, max_len, source, share) for i in range((n + chunk - 1) // chunk)
    ]
    with mp.get_context("spawn").Pool(min(len(jobs), os.cpu_count() or 1)) as pool:
        parts = pool.map(_encode_chunk, jobs)
    return [row for part in parts for row in part]


def _batch(rows: list[tuple[Any, int]], pad_id: int, device: Any) -> tuple[Any, Any]:
    import torch

    n = max(len(ids) for ids, _ in rows)
    x = torch.full((len(rows), n), pad_id, dtype=torch.long)  # [B, T]
    y = torch.full((len(rows), n), -100, dtype=torch.long)  # [B, T] labels: answer + EOS only
    for i, (ids, plen) in enumerate(rows):
        x[i, : len(ids)] = torch.from_numpy(ids)
        y[i, plen : len(ids)] = torch.from_numpy(ids[plen:])
    return x.to(device, non_blocking=True), y.to(device, non_blocking=True)


Rows = list[tuple[Any, int]]


def length_grouped_batches(rows: Rows, batch_size: int, rng: random.Random, group: int = 8) -> Iterator[Rows]:
    """Endless random batches of ``batch_size`` rows: ``group`` batches' worth of rows is sampled
    at a time, sorted by length and cut into batches served in random order, so that a batch is
    padded to a length close to its rows' own (HF ``group_by_length``).  Deterministic for a given
    ``rng``.  Raises ``ValueError`` when there are fewer rows than one batch."""
    if len(rows) < batch_size:
        raise ValueError(f"{len(rows)} training sequences fit --max-len, fewer than one batch of {batch_size}")
    while True:
        pool = sorted(rng.sample(rows, min(len(rows), batch_size * group)), key=lambda r: len(r[0]))
        chunks = [pool[i : i + batch_size] for i in range(0, len(pool), batch_size)]
        rng.shuffle(chunks)
        yield from (c for c in chunks if len(c) == batch_size)


def train(args: argparse.Namespace) -> None:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(args.seed)
    random.seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tok = AutoTokenizer.from_pretrained(args.tokenizer)
    t0 = time.perf_counter()
    train_rows = encode_examples(args.tokenizer, args.examples, "train", args.seed, args.max_len, args.source, args.natural_share)
    # validation: the held-out distribution (unseen templates and values) from a stream of its
    # own, so that picking the best step never looks at the examples benchmarks/demo_model.py scores
    held = generate_examples(args.eval_examples, "heldout", args.seed + VALIDATION_SEED_OFFSET, args.source, args.natural_share)
    held_rows = _encode(tok, list(held), args.max_len)
    print(f"data: {len(train_rows)} train / {len(held_rows)} validation sequences in {time.perf_counter() - t0:.1f} s", flush=True)

    config = LlamaConfig(
        vocab_size=len(tok), bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, **MODEL_SHAPE
    )
    if args.init:  # continue from a trained folder of the same shape and tokenizer
        model = LlamaForCausalLM.from_pretrained(args.init, torch_dtype=torch.float32)
        if model.config.vocab_size != len(tok):
            raise SystemExit(f"--init {args.init}: vocabulary of {model.config.vocab_size} tokens, the tokenizer has {len(tok)}")
    else:
        model = LlamaForCausalLM(config)
    torch.nn.Module.to(model, device)  # in place; transformers types its own .to() as a decorator
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f}M parameters", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr,
        betas=(0.9, 0.95),
        fused=device.type == "cuda",
    )

    def lr_at(step: int, elapsed_s: float = 0.0) -> float:
        """Warmup, then cosine decay to 10% over whichever budget ends first: ``--steps`` or
        ``--max-train-s`` (so that a run cut by the time cap still ends at the low rate)."""
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        progress = min(1.0, max((step - args.warmup) / max(1, args.steps - args.warmup), elapsed_s / args.max_train_s))
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))

    def validate() -> tuple[float, float]:
        """(loss, exact rate) on the validation rows: the exact rate is the share of examples
        whose every answer token is the argmax given the true prefix, i.e. those that greedy
        decoding reproduces whole (a closer proxy for field exact match than the loss, which a
        few confidently wrong values dominate)."""
        model.eval()
        total, count, exact = 0.0, 0, 0
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16):
            for i in range(0, len(held_rows), 256):
                x, y = _batch(held_rows[i : i + 256], tok.pad_token_id, device)
                out = model(input_ids=x, labels=y)
                target = y[:, 1:]  # [B, T-1]
                hit = (out.logits[:, :-1].argmax(-1) == target) | (target == -100)  # [B, T-1]
                n = int((target != -100).sum())
                total += float(out.loss) * n
                count += n
                exact += int(hit.all(dim=1).sum())
        model.train()
        return total / count, exact / len(held_rows)

    batches = length_grouped_batches(train_rows, args.batch_size, random.Random(args.seed))
    log: dict[str, Any] = {
        "step": [],
        "loss": [],
        "lr": [],
        "eval_step": [],
        "eval_loss": [],
        "eval_exact": [],
        "config": vars(args),
        "params": n_params,
    }
    model.train()
    best: tuple[tuple[float, float], int, dict[str, Any] | None] = ((-1.0, 0.0), -1, None)
    t0 = time.perf_counter()
    for step in range(args.steps):
        if time.perf_counter() - t0 > args.max_train_s:
            print(f"stopping at step {step}: --max-train-s {args.max_train_s} reached", flush=True)
            log["stopped_at"] = step
            break
        lr = lr_at(step, time.perf_counter() - t0)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = _batch(next(batches), tok.pad_token_id, device)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=y).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 25 == 0 or step == args.steps - 1:
            log["step"].append(step)
            log["loss"].append(loss.item())
            log["lr"].append(lr)
        if step % 500 == 0 or step == args.steps - 1:
            ev, exact = validate()
            log["eval_step"].append(step)
            log["eval_loss"].append(ev)
            log["eval_exact"].append(exact)
            if (exact, -ev) > best[0]:  # keep the weights that reproduce the most validation answers
                best = ((exact, -ev), step, {k: v.detach().clone() for k, v in model.state_dict().items()})
            print(
                f"step {step}: train loss {loss.item():.4f}, validation loss {ev:.4f}, exact {exact:.4f}, {time.perf_counter() - t0:.0f} s",
                flush=True,
            )
    log["train_s"] = time.perf_counter() - t0
    out = Path(args.out)
    if args.save_final:  # the last step's weights too, to pick between them on other sets
        model.bfloat16().save_pretrained(out / "final", safe_serialization=True)
        tok.save_pretrained(out / "final")
        model.float()
    if best[2] is not None:
        model.load_state_dict(best[2])
        log["best_step"], log["best_eval_exact"], log["best_eval_loss"] = best[1], best[0][0], -best[0][1]
        print(f"keeping step {best[1]} (validation exact {best[0][0]:.4f}, loss {-best[0][1]:.4f})", flush=True)
    log["device"] = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"

    out.mkdir(parents=True, exist_ok=True)
    model.bfloat16().save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    (out / "train_log.json").write_text(json.dumps(log))
    print(f"saved to {out} ({sum(f.stat().st_size for f in out.iterdir()) / 1e6:.1f} MB); trained in {log['train_s']:.0f} s", flush=True)
    try:
        plot(str(out / "train_log.json"), str(out / "loss.png"))
    except ImportError:
        print("matplotlib missing: no loss plot", flush=True)


def plot(log_path: str, png: str) -> None:
    """Loss curves (training loss per 25 steps, validation loss and exact rate per 500) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    log = json.loads(Path(log_path).read_text())
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(log["step"], log["loss"], label="training batch loss", linewidth=1)
    ax.plot(log["eval_step"], log["eval_loss"], "o-", label="validation loss (held-out templates and values)")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy on answer tokens (nats)")
    ax.set_title(f"demo extractor, {log['params'] / 1e6:.1f}M parameters, {log.get('device', '')}")
    lines, labels = ax.get_legend_handles_labels()
    if log.get("eval_exact"):
        ax2 = ax.twinx()
        ax2.plot(log["eval_step"], log["eval_exact"], "s--", color="tab:green", label="validation answers reproduced (argmax)")
        ax2.set_ylabel("share of validation answers reproduced")
        more = ax2.get_legend_handles_labels()
        lines, labels = lines + more[0], labels + more[1]
    ax.legend(lines, labels, loc="center right")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tokenizer")
    t.add_argument("--out", required=True)
    t.add_argument("--vocab-size", type=int, default=4096)
    tr = sub.add_parser("train")
    tr.add_argument("--tokenizer", required=True)
    tr.add_argument("--out", required=True)
    tr.add_argument("--examples", type=int, default=1_600_000)
    tr.add_argument("--steps", type=int, default=10_000)
    tr.add_argument("--batch-size", type=int, default=256)
    tr.add_argument("--lr", type=float, default=2e-3)
    tr.add_argument("--warmup", type=int, default=200)
    tr.add_argument("--weight-decay", type=float, default=0.1)
    tr.add_argument("--max-len", type=int, default=384)
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--eval-examples", type=int, default=4000, help="validation examples (held-out distribution, seed + 7)")
    tr.add_argument("--max-train-s", type=float, default=420.0, help="stop early past this many seconds of training")
    tr.add_argument("--source", default="mixed", choices=SOURCES, help="training data (structgen.demo.data)")
    tr.add_argument("--natural-share", type=float, default=0.6, help="share of natural sentences with --source mixed")
    tr.add_argument("--init", default=None, help="start from this trained model folder (same tokenizer) instead of random weights")
    tr.add_argument("--save-final", action="store_true", help="also save the last step's weights under OUT/final")
    p = sub.add_parser("plot")
    p.add_argument("log")
    p.add_argument("png")
    args = ap.parse_args()
    if args.cmd == "tokenizer" and args.vocab_size < 258:
        ap.error("--vocab-size must be ≥ 258 (256 bytes + EOS + PAD)")
    if args.cmd == "train":
        for name in ("examples", "steps", "batch_size", "max_len", "eval_examples"):
            if getattr(args, name) < 1:
                ap.error(f"--{name.replace('_', '-')} must be ≥ 1")
        if args.examples < args.batch_size:
            ap.error(f"--examples ({args.examples}) must be ≥ --batch-size ({args.batch_size})")
        if args.warmup < 0 or args.lr <= 0 or args.max_train_s <= 0:
            ap.error("--warmup must be ≥ 0, --lr and --max-train-s > 0")
        if not os.path.isdir(args.tokenizer):
            ap.error(f"--tokenizer {args.tokenizer!r} is not a folder")
        if args.init and not os.path.isdir(args.init):
            ap.error(f"--init {args.init!r} is not a folder")
        if not 0.0 <= args.natural_share <= 1.0:
            ap.error("--natural-share must be in [0, 1]")
    if args.cmd == "tokenizer":
        train_tokenizer(args.out, vocab_size=args.vocab_size)
    elif args.cmd == "train":
        train(args)
    else:
        plot(args.log, args.png)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
