"""GPU defaults per model: what the live recipes (rl, opd, combine; full and LoRA) set for a Qwen3 model.

A preset is picked by MODEL_PRESET, else recognised from MODEL_PATH's config.json (model type and
shape), else from the folder's name (`Qwen3-4B-Thinking-2507` -> qwen3-4b), so a dry run plans for a
model that is not on this machine. Every value lands in the plan, where `*_ARGS`, the env vars and
the command line replace it as for any preset.

Memory assumptions (80 GB GPUs, the FSDP backend keeps fp32 master weights, `--bf16` autocast):

    full fine-tuning   weights + grads + Adam = 16 bytes/param, sharded over the training GPUs
                       (4B: 64 GB / 4 = 16 GB a GPU; 8B: 128 GB / 4 = 32 GB), plus activations
                       under gradient checkpointing within --max-tokens-per-gpu
    LoRA               the fp32 base (4 bytes/param) on each training GPU plus the adapter
    one GPU (LoRA)     the engine gets --mem-fraction-static of the card (bf16 weights + KV cache),
                       the trainer the rest; full fine-tuning on one GPU is refused
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from openclaw.launch.layout import GpuLayout
from openclaw.launch.settings import LaunchError


@dataclass(frozen=True)
class ModelPreset:
    name: str
    hidden_size: int  # with num_layers: how config.json is recognised
    num_layers: int
    params_b: float
    lr_full: str
    max_tokens_per_gpu: int
    context_length: int
    max_response_len: int
    single_gpu_mem_fraction: str  # the engine's share of a GPU it shares with the trainer
    reasoning_parser: str = "qwen3"
    tool_call_parser: str = "qwen25"  # SGLang's name for the Hermes-style <tool_call> JSON Qwen3 writes
    mem_fraction: str = "0.85"  # the engine's share of GPUs it has to itself

    def engine_tp(self, layout: GpuLayout) -> int:
        """One engine over all rollout GPUs (tensor parallel), as the upstream 4B/8B recipes run it."""
        return max(1, len(layout.rollout))

    def server_flags(self, layout: GpuLayout) -> list[str]:
        colocated = layout.colocated
        return ["--reasoning-parser", self.reasoning_parser, "--tool-call-parser", self.tool_call_parser,
                "--tp-size", str(self.engine_tp(layout)),
                "--mem-fraction-static", self.single_gpu_mem_fraction if colocated else self.mem_fraction,
                "--context-length", str(self.context_length if not colocated else self.context_length // 2)]

    def rollout_flags(self) -> tuple[str, ...]:
        # 16 judged live turns a step, one GRPO group (openclaw-rl/README.md); Qwen3's own sampling temperature
        return ("--rollout-batch-size", "1", "--n-samples-per-prompt", "16", "--rollout-temperature", "0.6",
                "--rollout-max-response-len", str(self.max_response_len),
                "--rollout-max-context-len", str(self.context_length))

    def optimizer_flags(self, lora: bool) -> tuple[str, ...]:
        if lora:  # the adapter starts at zero and has few parameters: a larger step, no decay
            return ("--lr", LORA_LR, "--weight-decay", "0.0", "--adam-beta1", "0.9", "--adam-beta2", "0.999",
                    "--clip-grad", "1.0")
        return ("--lr", self.lr_full, "--weight-decay", "0.1", "--adam-beta1", "0.9", "--adam-beta2", "0.98",
                "--clip-grad", "1.0")

    @staticmethod
    def lora_flags() -> tuple[str, ...]:
        return ("--use-lora", "--lora-rank", "64", "--lora-alpha", "128", "--lora-dropout", "0.0",
                "--lora-target-modules", "all-linear")

    def memory_flags(self) -> tuple[str, ...]:
        return ("--bf16", "--gradient-checkpointing", "--use-dynamic-batch-size",
                "--max-tokens-per-gpu", str(self.max_tokens_per_gpu))

    def describe(self, layout: GpuLayout, lora: bool) -> list[str]:
        per_gpu = (16 * self.params_b / max(1, len(layout.actor))) if not lora else 4 * self.params_b
        return [f"model preset {self.name} ({self.params_b:g}B, {'LoRA' if lora else 'full fine-tuning'}): "
                f"engine TP {self.engine_tp(layout)}, context {self.context_length}, reasoning parser "
                f"{self.reasoning_parser}, tool-call parser {self.tool_call_parser}",
                f"  memory: ~{per_gpu:.0f} GB of weights/optimizer state per training GPU, plus activations "
                f"(gradient checkpointing, {self.max_tokens_per_gpu} tokens per micro-batch); engine "
                f"--mem-fraction-static {self.single_gpu_mem_fraction if layout.colocated else self.mem_fraction}"]


MODEL_PRESETS: dict[str, ModelPreset] = {p.name: p for p in (
    ModelPreset("qwen3-4b", hidden_size=2560, num_layers=36, params_b=4.0, lr_full="1e-5", max_tokens_per_gpu=16384,
                context_length=32768, max_response_len=8192, single_gpu_mem_fraction="0.4"),
    ModelPreset("qwen3-8b", hidden_size=4096, num_layers=36, params_b=8.2, lr_full="5e-6", max_tokens_per_gpu=8192,
                context_length=32768, max_response_len=8192, single_gpu_mem_fraction="0.35"),
)}

LORA_LR = "1e-5"
_NAME = re.compile(r"qwen3[-_]?(\d+(?:\.\d+)?)b", re.IGNORECASE)


def find_preset(model_path: str, explicit: str | None) -> ModelPreset | None:
    """The preset MODEL_PRESET names, or the one the model is recognised as (None: no preset fits)."""
    if explicit is not None:
        try:
            return MODEL_PRESETS[explicit.lower()]
        except KeyError:
            raise LaunchError(f"MODEL_PRESET={explicit}: known presets are {', '.join(MODEL_PRESETS)}") from None
    config = Path(model_path) / "config.json"
    if config.is_file():
        try:
            cfg = json.loads(config.read_text())
        except ValueError as exc:
            raise LaunchError(f"{config} is not valid JSON: {exc}") from None
        if cfg.get("model_type") != "qwen3":
            return None
        return next((p for p in MODEL_PRESETS.values()
                     if (p.hidden_size, p.num_layers) == (cfg.get("hidden_size"), cfg.get("num_hidden_layers"))), None)
    m = _NAME.search(Path(model_path).name)
    return MODEL_PRESETS.get(f"qwen3-{m.group(1)}b") if m else None
