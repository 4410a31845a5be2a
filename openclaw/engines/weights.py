"""Loading a model folder for inference: a full HF checkpoint or a PEFT adapter folder.

An adapter folder (it has `adapter_config.json`) is loaded on top of its base model and merged
(`merge_and_unload`), so generation runs at full-model speed with no LoRA overhead per step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
          "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}


def parse_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[dtype.lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {sorted(DTYPES)}") from None


def is_adapter_folder(path: str | Path) -> bool:
    return (Path(path) / "adapter_config.json").is_file()


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer_path: str
    base_model_path: str  # the full-model folder the weights came from (== path unless adapter)


def resolve_adapter_base(adapter_dir: Path, fallback_base: str | None) -> str:
    """The full-model folder an adapter is applied to: the one it names, else `fallback_base`."""
    cfg = json.loads((adapter_dir / "adapter_config.json").read_text())
    named = cfg.get("base_model_name_or_path")
    if named and Path(named).is_dir():
        return str(named)
    if fallback_base:
        return fallback_base
    raise ValueError(f"adapter {adapter_dir} names base model {named!r}, which is not a local folder; "
                     "load the engine from the base model first, then update weights with the adapter")


def load_model(path: str | Path, dtype: torch.dtype, device: str, fallback_base: str | None = None) -> LoadedModel:
    """Load `path` (full folder or PEFT adapter folder) ready for inference on `device`."""
    from transformers import AutoModelForCausalLM

    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"model path {str(path)!r} is not a folder")
    if is_adapter_folder(folder):
        from peft import PeftModel

        base_path = resolve_adapter_base(folder, fallback_base)
        base = AutoModelForCausalLM.from_pretrained(base_path, dtype=dtype)
        model = PeftModel.from_pretrained(base, str(folder)).merge_and_unload()
        has_tok = (folder / "tokenizer_config.json").is_file()
        tok_path = str(folder) if has_tok else base_path
    else:
        if not (folder / "config.json").is_file():
            raise ValueError(f"{folder} has neither config.json (full model) nor adapter_config.json (PEFT adapter)")
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype)
        base_path = tok_path = str(folder)
    model.to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return LoadedModel(model=model, tokenizer_path=tok_path, base_model_path=base_path)
