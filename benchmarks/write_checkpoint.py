"""Write a seeded random-weight checkpoint of a preset (bf16 safetensors + config + tokenizer),
the weights drawn on the GPU exactly as ``structgen serve --random-weights-seed`` draws them, so
that every engine of a peer race reads the same bytes.

Usage: ``python benchmarks/write_checkpoint.py PRESET TOKENIZER_DIR OUT_DIR [--seed 0]``
(PRESET e.g. ``llama3-8b``; needs CUDA for the 8B presets: 16 GB of bf16 drawn in seconds).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

from structgen.models.loader import hf_state_dict, load_model
from structgen.models.presets import write_preset_folder


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("preset")
    ap.add_argument("tokenizer")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    t0 = time.perf_counter()
    folder = write_preset_folder(args.preset, args.out, tokenizer_dir=args.tokenizer)
    model, _cfg = load_model(folder, dtype="bfloat16", device=args.device, random_weights_seed=args.seed)
    tensors = {name: t.detach().to("cpu").contiguous() for name, t in hf_state_dict(model).items()}
    del model
    save_file(tensors, str(Path(folder) / "model.safetensors"), metadata={"format": "pt"})
    size = sum(t.numel() * t.element_size() for t in tensors.values())
    print(
        f"wrote {args.preset} seed {args.seed}: {len(tensors)} tensors, {size / 1e9:.2f} GB in {time.perf_counter() - t0:.1f} s to {folder}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
