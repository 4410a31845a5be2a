"""A PEFT LoRA push without reading the base model from disk again.

The trainer pushes its adapter after every step. Loading it the general way (`weights.load_model`:
the base model from disk, PEFT on top, `merge_and_unload`) costs a full model load per push. Here
the engine keeps, in memory, the base weights of the layers the adapter adapts, and builds the next
served model as a copy of the one it serves with each adapted weight set to base + scale * B @ A:
the same merge PEFT does (`W + scale * B @ A`), from the same base values, so the served weights do
not drift over many pushes.

Only a plain LoRA adapter takes this path (linear layers, one rank and alpha, no DoRA, no bias, no
modules saved whole); anything else returns None from `read_lora` and loads the general way.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch

PREFIX = "base_model.model."


@dataclass(frozen=True)
class LoRALayer:
    a: torch.Tensor  # [r, in]
    b: torch.Tensor  # [out, r]
    scale: float


def read_lora(folder: str | Path) -> dict[str, LoRALayer] | None:
    """The adapter's layers by module name (as in the base model), or None when it is not plain LoRA."""
    from safetensors.torch import load_file

    folder = Path(folder)
    cfg = json.loads((folder / "adapter_config.json").read_text())
    plain = (cfg.get("peft_type") == "LORA" and not cfg.get("use_dora") and cfg.get("bias", "none") == "none"
             and not cfg.get("modules_to_save") and not cfg.get("rank_pattern") and not cfg.get("alpha_pattern")
             and not cfg.get("fan_in_fan_out") and (folder / "adapter_model.safetensors").is_file())
    if not plain:
        return None
    r, alpha = int(cfg["r"]), float(cfg["lora_alpha"])
    scale = alpha / math.sqrt(r) if cfg.get("use_rslora") else alpha / r
    tensors = load_file(str(folder / "adapter_model.safetensors"))
    layers: dict[str, LoRALayer] = {}
    for key, a in tensors.items():
        if not key.endswith(".lora_A.weight"):
            continue
        b = tensors.get(key.replace(".lora_A.", ".lora_B."))
        name = key.removesuffix(".lora_A.weight").removeprefix(PREFIX)
        if b is None or a.dim() != 2 or b.shape[1] != a.shape[0]:
            return None
        layers[name] = LoRALayer(a=a, b=b, scale=scale)
    if len(layers) * 2 != len(tensors):
        return None  # tensors other than A/B pairs (embeddings, magnitudes): the general path knows them
    return layers


class BaseWeights:
    """The base model's weights of adapted layers, copied once from a model that holds them unmerged."""

    def __init__(self, base_path: str) -> None:
        self.base_path = base_path
        self._weights: dict[str, torch.Tensor] = {}

    def merged_copy(self, serving: torch.nn.Module, layers: dict[str, LoRALayer]) -> torch.nn.Module | None:
        """A copy of `serving` with every layer of `layers` at base + scale * B @ A, and every layer an
        earlier push adapted but this one does not back at its base. None when `serving` lacks a
        layer of the adapter (another architecture: the general path reports it)."""
        modules = dict(serving.named_modules())
        if any(not isinstance(modules.get(name), torch.nn.Linear) for name in layers):
            return None
        new = copy.deepcopy(serving)
        new_modules = dict(new.named_modules())
        for name in set(layers) | set(self._weights):
            weight = new_modules[name].weight
            base = self._weights.get(name)
            if base is None:  # first push adapting this layer: what is served there is still the base
                base = self._weights[name] = modules[name].weight.detach().clone()
            with torch.no_grad():
                weight.copy_(base)
                if name in layers:
                    lora = layers[name]
                    weight.addmm_(lora.b.to(weight.dtype), lora.a.to(weight.dtype), alpha=lora.scale)
        return new
