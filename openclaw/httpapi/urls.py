"""The URL a client uses to reach a server bound to `host`: a wildcard bind is reached through
loopback, an IPv6 address goes in brackets. The server's banner and every client command that
defaults to the local server (`OPENCLAW_HOST` / `OPENCLAW_PORT`) build it here."""

from __future__ import annotations

from collections.abc import Mapping

from openclaw.environment import env_value

WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def client_url(host: str, port: int | str) -> str:
    if host in WILDCARD_HOSTS:
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def server_url_from_env(env: Mapping[str, str] | None = None) -> str:
    """The local server's URL from `OPENCLAW_HOST` / `OPENCLAW_PORT` (defaults 127.0.0.1:8000)."""
    return client_url(env_value("OPENCLAW_HOST", env) or "127.0.0.1", env_value("OPENCLAW_PORT", env) or 8000)
