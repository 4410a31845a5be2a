"""The actor's own typed view of the training config (built once from the parsed TrainConfig)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ActorConfig:
    model_path: str
    seed: int = 1234
    # precision: fp32 weights always; bf16 only as autocast around the forward pass
    bf16: bool = False
    gradient_checkpointing: bool = False
    # one prompt forward per micro-batch whose rows share their prompt (see actor._forward)
    shared_prompt_forward: bool = True
    # the opening all of a step's rows share run once per step (see step_prefix.py)
    step_prefix_forward: bool = True
    # LoRA (peft)
    use_lora: bool = False
    lora_rank: int = 16
    lora_alpha: float = 32.0
    lora_dropout: float = 0.0
    lora_target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    # optimizer / schedule
    # optimizer state (Adam moments) kept in CPU memory between steps (--offload-optimizer-state)
    offload_optimizer_state: bool = False
    lr: float = 1e-6
    min_lr: float = 0.0
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    clip_grad: float = 1.0
    lr_warmup_iters: int = 0
    lr_decay_style: str = "constant"  # constant | linear | cosine
    lr_decay_iters: int | None = None
    # batching
    global_batch_size: int = 8
    micro_batch_size: int = 1
    use_dynamic_batch_size: bool = False
    max_tokens_per_gpu: int = 4096
    # log-probs are computed on logits / temperature, as the engine reports them
    temperature: float = 1.0
    need_ref_log_probs: bool = False
    # full fine-tuning only: the frozen reference (--ref-load, default the initial --hf-checkpoint)
    ref_model_path: str | None = None
    use_rollout_logprobs: bool = False
    # anything else the loss function needs (the whole TrainConfig is passed as `args`)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_args(cls, args: Any) -> ActorConfig:
        """Build from the parsed TrainConfig (or any object with slime's flat attribute names)."""
        def get(name: str, default: Any) -> Any:
            value = getattr(args, name, None)
            return default if value is None else value

        model_path = get("hf_checkpoint", None) or get("model_path", None)
        if not model_path:
            raise ValueError("--hf-checkpoint (alias --model-path) is required")
        targets = get("lora_target_modules", cls.lora_target_modules)
        if isinstance(targets, str):
            targets = tuple(t.strip() for t in targets.split(",") if t.strip())
        return cls(
            model_path=str(model_path),
            seed=int(get("seed", cls.seed)),
            bf16=bool(get("bf16", False)),
            gradient_checkpointing=bool(get("gradient_checkpointing", False)),
            shared_prompt_forward=bool(get("shared_prompt_forward", True)),
            step_prefix_forward=bool(get("step_prefix_forward", cls.step_prefix_forward)),
            use_lora=bool(get("use_lora", False)),
            lora_rank=int(get("lora_rank", cls.lora_rank)),
            lora_alpha=float(get("lora_alpha", cls.lora_alpha)),
            lora_dropout=float(get("lora_dropout", cls.lora_dropout)),
            lora_target_modules=tuple(targets),
            offload_optimizer_state=bool(get("offload_optimizer_state", False)),
            lr=float(get("lr", cls.lr)),
            min_lr=float(get("min_lr", cls.min_lr)),
            weight_decay=float(get("weight_decay", cls.weight_decay)),
            adam_beta1=float(get("adam_beta1", cls.adam_beta1)),
            adam_beta2=float(get("adam_beta2", cls.adam_beta2)),
            adam_eps=float(get("adam_eps", cls.adam_eps)),
            clip_grad=float(get("clip_grad", cls.clip_grad)),
            lr_warmup_iters=int(get("lr_warmup_iters", 0)),
            lr_decay_style=str(get("lr_decay_style", "constant")),
            lr_decay_iters=getattr(args, "lr_decay_iters", None),
            global_batch_size=int(get("global_batch_size", cls.global_batch_size)),
            micro_batch_size=int(get("micro_batch_size", cls.micro_batch_size)),
            use_dynamic_batch_size=bool(get("use_dynamic_batch_size", False)),
            max_tokens_per_gpu=int(get("max_tokens_per_gpu", cls.max_tokens_per_gpu)),
            temperature=float(get("rollout_temperature", 1.0)),
            need_ref_log_probs=bool(get("use_kl_loss", False)) or float(get("kl_coef", 0.0)) != 0.0,
            ref_model_path=get("ref_load", None) or str(model_path),
            use_rollout_logprobs=bool(get("use_rollout_logprobs", False)),
        )
