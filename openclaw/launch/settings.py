"""Launch settings: the environment variables of names.py's table, read once into one typed object.

Only names the table declares are read (`Settings.get` of another name is a launcher bug), aliases
are folded into their documented name, and the launcher's own flags and `--config` keys arrive as
overrides, so the recipes and the plan read one value per setting and never `os.environ`. Defaults
that belong to a component (judge votes, server port) are not restated: an unset variable stays
None and the component's own default applies (the plan shows the value it will use).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from openclaw.launch.names import ENV, SECRETS


class LaunchError(RuntimeError):
    """A launch that must not start (or cannot go on); the message is shown to the user."""


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return value if value not in (None, "") else None


def _split(name: str, raw: str | None) -> tuple[str, ...] | None:
    """A `*_ARGS` string as a flag list (shell words, so quoted values survive)."""
    if raw is None:
        return None
    try:
        return tuple(shlex.split(raw))
    except ValueError as exc:
        raise LaunchError(f"{name}={raw!r} is not a valid list of flags: {exc}") from None


def _flags(env: Mapping[str, str], name: str) -> tuple[str, ...] | None:
    return _split(name, env.get(name))


def read_names(env: Mapping[str, str],
               overrides: Mapping[str, tuple[str, str]] = {}) -> tuple[dict[str, str], dict[str, str]]:
    """The table's env vars as (value by documented name, how each was given).

    An alias is folded into its documented name; an alias and its name both set to different values
    is an error naming both (which one would win is not obvious). `overrides` (the launcher's flags and
    `--config` keys: name -> (value, how it was given)) replace the environment's value. A refused
    name stops the launch with its reason."""
    values: dict[str, str] = {}
    given: dict[str, str] = {}
    for row in ENV.values():
        raw = _get(env, row.name)
        if raw is None:
            continue
        if row.refused:
            raise LaunchError(f"{row.name} set: {row.refused}")
        name = row.alias_of or row.name
        if name in values and values[name] != raw:
            first, second = ("***", "***") if name in SECRETS else (repr(values[name]), repr(raw))
            raise LaunchError(f"{given[name]}={first} and {row.name}={second} differ: {row.name} is another name "
                              f"for {name}; set one of them")
        values[name] = raw
        given.setdefault(name, row.name)
        if not row.alias_of:
            given[name] = row.name
    for name, (value, how) in overrides.items():
        values[name], given[name] = value, how
    return values, given


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
    num_gpus: int = 0
    # judge (None: the judge package's default)
    prm_model_path: str | None = None
    # server
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    server_url: str | None = None
    rl_buffer_dir: Path = Path("rl_buffer")
    # trainer
    num_rollout: str | None = None
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
    # every table name that is set (aliases folded in), and how each was given (for messages)
    values: Mapping[str, str] = field(default_factory=dict, repr=False)
    given: Mapping[str, str] = field(default_factory=dict, repr=False)
    env: Mapping[str, str] = field(default_factory=dict, repr=False)  # the raw environment (children inherit it)

    @classmethod
    def from_env(cls, env: Mapping[str, str], repo: Path,
                 overrides: Mapping[str, tuple[str, str]] = {}) -> Settings:
        values, given = read_names(env, overrides)

        def get(name: str) -> str | None:
            return values.get(name)

        def path(name: str, default: str | None = None) -> Path | None:
            raw = get(name) or default
            return (repo / raw).resolve() if raw and not os.path.isabs(raw) else (Path(raw) if raw else None)

        def number(name: str, default: float, kind: type = float) -> float:
            raw = get(name)
            if raw is None:
                return default
            try:
                return kind(raw)
            except ValueError:
                raise LaunchError(f"{given[name]}={raw!r} is not a{'n' if kind is int else ''} "
                                  f"{'integer' if kind is int else 'number'}") from None

        wandb = {k: v for k, v in (("project", get("WANDB_PROJECT")), ("group", get("WANDB_GROUP")),
                                   ("key", get("WANDB_API_KEY")), ("mode", get("WANDB_MODE"))) if v}
        if wandb.get("mode") not in (None, "online", "offline", "disabled"):
            raise LaunchError(f"WANDB_MODE={wandb['mode']!r}: expected online, offline or disabled")
        return cls(
            repo=repo,
            python=get("PYTHON") or "python",
            model_path=get("MODEL_PATH"),
            model_size=get("MODEL_SIZE") or "7b",
            data_path=get("DATA_PATH"),
            ckpt_save_dir=path("CKPT_SAVE_DIR"),
            resume_ckpt=path("RESUME_CKPT"),
            log_dir=path("LOG_DIR", "logs"),
            num_gpus=count_gpus(env),
            prm_model_path=get("PRM_MODEL_PATH"),
            host=get("OPENCLAW_HOST") or "127.0.0.1",
            port=int(number("OPENCLAW_PORT", 8000, int)),
            api_key=get("OPENCLAW_API_KEY"),
            server_url=get("OPENCLAW_SERVER_URL"),
            rl_buffer_dir=path("RL_BUFFER_DIR", "rl_buffer"),
            num_rollout=get("NUM_ROLLOUT"),
            rollout_args=_split("ROLLOUT_ARGS", values.get("ROLLOUT_ARGS", env.get("ROLLOUT_ARGS"))),
            optimizer_args=_split("OPTIMIZER_ARGS", values.get("OPTIMIZER_ARGS", env.get("OPTIMIZER_ARGS"))),
            lora_args=_split("LORA_ARGS", values.get("LORA_ARGS", env.get("LORA_ARGS"))),
            ckpt_args=_split("CKPT_ARGS", values.get("CKPT_ARGS", env.get("CKPT_ARGS"))),
            extra_args=_split("EXTRA_ARGS", get("EXTRA_ARGS")) or (),
            reward_args=_split("REWARD_ARGS", get("REWARD_ARGS")) or (),
            method_args=_split("METHOD_ARGS", values.get("METHOD_ARGS", env.get("METHOD_ARGS"))),
            wandb=wandb,
            ray_address=get("RAY_ADDRESS"),
            ray_dashboard_port=int(number("RAY_DASHBOARD_PORT", 8265, int)),
            ray_num_cpus=get("RAY_NUM_CPUS"),
            ray_start_timeout=number("RAY_START_TIMEOUT", 300.0),
            dry_run=(get("OPENCLAW_DRY_RUN") or "0") not in ("0", "false", "no"),
            progress_interval=number("OPENCLAW_PROGRESS_INTERVAL", 30.0),
            values=values,
            given=given,
            env=dict(env),
        )

    def get(self, name: str) -> str | None:
        """A table name's value (ENV_TYPE, MAX_STEPS, OPD_TOPK, ...): None when unset or empty."""
        if name not in ENV or ENV[name].alias_of:
            raise KeyError(f"{name} is not a documented name of openclaw/launch/names.py")  # a launcher bug
        return self.values.get(name)

    def source(self, name: str) -> str:
        """How a setting was given, for messages: the variable, its alias, a flag or a --config key."""
        return self.given.get(name, name)

    def shown(self, name: str, value: str) -> str:
        """`NAME=value`, `--flag value` or `key: value (in --config FILE)`, as the user gave it."""
        how = self.source(name)
        if how.startswith("--"):
            return f"{how} {value}"
        if " in --config " in how:
            key, _, where = how.partition(" in ")
            return f"{key}: {value} (in {where})"
        return f"{how}={value}"

    def abspath(self, raw: str) -> str:
        return raw if os.path.isabs(raw) else str((self.repo / raw).resolve())
