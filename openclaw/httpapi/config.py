"""The error for a configuration a service refuses to start with."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration the server refuses to start with (message is shown to the user)."""
