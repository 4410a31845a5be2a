"""HF safetensors <-> megatron-core GPTModel (local layer spec) weights, TP/PP aware.

Megatron layouts handled here:
- `linear_qkv` fuses q, k, v *interleaved by query group*: for each of the G groups, the
  group's H/G query heads, then its key head, then its value head. TP rank r holds groups
  [r*G/tp, (r+1)*G/tp), i.e. a contiguous block of rows of the fused matrix.
- `linear_fc1` fuses SwiGLU's gate and up projections: TP rank r holds [gate_r; up_r], so the
  row-concatenation of all ranks is [gate_0; up_0; gate_1; up_1; ...].
- Column-parallel (`linear_qkv`, `linear_fc1`, `output_layer`, `word_embeddings`) split rows;
  row-parallel (`linear_proj`, `linear_fc2`) split columns; norms are replicated.
- The vocabulary is padded to a multiple of 128*TP; padding rows are zero and dropped on export.
- With PP, stage s holds layers [s*L/pp, (s+1)*L/pp) as `decoder.layers.0..`; the first
  stage holds the embedding, the last the final norm and the output layer (with tied
  embeddings and PP>1, the last stage keeps its own copy of the embedding as output layer).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.distributed as dist

from slime.backends.megatron.hf_config import GPTSpec

TensorGetter = Callable[[str], torch.Tensor]

_REPLICATED_LAYER = {
    "input_layernorm.weight": "input_layernorm.weight",
    "pre_mlp_layernorm.weight": "post_attention_layernorm.weight",
    "self_attention.q_layernorm.weight": "self_attn.q_norm.weight",
    "self_attention.k_layernorm.weight": "self_attn.k_norm.weight",
}
# files copied next to exported weights so the folder loads as an HF model
_SIDECAR_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                  "special_tokens_map.json", "chat_template.jinja", "vocab.json", "merges.txt",
                  "tokenizer.model", "added_tokens.json")


# ---------------------------------------------------------------------------- reading HF files
@contextmanager
def open_hf_weights(path: str | Path) -> Iterator[TensorGetter]:
    """A getter name -> tensor over the (possibly sharded) safetensors files of an HF folder,
    reading each tensor lazily so a rank only materialises what its shard needs."""
    from safetensors import safe_open

    folder = Path(path)
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
    else:
        single = folder / "model.safetensors"
        if not single.is_file():
            raise FileNotFoundError(f"no model.safetensors(.index.json) in {folder}")
        with safe_open(str(single), framework="pt") as fh:
            weight_map = {k: "model.safetensors" for k in fh.keys()}
    handles = {name: safe_open(str(folder / name), framework="pt") for name in set(weight_map.values())}

    def get(name: str) -> torch.Tensor:
        if name not in weight_map:
            raise KeyError(f"tensor {name!r} not found in {folder}")
        return handles[weight_map[name]].get_tensor(name)

    get.names = set(weight_map)  # type: ignore[attr-defined]
    try:
        yield get
    finally:
        handles.clear()


# ---------------------------------------------------------------------------- HF -> Megatron
def _chunk(t: torch.Tensor, dim: int, rank: int, size: int) -> torch.Tensor:
    if t.shape[dim] % size:
        raise ValueError(f"cannot split dim {dim} of size {t.shape[dim]} over {size} ranks")
    return t.chunk(size, dim=dim)[rank]


def _pad_vocab(t: torch.Tensor, padded: int) -> torch.Tensor:
    if t.shape[0] == padded:
        return t
    out = t.new_zeros((padded, *t.shape[1:]))
    out[: t.shape[0]] = t
    return out


def fuse_qkv(spec: GPTSpec, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """[q; k; v] (HF) -> Megatron's group-interleaved fused rows (works for weights and biases)."""
    g, hd, hpg = spec.num_query_groups, spec.kv_channels, spec.heads_per_group
    tail = q.shape[1:]
    fused = torch.cat([q.reshape(g, hpg * hd, *tail), k.reshape(g, hd, *tail), v.reshape(g, hd, *tail)], dim=1)
    return fused.reshape(g * (hpg + 2) * hd, *tail)


def split_qkv(spec: GPTSpec, fused: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g, hd, hpg = spec.num_query_groups, spec.kv_channels, spec.heads_per_group
    tail = fused.shape[1:]
    grouped = fused.reshape(g, (hpg + 2) * hd, *tail)
    q, k, v = torch.split(grouped, [hpg * hd, hd, hd], dim=1)
    return q.reshape(g * hpg * hd, *tail), k.reshape(g * hd, *tail), v.reshape(g * hd, *tail)


def layer_range(spec: GPTSpec, pp_rank: int, pp: int) -> range:
    per = spec.num_layers // pp
    return range(pp_rank * per, (pp_rank + 1) * per)


def hf_to_megatron_shard(spec: GPTSpec, get: TensorGetter, *, tp_rank: int, tp: int, pp_rank: int, pp: int,
                         padded_vocab: int) -> dict[str, torch.Tensor]:
    """This rank's Megatron state dict (TP shard of PP stage) from HF tensors."""
    out: dict[str, torch.Tensor] = {}
    first, last = pp_rank == 0, pp_rank == pp - 1
    embed_name = "model.embed_tokens.weight"
    if first:
        out["embedding.word_embeddings.weight"] = _chunk(_pad_vocab(get(embed_name), padded_vocab), 0, tp_rank, tp)
    if last:
        out["decoder.final_layernorm.weight"] = get("model.norm.weight")
        if not spec.tie_word_embeddings:
            out["output_layer.weight"] = _chunk(_pad_vocab(get("lm_head.weight"), padded_vocab), 0, tp_rank, tp)
        elif pp > 1:  # the last stage's own copy of the tied embedding
            out["output_layer.weight"] = _chunk(_pad_vocab(get(embed_name), padded_vocab), 0, tp_rank, tp)
    g = spec.num_query_groups
    for local, layer in enumerate(layer_range(spec, pp_rank, pp)):
        hf = f"model.layers.{layer}."
        mg = f"decoder.layers.{local}."
        for mg_name, hf_name in _REPLICATED_LAYER.items():
            if "layernorm" in mg_name and "self_attention" in mg_name and not spec.qk_layernorm:
                continue
            out[mg + mg_name] = get(hf + hf_name)
        attn = hf + "self_attn."
        qkv = fuse_qkv(spec, get(attn + "q_proj.weight"), get(attn + "k_proj.weight"), get(attn + "v_proj.weight"))
        rows = qkv.shape[0] // g  # rows per query group
        per_rank = (g // tp) * rows
        out[mg + "self_attention.linear_qkv.weight"] = qkv[tp_rank * per_rank : (tp_rank + 1) * per_rank]
        if spec.qkv_bias:
            bias = fuse_qkv(spec, get(attn + "q_proj.bias"), get(attn + "k_proj.bias"), get(attn + "v_proj.bias"))
            out[mg + "self_attention.linear_qkv.bias"] = bias[tp_rank * per_rank : (tp_rank + 1) * per_rank]
        out[mg + "self_attention.linear_proj.weight"] = _chunk(get(attn + "o_proj.weight"), 1, tp_rank, tp)
        mlp = hf + "mlp."
        out[mg + "mlp.linear_fc1.weight"] = torch.cat(
            [_chunk(get(mlp + "gate_proj.weight"), 0, tp_rank, tp), _chunk(get(mlp + "up_proj.weight"), 0, tp_rank, tp)])
        out[mg + "mlp.linear_fc2.weight"] = _chunk(get(mlp + "down_proj.weight"), 1, tp_rank, tp)
    return {k: v.contiguous() for k, v in out.items()}


def load_hf_into_model(model: torch.nn.Module, spec: GPTSpec, path: str | Path) -> None:
    """Copy this rank's shard of the HF checkpoint at `path` into `model` (strict on names
    and shapes, so a wrong override or layout fails here rather than training garbage)."""
    from megatron.core import parallel_state as mpu

    tp, tp_rank = mpu.get_tensor_model_parallel_world_size(), mpu.get_tensor_model_parallel_rank()
    pp, pp_rank = mpu.get_pipeline_model_parallel_world_size(), mpu.get_pipeline_model_parallel_rank()
    own = {k: v for k, v in model.state_dict().items() if not k.endswith("_extra_state")}
    padded = _padded_vocab_of(model, own, tp)
    with open_hf_weights(path) as get:
        shard = hf_to_megatron_shard(spec, get, tp_rank=tp_rank, tp=tp, pp_rank=pp_rank, pp=pp, padded_vocab=padded)
    missing = sorted(set(own) - set(shard))
    unexpected = sorted(set(shard) - set(own))
    if missing or unexpected:
        raise RuntimeError(f"HF -> Megatron name mismatch: missing={missing} unexpected={unexpected}")
    with torch.no_grad():
        for name, target in own.items():
            src = shard[name]
            if tuple(src.shape) != tuple(target.shape):
                raise RuntimeError(f"shape mismatch for {name}: checkpoint {tuple(src.shape)} "
                                   f"vs model {tuple(target.shape)} (check Megatron model overrides)")
            target.copy_(src.to(target.dtype))


def _padded_vocab_of(model: torch.nn.Module, own: dict[str, torch.Tensor], tp: int) -> int:
    for name in ("embedding.word_embeddings.weight", "output_layer.weight"):
        if name in own:
            return own[name].shape[0] * tp
    raise RuntimeError("model has neither embedding nor output layer")


# ---------------------------------------------------------------------------- Megatron -> HF
def tp_partition_dim(name: str) -> int | None:
    """Split dim of a parameter across TP ranks (None: replicated)."""
    if name.endswith(("linear_qkv.weight", "linear_qkv.bias", "linear_fc1.weight", "word_embeddings.weight",
                      "output_layer.weight")):
        return 0
    if name.endswith(("linear_proj.weight", "linear_fc2.weight")):
        return 1
    return None


def gather_tp_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Full (TP-gathered) tensors of this PP stage, on CPU, on every TP rank."""
    from megatron.core import parallel_state as mpu

    tp = mpu.get_tensor_model_parallel_world_size()
    group = mpu.get_tensor_model_parallel_group()
    out: dict[str, torch.Tensor] = {}
    for name, tensor in model.state_dict().items():
        if name.endswith("_extra_state") or tensor is None:
            continue
        dim = tp_partition_dim(name)
        t = tensor.detach()
        if dim is not None and tp > 1:
            parts = [torch.empty_like(t) for _ in range(tp)]
            dist.all_gather(parts, t.contiguous(), group=group)
            t = torch.cat(parts, dim=dim)
        out[name] = t.cpu()
    return out


def megatron_to_hf(spec: GPTSpec, full: dict[str, torch.Tensor], *, tp: int, pp_rank: int, pp: int) -> dict[str, torch.Tensor]:
    """HF tensors of one PP stage from its TP-gathered Megatron tensors."""
    out: dict[str, torch.Tensor] = {}
    v = spec.vocab_size
    if "embedding.word_embeddings.weight" in full:
        out["model.embed_tokens.weight"] = full["embedding.word_embeddings.weight"][:v]
    if "decoder.final_layernorm.weight" in full:
        out["model.norm.weight"] = full["decoder.final_layernorm.weight"]
    if "output_layer.weight" in full and not spec.tie_word_embeddings:
        out["lm_head.weight"] = full["output_layer.weight"][:v]
    inverse = {mg: hf for mg, hf in _REPLICATED_LAYER.items()}
    for local, layer in enumerate(layer_range(spec, pp_rank, pp)):
        hf = f"model.layers.{layer}."
        mg = f"decoder.layers.{local}."
        for mg_name, hf_name in inverse.items():
            if mg + mg_name in full:
                out[hf + hf_name] = full[mg + mg_name]
        q, k, vv = split_qkv(spec, full[mg + "self_attention.linear_qkv.weight"])
        out[hf + "self_attn.q_proj.weight"], out[hf + "self_attn.k_proj.weight"], out[hf + "self_attn.v_proj.weight"] = q, k, vv
        if mg + "self_attention.linear_qkv.bias" in full:
            qb, kb, vb = split_qkv(spec, full[mg + "self_attention.linear_qkv.bias"])
            out[hf + "self_attn.q_proj.bias"], out[hf + "self_attn.k_proj.bias"], out[hf + "self_attn.v_proj.bias"] = qb, kb, vb
        out[hf + "self_attn.o_proj.weight"] = full[mg + "self_attention.linear_proj.weight"]
        fc1 = full[mg + "mlp.linear_fc1.weight"]
        per = fc1.reshape(tp, 2, spec.ffn_hidden_size // tp, fc1.shape[-1])
        out[hf + "mlp.gate_proj.weight"] = per[:, 0].reshape(spec.ffn_hidden_size, -1)
        out[hf + "mlp.up_proj.weight"] = per[:, 1].reshape(spec.ffn_hidden_size, -1)
        out[hf + "mlp.down_proj.weight"] = full[mg + "mlp.linear_fc2.weight"]
    return {k: t.contiguous() for k, t in out.items()}


def export_hf_state_dict(model: torch.nn.Module, spec: GPTSpec) -> dict[str, torch.Tensor] | None:
    """Collective over all ranks: the full HF state dict on global rank 0, None elsewhere.

    TP shards are all-gathered within each stage; the stages' HF tensors then go to rank 0
    (objects over the default group, so this also works over gloo)."""
    from megatron.core import parallel_state as mpu

    tp = mpu.get_tensor_model_parallel_world_size()
    pp, pp_rank = mpu.get_pipeline_model_parallel_world_size(), mpu.get_pipeline_model_parallel_rank()
    stage = megatron_to_hf(spec, gather_tp_state(model), tp=tp, pp_rank=pp_rank, pp=pp)
    if pp == 1:
        return stage if dist.get_rank() == 0 else None
    # only (tp_rank 0, dp_rank 0) of each stage contributes; others send nothing
    contributes = mpu.get_tensor_model_parallel_rank() == 0 and mpu.get_data_parallel_rank() == 0
    gathered: list = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, stage if contributes else None)
    if dist.get_rank() != 0:
        return None
    merged: dict[str, torch.Tensor] = {}
    for part in gathered:
        if part:
            merged.update(part)
    return merged


def save_hf_folder(state: dict[str, torch.Tensor], folder: str | Path, source: str | Path,
                   dtype: torch.dtype | None = None) -> Path:
    """Write `state` as model.safetensors plus the source folder's config/tokenizer files."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: (v.to(dtype) if dtype is not None else v).contiguous() for k, v in state.items()}
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    stale_index = folder / "model.safetensors.index.json"
    if stale_index.exists():
        stale_index.unlink()
    for name in _SIDECAR_FILES:
        src = Path(source) / name
        if src.is_file() and src.resolve() != (folder / name).resolve():
            shutil.copyfile(src, folder / name)
    return folder
