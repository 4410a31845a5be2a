"""The OpenAI-compatible server: `python -m openclaw.server`, or `create_app(config)` in-process."""

from openclaw.server.app import create_app
from openclaw.server.config import ConfigError, EngineConfig, RLConfig, ServerConfig, parse_config
from openclaw.server.runner import BackgroundServer, serve_in_background

__all__ = ["BackgroundServer", "ConfigError", "EngineConfig", "RLConfig", "ServerConfig", "create_app",
           "parse_config", "serve_in_background"]
