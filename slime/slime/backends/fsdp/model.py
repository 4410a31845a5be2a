"""Loading the trainable model (full or LoRA), wrapping it for data parallelism, optimizer."""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from slime.backends.fsdp.config import ActorConfig


def is_adapter_folder(path: str | Path) -> bool:
    return (Path(path) / "adapter_config.json").is_file()


def adapter_base_path(path: str | Path) -> str:
    return json.loads((Path(path) / "adapter_config.json").read_text())["base_model_name_or_path"]


def load_tokenizer(path: str | Path):
    from transformers import AutoTokenizer

    folder = Path(path)
    if is_adapter_folder(folder) and not (folder / "tokenizer_config.json").is_file():
        folder = Path(adapter_base_path(folder))
    tok = AutoTokenizer.from_pretrained(str(folder))
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def load_model(cfg: ActorConfig, device: torch.device) -> torch.nn.Module:
    """fp32 weights on `device`; LoRA adapters via peft when cfg.use_lora.

    `cfg.model_path` may be a full HF folder or a PEFT adapter folder (a LoRA checkpoint): then
    the base named in adapter_config.json is loaded and the adapter continues training.
    """
    from transformers import AutoModelForCausalLM

    path = Path(cfg.model_path)
    if is_adapter_folder(path):
        from peft import PeftModel

        base = AutoModelForCausalLM.from_pretrained(adapter_base_path(path), dtype=torch.float32)
        model = PeftModel.from_pretrained(base, str(path), is_trainable=True)
    else:
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
        if cfg.use_lora:
            from peft import LoraConfig, get_peft_model

            targets: list[str] | str = list(cfg.lora_target_modules)
            if targets == ["all-linear"]:
                targets = "all-linear"  # peft's shorthand must be passed as a plain string
            lora = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                              target_modules=targets, task_type="CAUSAL_LM")
            model = get_peft_model(model, lora)
    if cfg.gradient_checkpointing:
        # non-reentrant checkpointing works with frozen inputs (LoRA) and with DDP/FSDP2
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    model.to(device)
    model.train()
    return model


def load_frozen(path: str | Path, device: torch.device) -> torch.nn.Module:
    """An inference-only copy (the KL reference of full fine-tuning)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def apply_fsdp2(model: torch.nn.Module) -> torch.nn.Module:
    """Shard every decoder layer, then the root (GPU path; needs NCCL reduce-scatter)."""
    from torch.distributed.fsdp import fully_shard

    for module in model.modules():
        if type(module).__name__.endswith("DecoderLayer"):
            fully_shard(module)
    fully_shard(model)
    return model


def build_optimizer(cfg: ActorConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("model has no trainable parameters")
    return torch.optim.AdamW(params, lr=cfg.lr, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps,
                             weight_decay=cfg.weight_decay)


def lr_lambda(cfg: ActorConfig):
    """Linear warmup to lr, then constant / linear / cosine decay to min_lr (as a multiplier)."""
    floor = cfg.min_lr / cfg.lr if cfg.lr > 0 else 0.0
    warm = max(0, cfg.lr_warmup_iters)
    decay = cfg.lr_decay_iters

    def fn(step: int) -> float:
        if warm and step < warm:
            return (step + 1) / warm
        if cfg.lr_decay_style == "constant" or not decay:
            return 1.0
        progress = min(1.0, (step - warm) / max(1, decay - warm))
        if cfg.lr_decay_style == "linear":
            return floor + (1 - floor) * (1 - progress)
        if cfg.lr_decay_style == "cosine":
            return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))
        raise ValueError(f"unknown lr decay style {cfg.lr_decay_style!r}; choose constant, linear or cosine")

    return fn


def build_scheduler(cfg: ActorConfig, optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg))
