"""Llama-family decoder (Llama 2/3/3.1, Mistral, Qwen2) over a flattened token batch.

One implementation covers the three architectures; they differ only in config:
Qwen2 has q/k/v biases, Mistral (and Qwen2 with ``use_sliding_window``) a sliding window, Llama 3.1
the ``llama3`` RoPE frequency scaling.  The layout follows the Hugging Face reference modules so
the checkpoints load unchanged, except that q/k/v and gate/up projections are fused into one
matmul each at load time (as in vLLM and SGLang).

Shapes: a forward takes ``T`` tokens of several requests flattened together (prefill chunks,
jump-forward extends and one-token decodes side by side); attention reads and writes the paged KV
pool through an :class:`~structgen.runtime.attention.AttentionBackend` planned once per forward.

Sources: Touvron et al. 2023 (Llama 2), Grattafiori et al. 2024 (Llama 3, ``llama3`` RoPE
scaling), Jiang et al. 2023 (Mistral sliding window), Yang et al. 2024 (Qwen2); RoPE from Su et
al. 2021 in the "rotate half" layout of the HF checkpoints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from structgen import kernels

if TYPE_CHECKING:
    from structgen.runtime.attention import AttentionBackend


class UnsupportedModelError(ValueError):
    """The checkpoint's architecture or one of its config options is not implemented."""


SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM")


@dataclass(frozen=True)
class ModelArgs:
    """The architecture hyper-parameters read from a Hugging Face ``config.json``.

    ``layer_windows``: per layer, the sliding-window size in tokens or 0 for full attention.
    ``rope``: the RoPE parameters (``rope_type`` in {"default", "llama3", "linear"}, ``rope_theta``
    and the type's own keys).  Raises :class:`UnsupportedModelError` in ``__post_init__`` for
    shapes the implementation cannot run.
    """

    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    hidden_act: str
    layer_windows: tuple[int, ...]
    rope: tuple[tuple[str, Any], ...]

    def __post_init__(self) -> None:
        if self.architecture not in SUPPORTED_ARCHITECTURES:
            raise UnsupportedModelError(
                f"architecture {self.architecture!r} is not supported; supported: {', '.join(SUPPORTED_ARCHITECTURES)}"
            )
        if self.num_heads % self.num_kv_heads:
            raise UnsupportedModelError(
                f"num_attention_heads={self.num_heads} is not a multiple of num_key_value_heads={self.num_kv_heads}"
            )
        if self.hidden_act not in ("silu", "swish"):
            raise UnsupportedModelError(f"hidden_act={self.hidden_act!r} is not supported (SwiGLU with silu only)")
        rope_type = dict(self.rope).get("rope_type", "default")
        if rope_type not in ("default", "llama3", "linear"):
            raise UnsupportedModelError(f"rope type {rope_type!r} is not supported; supported: default, llama3, linear")
        if len(self.layer_windows) != self.num_layers:
            raise UnsupportedModelError(f"layer_types lists {len(self.layer_windows)} layers, num_hidden_layers={self.num_layers}")

    @classmethod
    def from_hf_config(cls, config: Any) -> ModelArgs:
        """Read a ``transformers.PretrainedConfig`` (transformers ≥ 5 ``rope_parameters`` or the
        older ``rope_scaling`` + ``rope_theta``).  Raises :class:`UnsupportedModelError`."""
        archs = list(getattr(config, "architectures", None) or [])
        arch = (
            archs[0]
            if archs
            else {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM"}.get(
                getattr(config, "model_type", ""), f"<model_type {getattr(config, 'model_type', '?')}>"
            )
        )
        if arch not in SUPPORTED_ARCHITECTURES:
            raise UnsupportedModelError(f"architecture {arch!r} is not supported; supported: {', '.join(SUPPORTED_ARCHITECTURES)}")
        heads = int(config.num_attention_heads)
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        rope = getattr(config, "rope_parameters", None)
        if not rope:
            rope = dict(getattr(config, "rope_scaling", None) or {})
            rope.setdefault("rope_theta", getattr(config, "rope_theta", 10000.0))
        rope = dict(rope)
        rope["rope_type"] = rope.get("rope_type", rope.get("type", "default"))
        rope.pop("type", None)
        num_layers = int(config.num_hidden_layers)
        window = int(getattr(config, "sliding_window", None) or 0)
        layer_types = getattr(config, "layer_types", None)
        if arch == "Qwen2ForCausalLM" and not getattr(config, "use_sliding_window", False):
            windows = (0,) * num_layers
        elif layer_types:
            windows = tuple(window if t == "sliding_attention" else 0 for t in layer_types)
        else:
            windows = (window,) * num_layers
        qkv_bias = arch == "Qwen2ForCausalLM" or bool(getattr(config, "attention_bias", False))
        return cls(
            architecture=arch,
            vocab_size=int(config.vocab_size),
            hidden_size=int(config.hidden_size),
            intermediate_size=int(config.intermediate_size),
            num_layers=num_layers,
            num_heads=heads,
            num_kv_heads=int(getattr(config, "num_key_value_heads", None) or heads),
            head_dim=int(head_dim),
            rms_norm_eps=float(config.rms_norm_eps),
            max_position_embeddings=int(config.max_position_embeddings),
            tie_word_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
            qkv_bias=qkv_bias,
            o_bias=arch != "Qwen2ForCausalLM" and bool(getattr(config, "attention_bias", False)),
            mlp_bias=bool(getattr(config, "mlp_bias", False)),
            hidden_act=str(getattr(config, "hidden_act", "silu")),
            layer_windows=windows,
            rope=tuple(sorted(rope.items())),
        )


def rope_inv_freq(args: ModelArgs) -> torch.Tensor:
    """``float32 [head_dim / 2]`` RoPE inverse frequencies, with ``llama3`` / ``linear`` scaling.

    ``llama3``: wavelengths longer than ``original_max_position_embeddings / low_freq_factor`` are
    divided by ``factor``, shorter than ``… / high_freq_factor`` kept, and the band between
    interpolated (Llama 3.1 technical report, and the HF reference implementation).
    """
    p = dict(args.rope)
    theta = float(p.get("rope_theta", 10000.0))
    d = args.head_dim
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    kind = p.get("rope_type", "default")
    if kind == "linear":
        inv = inv / float(p["factor"])
    elif kind == "llama3":
        factor = float(p["factor"])
        low, high = float(p["low_freq_factor"]), float(p["high_freq_factor"])
        old_ctx = float(p["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > old_ctx / low, inv / factor, inv)
        smooth = (old_ctx / wavelen - low) / (high - low)
        mid = (wavelen >= old_ctx / high) & (wavelen <= old_ctx / low)
        inv = torch.where(mid, (1 - smooth) * scaled / factor + smooth * scaled, scaled)
    return inv.to(torch.float32)


class RMSNorm(nn.Module):
    """Root-mean-square layer norm (Zhang & Sennrich 2019), computed in float32.  Inside the
    decoder layers the projections apply it (``kernels.linear(norm_weight=…)``); ``forward`` is
    the final norm."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [T, H] -> [T, H]
        return kernels.rms_norm(x, self.weight, self.eps)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (RoFormer, rotate-half layout) applied in place to the q and k
    heads of the fused qkv projection; angles are computed from positions on the fly."""

    inv_freq: torch.Tensor  # float32 [D/2]

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.register_buffer("inv_freq", rope_inv_freq(args), persistent=False)
        self.num_rot_heads = args.num_heads + args.num_kv_heads
        self.head_dim = args.head_dim

    def forward(self, positions: torch.Tensor, qkv: torch.Tensor) -> None:  # [T], [T, (H + 2KH) D]
        kernels.rope_qkv_inplace(qkv, positions, self.inv_freq, self.num_rot_heads, self.head_dim)


def norm_project(h: torch.Tensor, pending: torch.Tensor | None, norm: RMSNorm, proj: nn.Linear) -> tuple[torch.Tensor, torch.Tensor]:
    """``(proj(norm(h + pending)) [T, out], h + pending [T, H])``.  Without ``pending`` the norm
    goes into ``kernels.linear`` (fused into the GEMV where that is the fma kernel) and ``h`` is
    returned as is; with it the add and the norm run as one ``fused_add_rms_norm`` (HF's
    rounding), whose sum is the new stream."""
    if pending is None:
        return kernels.linear(h, proj.weight, proj.bias, norm_weight=norm.weight, eps=norm.eps), h
    normed, summed = kernels.fused_add_rms_norm(pending, h, norm.weight, norm.eps)
    return kernels.linear(normed, proj.weight, proj.bias), summed


def residual_project(x: torch.Tensor, proj: nn.Linear, h: torch.Tensor, *, gated: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``h + proj(x)`` (``x`` SwiGLU-gated when ``gated``) as ``(h, pending)``: added into ``h``
    in place by the projection itself where that costs no kernel (``kernels.adds_in_place``:
    CUDA, M ≤ 8), giving ``(h, None)``; otherwise ``(h, proj(x))``, the add left to the next
    norm."""
    if kernels.adds_in_place(x, proj.weight):
        return kernels.linear(x, proj.weight, proj.bias, gated=gated, residual=h), None
    return h, kernels.linear(x, proj.weight, proj.bias, gated=gated)


class Attention(nn.Module):
    def __init__(self, args: ModelArgs, layer_id: int) -> None:
        super().__init__()
        self.layer_id = layer_id
        self.num_heads = args.num_heads
        self.num_kv_heads = args.num_kv_heads
        self.head_dim = args.head_dim
        self.window = args.layer_windows[layer_id]
        self.q_size = args.num_heads * args.head_dim
        self.kv_size = args.num_kv_heads * args.head_dim
        self.qkv_proj = nn.Linear(args.hidden_size, self.q_size + 2 * self.kv_size, bias=args.qkv_bias)
        self.o_proj = nn.Linear(self.q_size, args.hidden_size, bias=args.o_bias)
        self.scale = args.head_dim**-0.5

    def forward(
        self,
        h: torch.Tensor,
        pending: torch.Tensor | None,
        norm: RMSNorm,
        positions: torch.Tensor,
        rotary: RotaryEmbedding,
        backend: AttentionBackend,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``h + o_proj(attention(qkv_proj(norm(h))))`` on the residual stream ``h [T, hidden]``
        (with ``pending``, the previous projection not yet added, added first); see
        :func:`residual_project` for the returned pair."""
        qkv, h = norm_project(h, pending, norm, self.qkv_proj)  # [T, q + 2kv]
        out = backend.forward_qkv(
            self.layer_id, qkv, positions, rotary.inv_freq, num_heads=self.num_heads, num_kv_heads=self.num_kv_heads,
            head_dim=self.head_dim, scale=self.scale, window=self.window,
        )  # fmt: skip  # [T, H, D]
        return residual_project(out.reshape(-1, self.q_size), self.o_proj, h)


class MLP(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.gate_up_proj = nn.Linear(args.hidden_size, 2 * args.intermediate_size, bias=args.mlp_bias)
        self.down_proj = nn.Linear(args.intermediate_size, args.hidden_size, bias=args.mlp_bias)

    def forward(self, h: torch.Tensor, pending: torch.Tensor | None, norm: RMSNorm) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``h + down_proj(silu(gate) · up)`` of ``gate_up_proj(norm(h))``, as :meth:`Attention.forward`."""
        gate_up, h = norm_project(h, pending, norm, self.gate_up_proj)  # [T, 2I]
        return residual_project(gate_up, self.down_proj, h, gated=True)


class DecoderLayer(nn.Module):
    def __init__(self, args: ModelArgs, layer_id: int) -> None:
        super().__init__()
        self.self_attn = Attention(args, layer_id)
        self.mlp = MLP(args)
        self.input_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps)

    def forward(
        self, h: torch.Tensor, pending: torch.Tensor | None, positions: torch.Tensor, rotary: RotaryEmbedding, backend: AttentionBackend
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One pre-norm decoder layer on the residual stream: returns ``(h, pending)`` as
        :func:`residual_project`.  At decode sizes on CUDA each norm rides in the projection
        after it where that is the fma GEMV (qkv at M = 1), and each residual add in the
        projection before it, so a layer has no separate add kernel."""
        h, pending = self.self_attn(h, pending, self.input_layernorm, positions, rotary, backend)
        return self.mlp(h, pending, self.post_attention_layernorm)


class LlamaModel(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(args, i) for i in range(args.num_layers))
        self.norm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.rotary_emb = RotaryEmbedding(args)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, backend: AttentionBackend) -> torch.Tensor:
        h = self.embed_tokens(input_ids)  # [T, H]: a fresh tensor, the residual stream
        pending: torch.Tensor | None = None
        for layer in self.layers:
            h, pending = layer(h, pending, positions, self.rotary_emb, backend)
        if pending is not None:
            return kernels.fused_add_rms_norm(pending, h, self.norm.weight, self.norm.eps)[0]
        return self.norm(h)  # type: ignore[no-any-return]


class LlamaForCausalLM(nn.Module):
    """Llama / Mistral / Qwen2 causal LM.  ``forward(input_ids [T] int64, positions [T] int64,
    backend)`` returns final hidden states ``[T, hidden]``; :meth:`compute_logits` maps selected
    rows to float32 logits ``[S, vocab_size]``."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.args = args
        self.model = LlamaModel(args)
        self.lm_head = nn.Linear(args.hidden_size, args.vocab_size, bias=False)
        if args.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, backend: AttentionBackend) -> torch.Tensor:
        return self.model(input_ids, positions, backend)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:  # [S, H] -> [S, V] float32
        return kernels.linear(hidden, self.lm_head.weight, None).float()

    # The fused parameters and the HF checkpoint tensors that fill them, in order.
    @staticmethod
    def fused_shards() -> dict[str, tuple[str, ...]]:
        return {
            "self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
            "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj"),
        }


Qwen2ForCausalLM = LlamaForCausalLM
MistralForCausalLM = LlamaForCausalLM
