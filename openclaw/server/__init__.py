"""The OpenAI-compatible server: `python -m openclaw.server`, or `create_app(config)` in-process.

The names below load on first use (PEP 562), so `openclaw.server.config` (the flags, which the
launcher's dry run reads) does not import FastAPI and the engines.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "create_app": "openclaw.server.app",
    "ConfigError": "openclaw.server.config",
    "EngineConfig": "openclaw.server.config",
    "RLConfig": "openclaw.server.config",
    "ServerConfig": "openclaw.server.config",
    "parse_config": "openclaw.server.config",
    "BackgroundServer": "openclaw.server.runner",
    "serve_in_background": "openclaw.server.runner",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'openclaw.server' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
