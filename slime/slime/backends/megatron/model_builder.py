"""Build a megatron-core GPTModel (this rank's TP shard / PP stage) from a GPTSpec.

The local (pure megatron-core, no TransformerEngine) layer spec is used on every device: it
runs on CPU, and its parameter names are what `weights.py` converts. All CUDA-fused kernels
are switched off on CPU (they have no CPU implementation); on GPU the unfused paths are
still correct, merely slower.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from slime.backends.megatron.hf_config import GPTSpec
from slime.backends.megatron.parallel import ParallelLayout


@dataclass(frozen=True)
class BuildOptions:
    params_dtype: torch.dtype = torch.float32
    bf16: bool = False
    recompute_activations: bool = False


def padded_vocab_size(vocab_size: int, tp: int, divisible_by: int = 128) -> int:
    """Megatron pads the vocabulary so that every TP rank holds an equal, aligned slice."""
    multiple = divisible_by * tp
    return ((vocab_size + multiple - 1) // multiple) * multiple


def transformer_config(spec: GPTSpec, layout: ParallelLayout, opts: BuildOptions):
    from megatron.core.transformer.transformer_config import TransformerConfig

    on_gpu = torch.cuda.is_available()
    extra = {}
    if opts.recompute_activations:
        extra.update(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1)
    return TransformerConfig(
        num_layers=spec.num_layers,
        hidden_size=spec.hidden_size,
        ffn_hidden_size=spec.ffn_hidden_size,
        num_attention_heads=spec.num_attention_heads,
        num_query_groups=spec.num_query_groups,
        kv_channels=spec.kv_channels,
        tensor_model_parallel_size=layout.tp,
        pipeline_model_parallel_size=layout.pp,
        sequence_parallel=layout.sequence_parallel,
        normalization="RMSNorm",
        layernorm_epsilon=spec.norm_epsilon,
        gated_linear_unit=True,
        activation_func=F.silu,
        add_bias_linear=False,
        add_qkv_bias=spec.qkv_bias,
        qk_layernorm=spec.qk_layernorm,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        params_dtype=opts.params_dtype,
        bf16=opts.bf16,
        pipeline_dtype=opts.params_dtype,
        use_cpu_initialization=not on_gpu,
        # unfused paths: the fused kernels are CUDA-only
        bias_activation_fusion=False,
        bias_dropout_fusion=False,
        apply_rope_fusion=False,
        masked_softmax_fusion=False,
        gradient_accumulation_fusion=False,
        persist_layer_norm=False,
        # weights are overwritten by the HF checkpoint; skip the random init work
        perform_initialization=False,
        **extra,
    )


class RMSNorm(torch.nn.RMSNorm):
    """torch RMSNorm under megatron's norm constructor signature.

    megatron's `WrappedTorchNorm` (the local spec's norm without apex/TE) refuses sequence
    parallelism only because it does not tag its weight; with SP each TP rank normalises its
    own slice of the sequence, so the weight grad is partial: we tag it `sequence_parallel`
    and `optim.finalize_grads` sums it over the TP group, as megatron's DDP would.
    """

    def __init__(self, config, hidden_size: int, eps: float = 1e-5, **_ignored) -> None:
        super().__init__(hidden_size, eps=eps, dtype=config.params_dtype)
        self.weight.sequence_parallel = bool(config.sequence_parallel)


class QKRMSNorm(torch.nn.RMSNorm):
    """q/k norm: applied after the QKV projection has gathered the sequence, so never SP-partial
    (its TP-partial grads are summed by name in `optim.finalize_grads`)."""

    def __init__(self, config, hidden_size: int, eps: float = 1e-5, **_ignored) -> None:
        super().__init__(hidden_size, eps=eps, dtype=config.params_dtype)


def local_layer_spec(spec: GPTSpec, layout: ParallelLayout):
    """megatron's local GPT layer spec with the norms above; a block spec so the final norm
    is ours too."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_block import TransformerBlockSubmodules

    layer = get_gpt_layer_local_spec(qk_layernorm=spec.qk_layernorm, normalization="RMSNorm")
    layer.submodules.input_layernorm = RMSNorm
    layer.submodules.pre_mlp_layernorm = RMSNorm
    if spec.qk_layernorm:
        layer.submodules.self_attention.submodules.q_layernorm = QKRMSNorm
        layer.submodules.self_attention.submodules.k_layernorm = QKRMSNorm
    return TransformerBlockSubmodules(layer_specs=[layer] * (spec.num_layers // layout.pp), layer_norm=RMSNorm)


def build_gpt_model(spec: GPTSpec, layout: ParallelLayout, opts: BuildOptions | None = None,
                    device: torch.device | None = None) -> torch.nn.Module:
    """The GPTModel stage owned by this rank (after megatron parallel_state is initialised)."""
    from megatron.core import parallel_state as mpu
    from megatron.core.models.gpt import GPTModel

    opts = opts or BuildOptions()
    spec.check_parallel(layout.tp, layout.pp)
    config = transformer_config(spec, layout, opts)
    layer_spec = local_layer_spec(spec, layout)
    model = GPTModel(
        config=config,
        transformer_layer_spec=layer_spec,
        vocab_size=padded_vocab_size(spec.vocab_size, layout.tp),
        max_sequence_length=spec.max_position_embeddings,
        pre_process=mpu.is_pipeline_first_stage(),
        post_process=mpu.is_pipeline_last_stage(),
        # full (TP-gathered) logits: every loss function sees the same [B, T, V] tensor as
        # with the HF backends; the gather's backward splits the gradient again.
        parallel_output=False,
        share_embeddings_and_output_weights=spec.tie_word_embeddings,
        position_embedding_type="rope",
        rotary_base=int(spec.rotary_base) if float(spec.rotary_base).is_integer() else spec.rotary_base,
    )
    mark_tensor_parallel_params(model)
    if device is not None:
        model.to(device)
    return model


def mark_tensor_parallel_params(model: torch.nn.Module) -> None:
    """megatron sets `tensor_model_parallel`/`partition_dim` only inside its weight-init path,
    which `perform_initialization=False` skips (the HF checkpoint overwrites the weights
    anyway); grad-norm clipping needs them to count sharded vs replicated params correctly."""
    from megatron.core.tensor_parallel.layers import set_tensor_model_parallel_attributes

    from slime.backends.megatron.weights import tp_partition_dim

    for name, param in model.named_parameters():
        dim = tp_partition_dim(name)
        if dim is not None:
            for attr in ("tensor_model_parallel", "partition_dim", "partition_stride"):
                if hasattr(param, attr):
                    delattr(param, attr)
            set_tensor_model_parallel_attributes(param, True, dim, 1)
