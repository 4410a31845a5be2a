"""The argv that starts SGLang (`sglang.launch_server`) and its router (`sglang_router`).

Pure functions of a launch config: the trainer's rollout planner (`slime.rollout.sglang_launch`)
and any runtime that serves through SGLang build their commands here.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

_SGLANG_DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
                  "float16": "float16", "fp16": "float16", "half": "half", "auto": "auto"}


@dataclass(frozen=True)
class SGLangLaunchConfig:
    """Flags for `python -m sglang.launch_server` (names mirror SGLang's server args)."""

    model_path: str
    host: str = "127.0.0.1"
    port: int = 30000
    tp_size: int = 1
    dp_size: int = 1
    mem_fraction_static: float | None = None
    context_length: int | None = None
    reasoning_parser: str | None = None
    tool_call_parser: str | None = None
    served_model_name: str | None = None
    dtype: str | None = None
    trust_remote_code: bool = False
    weight_version: str | None = "0"  # integer versions, as the embedded engine reports them
    extra_args: tuple[str, ...] = ()
    python: str = field(default_factory=lambda: sys.executable)


def build_sglang_launch_command(cfg: SGLangLaunchConfig) -> list[str]:
    """The argv that launches one SGLang server for `cfg`."""
    if not cfg.model_path:
        raise ValueError("SGLang needs --model-path (an HF folder or hub id)")
    if cfg.tp_size < 1 or cfg.dp_size < 1:
        raise ValueError("tp_size and dp_size must be >= 1")
    if cfg.mem_fraction_static is not None and not 0 < cfg.mem_fraction_static < 1:
        raise ValueError("mem_fraction_static must be in (0, 1)")
    cmd = [cfg.python, "-m", "sglang.launch_server", "--model-path", str(cfg.model_path),
           "--host", cfg.host, "--port", str(cfg.port), "--tp-size", str(cfg.tp_size)]
    if cfg.dp_size > 1:
        cmd += ["--dp-size", str(cfg.dp_size)]
    if cfg.mem_fraction_static is not None:
        cmd += ["--mem-fraction-static", str(cfg.mem_fraction_static)]
    if cfg.context_length is not None:
        cmd += ["--context-length", str(cfg.context_length)]
    if cfg.reasoning_parser:
        cmd += ["--reasoning-parser", cfg.reasoning_parser]
    if cfg.tool_call_parser:
        cmd += ["--tool-call-parser", cfg.tool_call_parser]
    if cfg.served_model_name:
        cmd += ["--served-model-name", cfg.served_model_name]
    if cfg.dtype:
        try:
            cmd += ["--dtype", _SGLANG_DTYPES[cfg.dtype.lower()]]
        except KeyError:
            raise ValueError(f"unknown dtype {cfg.dtype!r} for SGLang; choose one of {sorted(_SGLANG_DTYPES)}") from None
    if cfg.trust_remote_code:
        cmd.append("--trust-remote-code")
    if cfg.weight_version is not None:
        cmd += ["--weight-version", str(cfg.weight_version)]
    cmd += list(cfg.extra_args)
    return cmd


def build_router_command(worker_urls: Sequence[str], host: str = "127.0.0.1", port: int = 30000,
                         policy: str | None = None, extra_args: Sequence[str] = (),
                         python: str | None = None) -> list[str]:
    """The argv for `python -m sglang_router.launch_router` in front of several SGLang workers."""
    if not worker_urls:
        raise ValueError("the router needs at least one worker URL")
    cmd = [python or sys.executable, "-m", "sglang_router.launch_router", "--worker-urls", *worker_urls,
           "--host", host, "--port", str(port)]
    if policy:
        cmd += ["--policy", policy]
    return cmd + list(extra_args)
