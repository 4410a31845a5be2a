"""HF config -> GPTSpec, HF <-> Megatron tensor layouts (TP/PP), start-up refusals.

Pure tensor tests (no process group): every TP shard is built, concatenated the way
`gather_tp_state` does, and converted back; the round trip must be bit-exact.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import torch
from slime.backends.megatron.hf_config import UnsupportedModelError, spec_from_hf, spec_from_hf_dict
from slime.backends.megatron.weights import (
    fuse_qkv,
    hf_to_megatron_shard,
    megatron_to_hf,
    open_hf_weights,
    tp_partition_dim,
)


@pytest.fixture(scope="module")
def tiny_qwen2_path(tmp_path_factory) -> Path:
    """A tiny Qwen2 (q/k/v biases, GQA, tied embeddings, rope theta 1e6) saved with transformers."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=8,
                      num_key_value_heads=2, vocab_size=300, max_position_embeddings=256, rope_theta=1e6,
                      tie_word_embeddings=True, rms_norm_eps=1e-5)
    model = Qwen2ForCausalLM(cfg)
    with torch.no_grad():  # biases are zero-initialised: make them distinguishable
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_()
    out = tmp_path_factory.mktemp("qwen2")
    model.save_pretrained(out)
    return out


def test_spec_from_tiny_models(tiny_model_path, tiny_llama_path, tiny_qwen2_path):
    q3 = spec_from_hf(tiny_model_path)
    assert (q3.model_type, q3.qk_layernorm, q3.qkv_bias, q3.tie_word_embeddings) == ("qwen3", True, False, False)
    assert (q3.num_layers, q3.hidden_size, q3.num_attention_heads, q3.num_query_groups, q3.kv_channels) == (2, 64, 4, 2, 16)
    assert q3.rotary_base == 10000.0 and q3.norm_epsilon == 1e-6
    llama = spec_from_hf(tiny_llama_path)
    assert not llama.qk_layernorm and not llama.qkv_bias
    q2 = spec_from_hf(tiny_qwen2_path)
    assert q2.qkv_bias and q2.tie_word_embeddings and q2.rotary_base == 1e6 and q2.norm_epsilon == 1e-5
    assert q2.kv_channels == 8 and q2.heads_per_group == 4


def test_overrides_and_refusals(tiny_model_path):
    cfg = json.loads((tiny_model_path / "config.json").read_text())
    assert spec_from_hf_dict(cfg, {"num_layers": 1}).num_layers == 1
    assert spec_from_hf_dict(cfg, {"untie_embeddings_and_output_weights": True}).tie_word_embeddings is False
    with pytest.raises(UnsupportedModelError, match="fsdp"):
        spec_from_hf_dict({**cfg, "model_type": "gpt2"})
    with pytest.raises(UnsupportedModelError, match="rope scaling"):
        spec_from_hf_dict({**cfg, "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4}})
    with pytest.raises(UnsupportedModelError, match="sliding"):
        spec_from_hf_dict({**cfg, "use_sliding_window": True})
    with pytest.raises(ValueError, match="not divisible by TP=4"):
        spec_from_hf_dict(cfg).check_parallel(tp=4, pp=1)


def _roundtrip(path: Path, tp: int, pp: int) -> None:
    spec = spec_from_hf(path)
    padded = 384 * tp if spec.vocab_size <= 384 * tp else ((spec.vocab_size + 128 * tp - 1) // (128 * tp)) * 128 * tp
    with open_hf_weights(path) as get:
        originals = {n: get(n) for n in get.names}
        back: dict[str, torch.Tensor] = {}
        for stage in range(pp):
            shards = [hf_to_megatron_shard(spec, get, tp_rank=r, tp=tp, pp_rank=stage, pp=pp, padded_vocab=padded)
                      for r in range(tp)]
            full = {}
            for name in shards[0]:
                dim = tp_partition_dim(name)
                full[name] = shards[0][name] if dim is None else torch.cat([s[name] for s in shards], dim=dim)
                if dim is None:  # replicated tensors are identical on every rank
                    assert all(torch.equal(s[name], shards[0][name]) for s in shards)
            back.update(megatron_to_hf(spec, full, tp=tp, pp_rank=stage, pp=pp))
    assert set(back) == set(originals)
    for name, tensor in originals.items():
        assert torch.equal(back[name], tensor), name


@pytest.mark.parametrize("tp,pp", [(1, 1), (2, 1), (1, 2), (2, 2)])
def test_roundtrip_qwen3_exact(tiny_model_path, tp, pp):
    _roundtrip(tiny_model_path, tp, pp)


def test_roundtrip_llama_and_tied_qwen2_with_bias(tiny_llama_path, tiny_qwen2_path):
    _roundtrip(tiny_llama_path, 2, 1)
    _roundtrip(tiny_qwen2_path, 2, 2)


def test_qkv_is_interleaved_by_query_group(tiny_model_path):
    spec = spec_from_hf(tiny_model_path)
    hd, hpg = spec.kv_channels, spec.heads_per_group
    with open_hf_weights(tiny_model_path) as get:
        q, k, v = (get(f"model.layers.0.self_attn.{x}_proj.weight") for x in "qkv")
        shard1 = hf_to_megatron_shard(spec, get, tp_rank=1, tp=2, pp_rank=0, pp=1, padded_vocab=49152)
    fused = fuse_qkv(spec, q, k, v)
    rows = (hpg + 2) * hd
    group0 = fused[:rows]
    assert torch.equal(group0[: hpg * hd], q[: hpg * hd])          # the group's query heads
    assert torch.equal(group0[hpg * hd : hpg * hd + hd], k[:hd])   # then its key head
    assert torch.equal(group0[hpg * hd + hd :], v[:hd])            # then its value head
    # TP rank 1 of 2 holds query group 1 (of 2): its q heads, k head 1, v head 1
    qkv1 = shard1["decoder.layers.0.self_attention.linear_qkv.weight"]
    assert torch.equal(qkv1, fused[rows:])
    fc1 = shard1["decoder.layers.0.mlp.linear_fc1.weight"]
    with open_hf_weights(tiny_model_path) as get:
        gate, up = get("model.layers.0.mlp.gate_proj.weight"), get("model.layers.0.mlp.up_proj.weight")
    half = spec.ffn_hidden_size // 2
    assert torch.equal(fc1, torch.cat([gate[half:], up[half:]]))


def test_lora_and_kl_refused_at_startup(tiny_model_path):
    from slime.backends.fsdp.config import ActorConfig
    from slime.backends.megatron.actor import MegatronUnsupported, check_supported

    with pytest.raises(MegatronUnsupported, match="--train-backend fsdp"):
        check_supported(ActorConfig(model_path=str(tiny_model_path), use_lora=True), tiny_model_path)
    with pytest.raises(MegatronUnsupported, match="reference log-probs"):
        check_supported(ActorConfig(model_path=str(tiny_model_path), need_ref_log_probs=True), tiny_model_path)
    check_supported(ActorConfig(model_path=str(tiny_model_path)), tiny_model_path)


def test_unsupported_megatron_flags_refused():
    from slime.backends.megatron.options import MegatronOptions, UnsupportedMegatronFlag

    ok = MegatronOptions.from_args(argparse.Namespace(tensor_model_parallel_size=2, sequence_parallel=True,
                                                      offload_optimizer_state=True, num_layers=1))
    assert (ok.tp, ok.sequence_parallel, ok.optimizer_cpu_offload, ok.model_overrides) == (2, True, True, {"num_layers": 1})
    for bad in ({"context_parallel_size": 2}, {"expert_model_parallel_size": 2}, {"normalization": "LayerNorm"},
                {"recompute_granularity": "selective"}):
        with pytest.raises(UnsupportedMegatronFlag):
            MegatronOptions.from_args(argparse.Namespace(**bad))
