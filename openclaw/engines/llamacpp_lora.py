"""A PEFT LoRA adapter folder (what the trainer pushes) as a llama.cpp GGUF LoRA adapter.

llama.cpp applies an adapter as `W x + scale * B (A x)` per weight, with tensors named
`blk.{layer}.{gguf name}.weight.lora_a` / `.lora_b` (convert_lora_to_gguf.py's naming). Its
scale is `alpha / rank` when the file's `adapter.lora.alpha` is non-zero, else 1. We write alpha
0 and fold PEFT's own scaling (`lora_alpha / r`, `/ sqrt(r)` with rsLoRA, per-module patterns)
into B, so every module gets exactly the scaling PEFT gives it, whatever the adapter's options.

llama.cpp's LLaMA GGUFs store the q and k projections with their rows permuted (the rotary
halves interleaved; convert_hf_to_gguf.py's `LlamaModel.permute`). A LoRA delta `B A` on those
weights must be permuted the same way, which only touches B's rows.

Anything PEFT can hold that llama.cpp's adapter cannot express (DoRA, trained biases, fully
trained `modules_to_save`, LoRA on the embeddings or the LM head) is refused, never dropped.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# PEFT module name -> llama.cpp tensor name (LLaMA architecture).
PROJ_TO_GGUF = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
                "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}
_KEY = re.compile(r"(?:^|\.)layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$")


class AdapterNotSupported(ValueError):
    """The adapter holds something llama.cpp's LoRA cannot apply."""


@dataclass(frozen=True)
class HeadLayout:
    """What the q/k row permutation needs: the model's query and key/value head counts."""

    n_head: int
    n_head_kv: int


def permute_rows(weight: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py's `LlamaModel.permute` on the rows (output features) of `weight`."""
    rows = weight.shape[0]
    if rows % (2 * n_head):
        raise AdapterNotSupported(f"{rows} rows do not split into {n_head} rotary heads")
    return (weight.reshape(n_head, 2, rows // n_head // 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


def _read_config(folder: Path) -> dict:
    cfg = json.loads((folder / "adapter_config.json").read_text())
    peft_type = str(cfg.get("peft_type", "LORA")).upper()
    if peft_type != "LORA":
        raise AdapterNotSupported(f"peft_type {peft_type!r}: only LoRA adapters can be applied")
    if cfg.get("use_dora"):
        raise AdapterNotSupported("DoRA adapters cannot be applied by llama.cpp")
    if cfg.get("bias", "none") != "none":
        raise AdapterNotSupported(f"bias={cfg['bias']!r}: llama.cpp's LoRA has no bias terms")
    if cfg.get("modules_to_save"):
        raise AdapterNotSupported(f"modules_to_save {cfg['modules_to_save']} are full weights, not LoRA")
    if cfg.get("fan_in_fan_out"):
        raise AdapterNotSupported("fan_in_fan_out adapters (Conv1D models) are not LLaMA adapters")
    return cfg


def _scaling(cfg: dict, module_key: str, rank: int) -> float:
    """PEFT's scaling for one module: `alpha / r` (or `/ sqrt(r)`), with per-module patterns."""
    alpha = float(cfg.get("lora_alpha", 8))
    for pattern, value in (cfg.get("alpha_pattern") or {}).items():
        if re.match(rf"(.*\.)?({pattern})$", module_key):  # PEFT's own pattern match
            alpha = float(value)
    return alpha / (math.sqrt(rank) if cfg.get("use_rslora") else rank)


def _load_state(folder: Path) -> dict[str, np.ndarray]:
    st = folder / "adapter_model.safetensors"
    if st.is_file():
        from safetensors.numpy import load_file

        return load_file(str(st))
    binary = folder / "adapter_model.bin"
    if binary.is_file():
        import torch

        state = torch.load(str(binary), map_location="cpu", weights_only=True)
        return {k: v.float().numpy() for k, v in state.items()}
    raise FileNotFoundError(f"{folder} has no adapter_model.safetensors or adapter_model.bin")


def peft_to_gguf_tensors(folder: str | Path, heads: HeadLayout) -> dict[str, np.ndarray]:
    """The adapter's tensors under llama.cpp's names, fp32, scaling folded into B."""
    folder = Path(folder)
    cfg = _read_config(folder)
    pairs: dict[tuple[int, str], dict[str, np.ndarray]] = {}
    modules: dict[tuple[int, str], str] = {}
    for key, value in _load_state(folder).items():
        m = _KEY.search(key)
        if m is None:
            raise AdapterNotSupported(f"adapter tensor {key!r} is not a LoRA A/B of a LLaMA attention or MLP "
                                      "projection")
        layer, proj, side = int(m.group(1)), m.group(2), m.group(3)
        if proj not in PROJ_TO_GGUF:
            raise AdapterNotSupported(f"LoRA on {proj!r} has no llama.cpp counterpart")
        pairs.setdefault((layer, proj), {})[side] = np.ascontiguousarray(value, dtype=np.float32)
        modules[(layer, proj)] = key[: m.end(2)]
    if not pairs:
        raise AdapterNotSupported(f"{folder} holds no LoRA tensors")
    out: dict[str, np.ndarray] = {}
    for (layer, proj), ab in sorted(pairs.items()):
        if set(ab) != {"A", "B"}:
            raise AdapterNotSupported(f"layer {layer} {proj}: LoRA A or B is missing")
        a, b = ab["A"], ab["B"]
        rank = a.shape[0]
        if b.shape[1] != rank:
            raise AdapterNotSupported(f"layer {layer} {proj}: A has rank {rank}, B has {b.shape[1]}")
        b = b * np.float32(_scaling(cfg, modules[(layer, proj)], rank))
        if proj == "q_proj":
            b = permute_rows(b, heads.n_head)
        elif proj == "k_proj":
            b = permute_rows(b, heads.n_head_kv)
        name = f"blk.{layer}.{PROJ_TO_GGUF[proj]}.weight"
        out[f"{name}.lora_a"] = np.ascontiguousarray(a)
        out[f"{name}.lora_b"] = np.ascontiguousarray(b, dtype=np.float32)
    return out


def write_gguf_lora(folder: str | Path, out_path: str | Path, arch: str, heads: HeadLayout) -> Path:
    """Convert the PEFT adapter in `folder` into a GGUF LoRA file at `out_path`."""
    import gguf

    tensors = peft_to_gguf_tensors(folder, heads)
    writer = gguf.GGUFWriter(str(out_path), arch=arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    # 0: llama.cpp applies scale 1; PEFT's scaling is already in B.
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, 0.0)
    for name, value in tensors.items():
        writer.add_tensor(name, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(out_path)
