"""RL control fields (session id, turn type, session done, opt-out): headers first, then the same
keys in the JSON body, which are always stripped before the body is validated or generated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openclaw.httpapi.identity import DEFAULT_USER
from openclaw.server.errors import OpenAIError
from openclaw.server.hooks import RL_BODY_ALIASES, RL_CONTROL_FIELDS, RLControl

MAX_SESSION_ID_LEN = 256
TURN_TYPES = ("main", "side")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _as_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise OpenAIError(400, f"Invalid value for '{key}': expected a boolean (true/false/1/0), got {value!r}",
                      param=key, code="invalid_value")


def _as_session_id(value: Any) -> str:
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise OpenAIError(400, f"Invalid value for 'session_id': expected a string, got {type(value).__name__}",
                          param="session_id", code="invalid_value")
    sid = str(value)
    if not sid or len(sid) > MAX_SESSION_ID_LEN:
        raise OpenAIError(400, f"Invalid value for 'session_id': length must be 1..{MAX_SESSION_ID_LEN} characters",
                          param="session_id", code="invalid_value")
    if any(ord(c) < 32 or ord(c) == 127 for c in sid):
        raise OpenAIError(400, "Invalid value for 'session_id': control characters are not allowed",
                          param="session_id", code="invalid_value")
    return sid


def _as_turn_type(value: Any) -> str:
    if not isinstance(value, str) or value.strip().lower() not in TURN_TYPES:
        raise OpenAIError(400, f"Invalid value for 'turn_type': expected one of {list(TURN_TYPES)}, got {value!r}",
                          param="turn_type", code="invalid_value")
    return value.strip().lower()


_CONVERT = {"session_id": _as_session_id, "turn_type": _as_turn_type,
            "session_done": lambda v: _as_bool("session_done", v), "rl_opt_out": lambda v: _as_bool("rl_opt_out", v)}


def extract_rl_control(headers: Mapping[str, str], body: dict[str, Any],
                       user_id: str = DEFAULT_USER) -> tuple[RLControl, dict[str, Any]]:
    """Returns the control fields (owned by `user_id`, the request's identity) and the body without
    them (the input dict is not modified)."""
    found_body: dict[str, Any] = {}
    clean = dict(body)
    for key, aliases in RL_BODY_ALIASES.items():
        for alias in aliases:
            if alias in clean:
                value = clean.pop(alias)
                found_body.setdefault(key, value)
    values: dict[str, Any] = {}
    source: dict[str, str] = {}
    lower = {k.lower(): v for k, v in headers.items()}
    for header, key in RL_CONTROL_FIELDS.items():
        if header in lower:
            values[key], source[key] = _CONVERT[key](lower[header]), "header"
        elif key in found_body and found_body[key] is not None:
            values[key], source[key] = _CONVERT[key](found_body[key]), "body"
    control = RLControl(
        session_id=values.get("session_id"),
        turn_type=values.get("turn_type"),
        session_done=values.get("session_done", False),
        opt_out=values.get("rl_opt_out", False),
        source=source,
        user_id=user_id,
    )
    return control, clean
