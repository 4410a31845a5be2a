"""The RL intercept: turns served conversations into turn records in the trajectory buffer.

`python -m openclaw.server --enable-rl-intercept --rl-buffer-dir DIR` builds the observer with
`build_observer(config)`; the server awaits `observer.on_turn(turn)` before it delivers each
response, so every reply a client sees has a durable record (see openclaw.server.hooks).
"""

from __future__ import annotations

from typing import Any

from openclaw.httpapi.config import ConfigError
from openclaw.intercept.config import InterceptConfig, InterceptConfigError, add_intercept_args
from openclaw.intercept.observer import InterceptObserver


def build_observer(config: Any) -> InterceptObserver:
    """`config`: an InterceptConfig, the server's RLConfig (typed fields + pass-through
    --rl-*/--session-* options) or a whole ServerConfig."""
    if not isinstance(config, InterceptConfig):
        try:
            config = InterceptConfig.from_server_config(config)
        except InterceptConfigError as exc:
            # Shown by `python -m openclaw.server` as a one-line config error, not a traceback.
            raise ConfigError(str(exc)) from exc
    return InterceptObserver(config)


__all__ = ["InterceptConfig", "InterceptConfigError", "InterceptObserver", "add_intercept_args", "build_observer"]
