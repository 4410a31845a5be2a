"""The server's ASGI guards; they live in `openclaw.httpapi.middleware` (the engine's API uses them too)."""

from openclaw.httpapi.middleware import (
    LOOPBACK_NAMES,
    OPEN_PATHS,
    SAFE_METHODS,
    APIKeyMiddleware,
    BodyLimitMiddleware,
    BodyTimeout,
    BodyTooLarge,
    CrossSiteGuard,
    host_name,
    presented_key,
    send_error,
)

__all__ = ["LOOPBACK_NAMES", "OPEN_PATHS", "SAFE_METHODS", "APIKeyMiddleware", "BodyLimitMiddleware", "BodyTimeout",
           "BodyTooLarge", "CrossSiteGuard", "host_name", "presented_key", "send_error"]
