"""Launch settings: the reference's environment variables, read once into one typed object.

Every setting a run script offered as `${NAME:-default}` is a field here, so the recipes and the
plan read typed values, never `os.environ`. Defaults that belong to a component (judge votes,
server port) are not restated: an unset variable stays None and the component's own default
applies (the plan shows the value it will use).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


class LaunchError(RuntimeError):
    """A launch that must not start (or cannot go on); the message is shown to the user."""


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return value if value not in (None, "") else None


def _flags(env: Mapping[str, str], name: str) -> tuple[str, ...] | None:
    """A `*_ARGS` string as a flag list (shell words, so quoted values survive)."""
    raw = env.get(name)
    if raw is None:
        return None
    try:
        return tuple(shlex.split(raw))
    except ValueError as exc:
        raise LaunchError(f"{name}={raw!r} is not a valid list of flags: {exc}") from None


def count_gpus(env: Mapping[str, str]) -> int:
    """GPUs `nvidia-smi -L` lists (0 without the driver's tool)."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, env=dict(env))
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU"))


@dataclass(frozen=True)
class Settings:
    """What the environment asks for. Paths are absolute: the Ray job runs in a copy of the repo."""

    repo: Path
    python: str = "python"
    model_path: str | None = None
    model_size: str = "7b"
    data_path: str | None = None
    ckpt_save_dir: Path | None = None
    resume_ckpt: Path | None = None
    log_dir: Path = Path("logs")
    train_gpus: str | None = None
    rollout_gpus: str | None = None
    num_gpus: int = 0
    # judge (None: the judge package's default)
    prm_model_path: str | None = None
    majority_vote_n: str | None = None
    majority_vote_threshold: str | None = None
    num_judge_workers: str | None = None
    # server
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    server_url: str | None = None
    rl_buffer_dir: Path = Path("rl_buffer")
    # trainer
    num_rollout: str | None = None
    buffer_wait_timeout: str | None = None
    rollout_args: tuple[str, ...] | None = None
    optimizer_args: tuple[str, ...] | None = None
    lora_args: tuple[str, ...] | None = None
    ckpt_args: tuple[str, ...] | None = None
    extra_args: tuple[str, ...] = ()
    reward_args: tuple[str, ...] = ()  # routed per flag, like the command line (see plan.build_plan)
    method_args: tuple[str, ...] | None = None
    wandb: dict[str, str] = field(default_factory=dict)
    # Ray
    ray_address: str | None = None
    ray_dashboard_port: int = 8265
    ray_num_cpus: str | None = None
    ray_start_timeout: float = 300.0
    dry_run: bool = False
    progress_interval: float = 30.0
    env: Mapping[str, str] = field(default_factory=dict, repr=False)  # the raw environment (for recipes)

    @classmethod
    def from_env(cls, env: Mapping[str, str], repo: Path) -> Settings:
        def path(name: str, default: str | None = None) -> Path | None:
            raw = _get(env, name) or default
            return (repo / raw).resolve() if raw and not os.path.isabs(raw) else (Path(raw) if raw else None)

        def number(name: str, default: float, kind: type = float) -> float:
            raw = _get(env, name)
            if raw is None:
                return default
            try:
                return kind(raw)
            except ValueError:
                raise LaunchError(f"{name}={raw!r} is not a {kind.__name__}") from None

        dry = _get(env, "OPENCLAW_DRY_RUN") or _get(env, "DRY_RUN") or "0"
        wandb = {k: v for k, v in (("project", _get(env, "WANDB_PROJECT")), ("group", _get(env, "WANDB_GROUP")),
                                   ("key", _get(env, "WANDB_KEY") or _get(env, "WANDB_API_KEY")),
                                   ("mode", _get(env, "WANDB_MODE"))) if v}
        return cls(
            repo=repo,
            python=_get(env, "PYTHON") or "python",
            model_path=_get(env, "MODEL_PATH") or _get(env, "BASE_MODEL_PATH"),
            model_size=_get(env, "MODEL_SIZE") or "7b",
            data_path=_get(env, "DATA_PATH"),
            ckpt_save_dir=path("CKPT_SAVE_DIR"),
            resume_ckpt=path("RESUME_CKPT"),
            log_dir=path("LOG_DIR", "logs"),
            train_gpus=_get(env, "TRAIN_GPUS"),
            rollout_gpus=_get(env, "ROLLOUT_GPUS"),
            num_gpus=count_gpus(env),
            prm_model_path=_get(env, "PRM_MODEL_PATH") or _get(env, "JUDGE_MODEL_PATH"),
            majority_vote_n=_get(env, "MAJORITY_VOTE_N"),
            majority_vote_threshold=_get(env, "MAJORITY_VOTE_THRESHOLD"),
            num_judge_workers=_get(env, "NUM_JUDGE_WORKERS"),
            host=_get(env, "OPENCLAW_HOST") or "127.0.0.1",
            port=int(number("OPENCLAW_PORT", 8000, int)),
            api_key=_get(env, "OPENCLAW_API_KEY"),
            server_url=_get(env, "OPENCLAW_SERVER_URL"),
            rl_buffer_dir=path("RL_BUFFER_DIR", "rl_buffer"),
            num_rollout=_get(env, "NUM_ROLLOUT"),
            buffer_wait_timeout=_get(env, "BUFFER_WAIT_TIMEOUT"),
            rollout_args=_flags(env, "ROLLOUT_ARGS"),
            optimizer_args=_flags(env, "OPTIMIZER_ARGS"),
            lora_args=_flags(env, "LORA_ARGS"),
            ckpt_args=_flags(env, "CKPT_ARGS"),
            extra_args=_flags(env, "EXTRA_ARGS") or (),
            reward_args=_flags(env, "REWARD_ARGS") or (),
            method_args=_flags(env, "METHOD_ARGS"),
            wandb=wandb,
            ray_address=_get(env, "RAY_ADDRESS"),
            ray_dashboard_port=int(number("RAY_DASHBOARD_PORT", 8265, int)),
            ray_num_cpus=_get(env, "RAY_NUM_CPUS"),
            ray_start_timeout=number("RAY_START_TIMEOUT", 300.0),
            dry_run=dry not in ("0", "false", "no"),
            progress_interval=number("OPENCLAW_PROGRESS_INTERVAL", 30.0),
            env=dict(env),
        )

    def get(self, name: str) -> str | None:
        """A recipe's own variable (ENV_TYPE, MAX_STEPS, OPD_TOPK, ...): None when unset or empty."""
        return _get(self.env, name)

    def abspath(self, raw: str) -> str:
        return raw if os.path.isabs(raw) else str((self.repo / raw).resolve())
