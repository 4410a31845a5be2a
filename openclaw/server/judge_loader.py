"""Wire in-process judge workers behind `--judge-workers N` (openclaw.judge, another module)."""

from __future__ import annotations

from typing import Any

from openclaw.judge.config import JudgeConfig
from openclaw.server.config import ServerConfig


def judge_config(config: ServerConfig) -> JudgeConfig | None:
    """The judge's typed config when `--judge-workers N` (or `--num-judge-workers N`) asks for
    workers in this process, else None. Parsed and validated with the server's flags
    (openclaw.server.config), before the server starts serving."""
    return config.rl.judge


def start_judge(config: ServerConfig, judge_cfg: JudgeConfig) -> Any:
    """Start the workers on the server's buffer; the handle's `.stop()` joins them."""
    from openclaw.judge import start_judge_service  # lazy: the CPU judge loads torch

    return start_judge_service(judge_cfg, config.rl.buffer_dir)
