"""Load a local Hugging Face checkpoint folder into our own model classes, and write seeded
random-weight checkpoints of real architectures (tests, CPU demos, GPU benchmarks).

transformers is used for ``config.json`` and the tokenizer only; weights are read with
safetensors (single file, or sharded with ``model.safetensors.index.json``).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from structgen.models.llama import SUPPORTED_ARCHITECTURES, LlamaForCausalLM, ModelArgs, UnsupportedModelError, rope_inv_freq

_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)
DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
}


class ModelLoadError(ValueError):
    """The model folder is missing, incomplete or inconsistent with its config."""


def resolve_model_path(model: str | os.PathLike[str], cache_dir: str | os.PathLike[str] | None = None) -> str:
    """A local model folder for ``model``: the path itself when it exists, else, for a Hugging
    Face hub id (``org/name``), its snapshot in the local Hugging Face cache (``cache_dir``, by
    default the hub's own, ``$HF_HUB_CACHE``), found without the network as vLLM and SGLang do.
    Anything else is returned unchanged (the loader then names what is missing)."""
    path = os.fspath(model)
    if os.path.exists(path) or path.count("/") != 1 or path.startswith((".", "/")):
        return path
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        got = snapshot_download(path, cache_dir=None if cache_dir is None else os.fspath(cache_dir), local_files_only=True)
    except (LocalEntryNotFoundError, ValueError, OSError):
        return path
    return os.fspath(got)


def load_hf_config(path: str | os.PathLike[str]) -> Any:
    """``transformers.AutoConfig`` of a local folder; raises :class:`ModelLoadError` /
    :class:`UnsupportedModelError` with the folder and the supported architectures."""
    folder = Path(path)
    if folder.is_file():
        raise ModelLoadError(f"model path {str(folder)!r} is a file: give the folder that holds config.json and the weights")
    if not folder.is_dir():
        raise ModelLoadError(
            f"model folder {str(folder)!r} does not exist, nor is it a hub id in the local Hugging Face cache "
            "(models load from local folders only)"
        )
    if not (folder / "config.json").is_file():
        raise ModelLoadError(f"model folder {str(folder)!r} has no config.json")
    from transformers import AutoConfig

    try:
        json.loads((folder / "config.json").read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModelLoadError(f"{str(folder / 'config.json')!r} is not valid JSON: {exc}") from None
    try:
        return AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except (ValueError, KeyError) as exc:
        raw = json.loads((folder / "config.json").read_text())
        raise UnsupportedModelError(
            f"{str(folder)!r}: model_type {raw.get('model_type')!r} / architectures {raw.get('architectures')} is not supported; "
            f"supported: {', '.join(SUPPORTED_ARCHITECTURES)} ({exc})"
        ) from None


def _weight_files(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        return [folder / f for f in sorted(set(weight_map.values()))]
    single = folder / "model.safetensors"
    if single.is_file():
        return [single]
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ModelLoadError(f"model folder {str(folder)!r} has no *.safetensors weights")
    return files


def _iter_tensors(files: list[Path]) -> Iterator[tuple[str, torch.Tensor]]:
    from safetensors import safe_open

    for f in files:
        if not f.is_file():
            raise ModelLoadError(f"weight shard {str(f)!r} listed in the index is missing")
        with safe_open(str(f), framework="pt") as fh:
            for name in fh.keys():
                yield name, fh.get_tensor(name)


def resolve_dtype(dtype: str | torch.dtype, hf_config: Any, device: torch.device) -> torch.dtype:
    """``"auto"``: the checkpoint's dtype on CUDA, float32 on CPU.  Raises ``ValueError``."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        if device.type == "cpu":
            return torch.float32
        cfg = getattr(hf_config, "dtype", None) or getattr(hf_config, "torch_dtype", None)
        if isinstance(cfg, torch.dtype):
            return cfg if cfg in (torch.float16, torch.bfloat16, torch.float32) else torch.bfloat16
        return DTYPES.get(str(cfg).replace("torch.", ""), torch.bfloat16)
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of auto, {', '.join(DTYPES)}")
    return DTYPES[dtype]


def load_model(
    path: str | os.PathLike[str],
    *,
    dtype: str | torch.dtype = "auto",
    device: str | torch.device = "cpu",
    random_weights_seed: int | None = None,
) -> tuple[LlamaForCausalLM, Any]:
    """Build the model of a local HF folder and load its weights.

    Returns ``(model, hf_config)``; the model is in eval mode on ``device`` in ``dtype``.
    With ``random_weights_seed`` the folder needs only config.json: the weights are drawn
    directly on ``device`` (:func:`init_random_weights`), which is how benchmarks build an
    8B-parameter model on the GPU without a checkpoint.
    Raises :class:`ModelLoadError` (missing folder / files / tensors, shape mismatch) or
    :class:`UnsupportedModelError` (architecture not in ``SUPPORTED_ARCHITECTURES``).
    """
    folder = Path(path)
    hf_config = load_hf_config(folder)
    args = ModelArgs.from_hf_config(hf_config)
    dev = torch.device(device)
    torch_dtype = resolve_dtype(dtype, hf_config, dev)
    with torch.device("meta"):
        model = LlamaForCausalLM(args)
    model = model.to_empty(device=dev).to(torch_dtype)
    if args.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    model.model.rotary_emb.inv_freq = rope_inv_freq(args).to(dev)
    if random_weights_seed is not None:
        init_random_weights(model, random_weights_seed, std=float(getattr(hf_config, "initializer_range", 0.02)))
        model.eval()
        model.requires_grad_(False)
        return model, hf_config
    params = dict(model.named_parameters())
    pending = set(params)
    fused = LlamaForCausalLM.fused_shards()
    offsets = _shard_rows(args)
    shard_of = {shard: target for target, shards in fused.items() for shard in shards}
    unexpected: list[str] = []
    for name, tensor in _iter_tensors(_weight_files(folder)):
        if name.endswith(_IGNORED_SUFFIXES):
            continue
        target, rows = name, None
        for shard, fused_name in shard_of.items():
            marker = f".{shard}."
            if marker in name:
                target = name.replace(marker, f".{fused_name}.")
                rows = offsets[shard.rsplit(".", 1)[1]]
                break
        if args.tie_word_embeddings and name == "lm_head.weight":
            continue
        param = params.get(target)
        if param is None:
            unexpected.append(name)
            continue
        dst = param.data if rows is None else param.data[rows[0] : rows[0] + rows[1]]
        if tuple(dst.shape) != tuple(tensor.shape):
            raise ModelLoadError(f"tensor {name!r} has shape {tuple(tensor.shape)}, the config implies {tuple(dst.shape)}")
        dst.copy_(tensor.to(dst.dtype))
        if rows is None or rows[0] + rows[1] == param.shape[0]:
            pending.discard(target)
    if args.tie_word_embeddings:
        pending.discard("lm_head.weight")
    if unexpected:
        raise ModelLoadError(f"{str(folder)!r}: unexpected tensors for {args.architecture}: {sorted(unexpected)[:8]}")
    if pending:
        raise ModelLoadError(f"{str(folder)!r}: tensors missing from the checkpoint: {sorted(pending)[:8]}")
    model.eval()
    model.requires_grad_(False)
    return model, hf_config


def _shard_rows(args: ModelArgs) -> dict[str, tuple[int, int]]:
    """(first row, rows) of each HF projection inside its fused parameter."""
    q, kv, inter = args.num_heads * args.head_dim, args.num_kv_heads * args.head_dim, args.intermediate_size
    return {"q_proj": (0, q), "k_proj": (q, kv), "v_proj": (q + kv, kv), "gate_proj": (0, inter), "up_proj": (inter, inter)}


def hf_state_dict(model: LlamaForCausalLM) -> dict[str, torch.Tensor]:
    """The parameters of ``model`` in the Hugging Face checkpoint layout (fused ``qkv_proj`` /
    ``gate_up_proj`` split back into their projections), as views sharing ``model``'s storage:
    no copy, same device and dtype.  ``lm_head.weight`` is left out when tied."""
    rows = _shard_rows(model.args)
    out: dict[str, torch.Tensor] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        if model.args.tie_word_embeddings and name == "lm_head.weight":
            continue
        for fused_name, shards in LlamaForCausalLM.fused_shards().items():
            if f".{fused_name}." in name:
                for shard in shards:
                    first, n = rows[shard.rsplit(".", 1)[1]]
                    out[name.replace(f".{fused_name}.", f".{shard}.")] = param.detach()[first : first + n]
                break
        else:
            out[name] = param.detach()
    return out


@torch.no_grad()
def init_random_weights(model: LlamaForCausalLM, seed: int, *, std: float = 0.02) -> None:
    """Fill every parameter in place on its own device: norm weights ``1 + N(0, 0.1)``, all others
    ``N(0, std)`` (biases included), from one generator seeded with ``seed`` on that device."""
    first = next(model.parameters())
    gen = torch.Generator(device=first.device).manual_seed(seed)
    for name, param in model.named_parameters():
        if name.endswith("norm.weight"):
            param.normal_(0.0, 0.1, generator=gen).add_(1.0)
        else:
            param.normal_(0.0, std, generator=gen)


def write_model_folder(
    path: str | os.PathLike[str], config: Any, *, tokenizer_dir: str | os.PathLike[str] | None = None, chat_template: str | None = None
) -> Path:
    """Write ``config`` (a ``transformers`` config) as config.json into ``path`` and copy the
    tokenizer files of ``tokenizer_dir`` beside it (``chat_template`` added to
    tokenizer_config.json when given).  No weights: such a folder serves
    ``load_model(..., random_weights_seed=...)``."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    if not getattr(config, "architectures", None):
        config.architectures = [
            {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM"}[config.model_type]
        ]
    config.save_pretrained(str(out))
    if tokenizer_dir is not None:
        for f in Path(tokenizer_dir).iterdir():
            if f.is_file() and f.name not in ("config.json",) and not f.name.endswith((".safetensors", ".gz")):
                shutil.copyfile(f, out / f.name)
        if chat_template is not None:
            tc_path = out / "tokenizer_config.json"
            tc = json.loads(tc_path.read_text()) if tc_path.is_file() else {}
            tc["chat_template"] = chat_template
            tc_path.write_text(json.dumps(tc, indent=1))
    return out


def hf_weight_shapes(args: ModelArgs) -> dict[str, tuple[int, ...]]:
    """Every tensor name and shape of the HF checkpoint layout of ``args`` (unfused)."""
    h, q, kv, inter = args.hidden_size, args.num_heads * args.head_dim, args.num_kv_heads * args.head_dim, args.intermediate_size
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (args.vocab_size, h), "model.norm.weight": (h,)}
    if not args.tie_word_embeddings:
        shapes["lm_head.weight"] = (args.vocab_size, h)
    for i in range(args.num_layers):
        p = f"model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
        for name, out in (("q_proj", q), ("k_proj", kv), ("v_proj", kv)):
            shapes[p + f"self_attn.{name}.weight"] = (out, h)
            if args.qkv_bias:
                shapes[p + f"self_attn.{name}.bias"] = (out,)
        shapes[p + "self_attn.o_proj.weight"] = (h, q)
        if args.o_bias:
            shapes[p + "self_attn.o_proj.bias"] = (h,)
        shapes[p + "mlp.gate_proj.weight"] = (inter, h)
        shapes[p + "mlp.up_proj.weight"] = (inter, h)
        shapes[p + "mlp.down_proj.weight"] = (h, inter)
        if args.mlp_bias:
            for name, out in (("gate_proj", inter), ("up_proj", inter), ("down_proj", h)):
                shapes[p + f"mlp.{name}.bias"] = (out,)
    return shapes


def write_random_checkpoint(
    path: str | os.PathLike[str],
    config: Any,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    tokenizer_dir: str | os.PathLike[str] | None = None,
    num_shards: int = 1,
    chat_template: str | None = None,
) -> Path:
    """Write a seeded random-weight checkpoint of ``config`` (a ``transformers`` Llama / Mistral /
    Qwen2 config) to ``path`` in the HF layout: config.json, safetensors (``num_shards`` > 1 writes
    an index), and the tokenizer files of ``tokenizer_dir`` copied beside them (with
    ``chat_template`` added to tokenizer_config.json when given).

    Weights ~ N(0, initializer_range) (norm weights 1 + N(0, 0.1)), drawn from a
    ``torch.Generator`` seeded with ``seed``: the same call writes the same bytes.
    """
    from safetensors.torch import save_file

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    if not getattr(config, "architectures", None):
        config.architectures = [
            {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM"}[config.model_type]
        ]
    args = ModelArgs.from_hf_config(config)
    gen = torch.Generator().manual_seed(seed)
    std = float(getattr(config, "initializer_range", 0.02))
    tensors: dict[str, torch.Tensor] = {}
    for name, shape in hf_weight_shapes(args).items():
        if name.endswith("norm.weight"):
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        else:
            t = std * torch.randn(shape, generator=gen)
        tensors[name] = t.to(dtype).contiguous()
    names = list(tensors)
    if num_shards <= 1:
        save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    else:
        weight_map: dict[str, str] = {}
        per = -(-len(names) // num_shards)
        for s in range(num_shards):
            chunk = names[s * per : (s + 1) * per]
            fname = f"model-{s + 1:05d}-of-{num_shards:05d}.safetensors"
            save_file({n: tensors[n] for n in chunk}, str(out / fname), metadata={"format": "pt"})
            weight_map.update({n: fname for n in chunk})
        (out / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=1))
    config.dtype = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}[dtype]
    return write_model_folder(out, config, tokenizer_dir=tokenizer_dir, chat_template=chat_template)
