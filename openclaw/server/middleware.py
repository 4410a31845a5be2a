"""The server's ASGI guards; they live in `openclaw.httpapi.middleware` (the engine's API uses them too).

`weight_route` names the routes a plain user's key may not reach (`IdentityMiddleware`): they
change (or stall) what every user is served.
"""

import re

from openclaw.httpapi.middleware import (
    LOOPBACK_NAMES,
    OPEN_PATHS,
    SAFE_METHODS,
    APIKeyMiddleware,
    BodyLimitMiddleware,
    BodyTimeout,
    BodyTooLarge,
    CrossSiteGuard,
    IdentityMiddleware,
    host_name,
    presented_key,
    send_error,
)

# SGLang's native control routes (openclaw.engines.sglang_api) and the promotion routes.
_ENGINE_CONTROL_PATHS = frozenset({"/update_weights_from_disk", "/flush_cache", "/pause_generation",
                                   "/continue_generation", "/abort_request", "/load_lora_adapter",
                                   "/unload_lora_adapter"})
_PROMOTION_PATH = re.compile(r"/v1/weights/[^/]+/(?:promote|rollback)/?")


def weight_route(path: str) -> bool:
    """Whether `path` changes the served weights or stalls the engine for everyone (admin-only
    when keys are per user)."""
    return path.rstrip("/") in _ENGINE_CONTROL_PATHS or _PROMOTION_PATH.fullmatch(path) is not None


__all__ = ["LOOPBACK_NAMES", "OPEN_PATHS", "SAFE_METHODS", "APIKeyMiddleware", "BodyLimitMiddleware", "BodyTimeout",
           "BodyTooLarge", "CrossSiteGuard", "IdentityMiddleware", "host_name", "presented_key", "send_error",
           "weight_route"]
