"""Wire in-process judge workers behind `--judge-workers N` (openclaw.judge, another module)."""

from __future__ import annotations

from typing import Any

from openclaw.server.config import ConfigError, ServerConfig


def judge_config(config: ServerConfig) -> Any | None:
    """The judge's typed config when `--judge-workers N` (or `--num-judge-workers N`) asks for
    workers in this process, else None. Validated before the server starts serving."""
    options = config.rl.options
    workers = options.get("judge_workers", options.get("num_judge_workers"))
    if workers in (None, False, "0", 0):
        return None
    if not config.rl.enabled:
        raise ConfigError("--judge-workers needs --enable-rl-intercept: the judge reads the trajectory buffer")
    from openclaw.judge import JudgeConfig, JudgeConfigError

    try:
        return JudgeConfig.from_options(options)
    except (JudgeConfigError, SystemExit, ValueError) as exc:
        raise ConfigError(f"judge configuration: {exc}") from exc


def start_judge(config: ServerConfig, judge_cfg: Any) -> Any:
    """Start the workers on the server's buffer; the handle's `.stop()` joins them."""
    from openclaw.judge import start_judge_service

    return start_judge_service(judge_cfg, config.rl.buffer_dir)
