"""Tiny random models (Qwen3 or Llama architecture, SmolLM2 tokenizer) for fast unit tests."""

from __future__ import annotations

from pathlib import Path

from openclaw.models.atomic import build_once
from openclaw.models.embedded import prepare_embedded_model
from openclaw.paths import models_dir

TINY_DIMS = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, max_position_embeddings=4096)


def _build(out: Path, arch: str, seed: int, tie_word_embeddings: bool, tokenizer_dir: Path | None) -> None:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir or prepare_embedded_model())
    common = dict(TINY_DIMS, vocab_size=len(tokenizer), tie_word_embeddings=tie_word_embeddings,
                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                  pad_token_id=tokenizer.pad_token_id, rope_theta=10000.0, torch_dtype="float32")
    torch.manual_seed(seed)
    if arch == "qwen3":
        model = Qwen3ForCausalLM(Qwen3Config(**common))
    elif arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common))
    else:
        raise ValueError(f"unknown tiny arch {arch!r}; choose qwen3 or llama")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def build_tiny_model(arch: str = "qwen3", seed: int = 0, tie_word_embeddings: bool = False,
                     out: Path | None = None, tokenizer_dir: Path | None = None) -> Path:
    """Build (once) a ~3M-parameter random model and return its folder.

    `tokenizer_dir`: a folder holding the SmolLM2 tokenizer files, for a machine without the embedded
    model (a GPU machine with no network gets the 3 MB tokenizer, not the 540 MB model)."""
    target = out or models_dir() / f"tiny-{arch}-s{seed}{'-tied' if tie_word_embeddings else ''}"
    target.parent.mkdir(parents=True, exist_ok=True)
    return build_once(Path(target), lambda tmp: _build(tmp, arch, seed, tie_word_embeddings, tokenizer_dir))
