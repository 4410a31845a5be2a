"""Where OpenClaw keeps its caches (converted models, tiny test models)."""

from __future__ import annotations

import os
from pathlib import Path


def openclaw_home() -> Path:
    """`$OPENCLAW_HOME`, default `~/.cache/openclaw`."""
    env = os.environ.get("OPENCLAW_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "openclaw"


def models_dir() -> Path:
    return openclaw_home() / "models"
