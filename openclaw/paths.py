"""Where OpenClaw keeps its caches (converted models, tiny test models)."""

from __future__ import annotations

from pathlib import Path

from openclaw.environment import env_value


def openclaw_home() -> Path:
    """`$OPENCLAW_HOME`, default `~/.cache/openclaw`."""
    home = env_value("OPENCLAW_HOME")
    return Path(home).expanduser() if home else Path.home() / ".cache" / "openclaw"


def models_dir() -> Path:
    return openclaw_home() / "models"
