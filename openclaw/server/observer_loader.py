"""Wire the RL intercept (openclaw.intercept, another module) behind `--enable-rl-intercept`."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from openclaw.server.config import ConfigError, ServerConfig
from openclaw.server.hooks import TurnObserver


def build_observer(config: ServerConfig, engine: Any = None) -> TurnObserver | None:
    """None unless `config.rl.enabled`; otherwise `openclaw.intercept.build_observer(...)`, called
    with whichever of (rl config, server config, engine) its signature names."""
    if not config.rl.enabled:
        return None
    try:
        # import_module (not `from openclaw import intercept`) so an entry in sys.modules decides
        intercept = importlib.import_module("openclaw.intercept")
    except ImportError as exc:
        raise ConfigError(f"--enable-rl-intercept needs the openclaw.intercept module, which could not be "
                          f"imported ({exc}). Run without --enable-rl-intercept or install the full package.") from exc
    factory = getattr(intercept, "build_observer", None)
    if factory is None:
        raise ConfigError("openclaw.intercept has no build_observer(); cannot enable the RL intercept")
    # The intercept receives its typed InterceptConfig (composed by openclaw.server.config).
    intercept_cfg = config.rl.intercept
    available = {"rl": intercept_cfg, "rl_config": intercept_cfg, "config": intercept_cfg, "server_config": config,
                 "engine": engine, "tokenizer": getattr(engine, "tokenizer", None)}
    params = inspect.signature(factory).parameters
    kwargs = {k: v for k, v in available.items() if k in params}
    if not kwargs and params:
        kwargs = {next(iter(params)): intercept_cfg}
    try:
        return factory(**kwargs)
    except ValueError as exc:  # e.g. the buffer refuses the directory
        raise ConfigError(f"RL intercept configuration: {exc}") from exc
