"""Read an HF `config.json` into the few numbers a megatron-core GPTModel needs.

No per-model shell file is needed: Llama, Mistral (full attention), Qwen2 and Qwen3 are all
"pre-norm RMSNorm, RoPE (rotate-half), GQA, SwiGLU" decoders and differ only in the switches
recorded here (q/k layernorm, qkv bias, tied embeddings, rope theta, norm eps). Megatron's own
model flags (`--num-layers`, `--hidden-size`, ...) may still override a value; a checkpoint
whose shapes then disagree fails loudly when the weights are loaded.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# model_type -> (qk_layernorm, qkv_bias default). Qwen2 always has q/k/v biases.
_FAMILIES: dict[str, tuple[bool, bool | None]] = {
    "llama": (False, None),
    "mistral": (False, None),
    "qwen2": (False, True),
    "qwen3": (True, None),
}


class UnsupportedModelError(ValueError):
    """The HF model uses a feature the Megatron backend does not convert."""


@dataclass(frozen=True)
class GPTSpec:
    """Architecture of a dense decoder, in HF terms; the single source for build and conversion."""

    model_type: str
    num_layers: int
    hidden_size: int
    ffn_hidden_size: int
    num_attention_heads: int
    num_query_groups: int
    kv_channels: int  # head_dim
    vocab_size: int
    max_position_embeddings: int
    rotary_base: float
    norm_epsilon: float
    qk_layernorm: bool
    qkv_bias: bool
    tie_word_embeddings: bool

    @property
    def heads_per_group(self) -> int:
        return self.num_attention_heads // self.num_query_groups

    def validate(self) -> None:
        if self.num_attention_heads % self.num_query_groups:
            raise UnsupportedModelError(
                f"num_attention_heads={self.num_attention_heads} is not a multiple of "
                f"num_key_value_heads={self.num_query_groups}")

    def check_parallel(self, tp: int, pp: int) -> None:
        """Megatron splits query groups and the FFN over TP ranks and layers over PP stages."""
        problems = []
        if self.num_query_groups % tp:
            problems.append(f"num_key_value_heads={self.num_query_groups} not divisible by TP={tp}")
        if self.ffn_hidden_size % tp:
            problems.append(f"intermediate_size={self.ffn_hidden_size} not divisible by TP={tp}")
        if self.num_layers % pp:
            problems.append(f"num_hidden_layers={self.num_layers} not divisible by PP={pp}")
        if problems:
            raise ValueError("invalid parallel layout for this model: " + "; ".join(problems))


# Megatron flag (argparse dest) -> GPTSpec field, for overrides.
OVERRIDE_FLAGS: dict[str, str] = {
    "num_layers": "num_layers",
    "hidden_size": "hidden_size",
    "ffn_hidden_size": "ffn_hidden_size",
    "num_attention_heads": "num_attention_heads",
    "num_query_groups": "num_query_groups",
    "kv_channels": "kv_channels",
    "max_position_embeddings": "max_position_embeddings",
    "rotary_base": "rotary_base",
    "norm_epsilon": "norm_epsilon",
    "qk_layernorm": "qk_layernorm",
    "add_qkv_bias": "qkv_bias",
    "vocab_size": "vocab_size",
}


def _rope_theta(cfg: dict[str, Any]) -> float:
    params = cfg.get("rope_parameters") or {}
    scaling = cfg.get("rope_scaling") or {}
    kind = params.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    if kind != "default":
        raise UnsupportedModelError(
            f"rope scaling type {kind!r} is not converted by the Megatron backend; "
            "use --train-backend fsdp for this model")
    theta = params.get("rope_theta", cfg.get("rope_theta", 10000.0))
    return float(theta)


def spec_from_hf_dict(cfg: dict[str, Any], overrides: dict[str, Any] | None = None) -> GPTSpec:
    model_type = cfg.get("model_type", "")
    if model_type not in _FAMILIES:
        raise UnsupportedModelError(
            f"model_type {model_type!r} is not supported by the Megatron backend "
            f"(supported: {', '.join(sorted(_FAMILIES))}); use --train-backend fsdp")
    if cfg.get("use_sliding_window"):
        raise UnsupportedModelError("sliding-window attention is not supported by the Megatron backend")
    if cfg.get("hidden_act", "silu") != "silu":
        raise UnsupportedModelError(f"hidden_act {cfg.get('hidden_act')!r} is not supported (SwiGLU/silu only)")
    if cfg.get("mlp_bias"):
        raise UnsupportedModelError("mlp_bias=True is not supported by the Megatron backend")
    qk_norm, bias_default = _FAMILIES[model_type]
    heads = int(cfg["num_attention_heads"])
    hidden = int(cfg["hidden_size"])
    spec = GPTSpec(
        model_type=model_type,
        num_layers=int(cfg["num_hidden_layers"]),
        hidden_size=hidden,
        ffn_hidden_size=int(cfg["intermediate_size"]),
        num_attention_heads=heads,
        num_query_groups=int(cfg.get("num_key_value_heads") or heads),
        kv_channels=int(cfg.get("head_dim") or hidden // heads),
        vocab_size=int(cfg["vocab_size"]),
        max_position_embeddings=int(cfg.get("max_position_embeddings", 4096)),
        rotary_base=_rope_theta(cfg),
        norm_epsilon=float(cfg.get("rms_norm_eps", 1e-6)),
        qk_layernorm=qk_norm,
        qkv_bias=bool(cfg.get("attention_bias", False)) if bias_default is None else bias_default,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
    )
    if overrides:
        overrides = dict(overrides)
        if overrides.pop("untie_embeddings_and_output_weights", False):
            overrides["tie_word_embeddings"] = False
        unknown = set(overrides) - set(OVERRIDE_FLAGS) - {"tie_word_embeddings"}
        if unknown:
            raise ValueError(f"unknown Megatron model overrides: {sorted(unknown)}")
        changes = {OVERRIDE_FLAGS.get(k, k): v for k, v in overrides.items() if v is not None}
        spec = dataclasses.replace(spec, **changes)
    spec.validate()
    return spec


def spec_from_hf(path: str | Path, overrides: dict[str, Any] | None = None) -> GPTSpec:
    config_file = Path(path) / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"{config_file} not found: --hf-checkpoint must be an HF model folder")
    return spec_from_hf_dict(json.loads(config_file.read_text()), overrides)


def overrides_from_args(args: Any) -> dict[str, Any]:
    """Megatron model flags the user set explicitly (None = take the value from config.json)."""
    out = {flag: getattr(args, flag) for flag in OVERRIDE_FLAGS if getattr(args, flag, None) is not None}
    # store_true flags default to False: only an explicit True overrides
    for flag in ("qk_layernorm", "add_qkv_bias"):
        if out.get(flag) is False:
            out.pop(flag)
    if getattr(args, "untie_embeddings_and_output_weights", False):
        out["untie_embeddings_and_output_weights"] = True
    return out
