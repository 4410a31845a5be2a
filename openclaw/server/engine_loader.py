"""Build the engine a ServerConfig asks for (imports are lazy: the hf backend needs no SGLang)."""

from __future__ import annotations

from pathlib import Path

from openclaw.engines.base import Engine
from openclaw.server.config import ConfigError, EngineConfig


def resolve_dtype(dtype: str, device: str) -> str:
    """`auto`: fp32 on CPU (bitwise-deterministic log-probs, and bf16 matmuls are slow on most
    CPUs), bf16 on GPUs."""
    if dtype != "auto":
        return dtype
    if device.startswith("cuda"):
        return "bfloat16"
    if device == "auto":
        import torch

        return "bfloat16" if torch.cuda.is_available() else "float32"
    return "float32"


# Positions per request slot of the llama.cpp engine (KV is allocated up front: ~22.5 KiB per token
# for SmolLM2-135M, times --max-batch-size slots); the embedded model's full window.
LLAMACPP_CONTEXT = 8192


def load_engine(cfg: EngineConfig, served_model_name: str | None = None) -> Engine:
    if cfg.backend == "hf":
        from openclaw.engines.hf_engine import HFEngine

        path = cfg.model_path
        if path and path.startswith(("/", ".", "~")) and not Path(path).expanduser().exists():
            raise ConfigError(f"--model-path {path} does not exist")

        return HFEngine.load(
            cfg.model_path, dtype=resolve_dtype(cfg.dtype, cfg.device),
            device=None if cfg.device == "auto" else cfg.device, max_batch_size=cfg.max_batch_size,
            served_model_name=served_model_name, prefix_cache_tokens=cfg.prefix_cache_tokens,
        )
    if cfg.backend == "llamacpp":
        return _load_llamacpp(cfg, served_model_name)
    if cfg.backend in ("sglang", "vllm"):
        return _load_remote(cfg, served_model_name)
    if cfg.backend == "tinker":
        return _load_tinker(cfg)
    raise ConfigError(f"unknown backend {cfg.backend!r}")


def _load_llamacpp(cfg: EngineConfig, served_model_name: str | None) -> Engine:
    """llama.cpp on a GGUF: --model-path names the .gguf (default: the embedded SmolLM2's Q4_1
    file); token ids come from the embedded model's HF tokenizer, checked against the GGUF's."""
    from openclaw.engines.llamacpp_engine import LlamaCppEngine
    from openclaw.engines.llamacpp_runtime import LlamaCppUnavailable

    path = cfg.model_path
    if path is not None and not path.endswith(".gguf"):
        raise ConfigError(f"--backend llamacpp serves a GGUF file: --model-path {path} is not a .gguf "
                          "(leave it out for the embedded SmolLM2)")
    if path is not None and not Path(path).expanduser().is_file():
        raise ConfigError(f"--model-path {path} does not exist")
    try:
        return LlamaCppEngine.load(gguf_path=path, max_batch_size=cfg.max_batch_size,
                                   ctx_per_slot=cfg.context_length or LLAMACPP_CONTEXT,
                                   served_model_name=served_model_name,
                                   prefix_reuse=cfg.prefix_cache_tokens != 0)
    except LlamaCppUnavailable as exc:
        raise ConfigError(str(exc)) from exc


def _load_remote(cfg: EngineConfig, served_model_name: str | None) -> Engine:
    """SGLang (launch, or attach with --engine-url) and vLLM (attach) engines."""
    from openclaw.engines import sglang_backend

    try:
        return sglang_backend.load_engine(
            backend=cfg.backend, model_path=cfg.model_path, url=cfg.engine_url,
            dtype=None if cfg.dtype == "auto" else cfg.dtype, tp_size=cfg.tp_size,
            mem_fraction_static=cfg.mem_fraction_static, context_length=cfg.context_length,
            reasoning_parser=cfg.reasoning_parser, tool_call_parser=cfg.tool_call_parser,
            served_model_name=served_model_name)
    except sglang_backend.BackendUnavailable as exc:
        raise ConfigError(str(exc)) from exc


def _load_tinker(cfg: EngineConfig) -> Engine:
    """Sampling from a Tinker API (openclaw-tinker/README.md): --model-path names the base model as
    Tinker knows it (its tokenizer is read from there), --engine-url the service (else env
    TINKER_ENDPOINT, else the SDK's default), env TINKER_API_KEY the key."""
    from openclaw.engines.tinker_engine import TinkerEngine, TinkerUnavailable

    if not cfg.model_path:
        raise ConfigError("--backend tinker needs --model-path: the base model as Tinker names it")
    try:
        return TinkerEngine.load(cfg.model_path, base_url=cfg.engine_url, max_context_len=cfg.context_length)
    except TinkerUnavailable as exc:
        raise ConfigError(str(exc)) from exc
