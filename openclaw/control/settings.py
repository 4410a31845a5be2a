"""The server's promotion-gate and dashboard settings, read once from the environment.

Environment variables rather than server flags so that the launchers (which own the server's
command line) and users set them the same way:

| variable | default | meaning |
|---|---|---|
| `OPENCLAW_PROMOTION_GATE` | `0` | `1`: a pushed weight version is served only after the canary passes |
| `OPENCLAW_CONTROL_DIR` | unset: in memory, kept folders in a temp folder made on first push | where kept versions (`v<N>/`) and `versions.json` live |
| `OPENCLAW_CANARY_MAX_PROBE_DROP` | `10` | refuse when probe accuracy drops by more points |
| `OPENCLAW_CANARY_MAX_SESSIONS_DROP` | `0.5` | refuse when the rated-sessions score drops by more nats/token |
| `OPENCLAW_CANARY_PROBE_LIMIT` | all | probe questions used (fewer: cheaper canary) |
| `OPENCLAW_TRAIN_LOG_DIR` | unset | the trainer's `--log-dir`: the dashboard plots its `metrics.jsonl` |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from openclaw.control.canary import CanaryConfig
from openclaw.environment import env_value

_TRUE, _FALSE = ("1", "true", "on", "yes"), ("", "0", "false", "off", "no")


class SettingsError(ValueError):
    pass


@dataclass(frozen=True)
class ControlSettings:
    gate: bool
    control_dir: Path | None  # None: the registry is in memory (kept folders go to a temp folder)
    canary: CanaryConfig
    train_log_dir: Path | None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ControlSettings:
        env = os.environ if env is None else env
        raw = (env_value("OPENCLAW_PROMOTION_GATE", env) or "").strip().lower()
        if raw not in _TRUE + _FALSE:
            raise SettingsError(f"OPENCLAW_PROMOTION_GATE={raw!r}: use 1 (on) or 0 (off)")
        folder = env_value("OPENCLAW_CONTROL_DIR", env)
        log_dir = env_value("OPENCLAW_TRAIN_LOG_DIR", env)
        return cls(gate=raw in _TRUE, control_dir=Path(folder) if folder else None,
                   canary=CanaryConfig(max_probe_drop=_number(env, "OPENCLAW_CANARY_MAX_PROBE_DROP", 10.0),
                                       max_sessions_drop=_number(env, "OPENCLAW_CANARY_MAX_SESSIONS_DROP", 0.5),
                                       probe_limit=int(_number(env, "OPENCLAW_CANARY_PROBE_LIMIT", 0)) or None),
                   train_log_dir=Path(log_dir) if log_dir else None)


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env_value(name, env)
    try:
        return float(raw) if raw else default  # unset or empty: the default
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number") from None
