"""Where the buffer is when no flag says: `RL_BUFFER_DIR`, else `./rl_buffer`, for every command
that writes or reads it (server, trainers, judge, buffer and control CLIs, Tinker)."""

from __future__ import annotations

from collections.abc import Mapping

from openclaw.environment import env_value

DEFAULT_BUFFER_DIR = "./rl_buffer"


def buffer_dir_from_env(env: Mapping[str, str] | None = None) -> str:
    """`RL_BUFFER_DIR` in `env` (default: the process environment), else the default folder."""
    return env_value("RL_BUFFER_DIR", env) or DEFAULT_BUFFER_DIR
