"""Who sends a request: the user id and role a key (or, keyless on loopback, a header) names.

Keys come from the server's `--api-key` (the admin "default") and `--api-keys-file` (a JSON
object, `load_key_file`). The middleware (`openclaw.httpapi.middleware.IdentityMiddleware`)
resolves the identity once per request and puts it in the ASGI scope; routes read it with
`scope_identity`, so nothing parses the key or the `X-OpenClaw-User` header twice.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openclaw.httpapi.config import ConfigError

DEFAULT_USER = "default"  # the single --api-key, a keyless server without the header, old buffers
USER_HEADER = b"x-openclaw-user"
USER_ID_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")
SCOPE_KEY = "openclaw_user"  # scope["state"][SCOPE_KEY]: the request's Identity
ROLE_ADMIN, ROLE_USER = "admin", "user"


@dataclass(frozen=True)
class Identity:
    """A request's user. An admin sees every user's sessions and may change the served weights;
    a user sees only their own and may not."""

    user_id: str
    role: str

    @property
    def is_admin(self) -> bool:
        return self.role == ROLE_ADMIN


ADMIN_DEFAULT = Identity(DEFAULT_USER, ROLE_ADMIN)


def valid_user_id(value: str) -> bool:
    return USER_ID_PATTERN.fullmatch(value) is not None


@dataclass(frozen=True)
class KeyTable:
    """Keys and the identity each one names. Matching compares the presented key with every key
    in constant time: neither the position nor the length of a match shows in the timing."""

    entries: tuple[tuple[bytes, Identity], ...]

    def match(self, presented: str) -> Identity | None:
        key = presented.encode("utf-8", "surrogateescape")
        found: Identity | None = None
        for stored, identity in self.entries:  # no early exit: every key is compared
            if hmac.compare_digest(key, stored) and found is None:
                found = identity
        return found

    @property
    def per_user(self) -> bool:
        """Whether some key names a plain user (then roles matter: weight routes are admin-only)."""
        return any(not identity.is_admin for _, identity in self.entries)


def _key_problem(key: Any) -> str | None:
    if not isinstance(key, str):
        return "must be a string"
    if not key.strip():
        return "is blank"
    if any(ch.isspace() for ch in key):
        return "contains whitespace (clients send keys without it)"
    return None


def _section(path: Path, data: Mapping[str, Any], name: str, role: str) -> list[tuple[str, str, Identity]]:
    """(field, key, identity) for each entry of `users` / `admins`."""
    section = data.get(name, {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: '{name}' must be an object of user id -> {{\"key\": \"...\"}}")
    out = []
    for user_id, entry in section.items():
        where = f"{name}.{user_id}"
        if not valid_user_id(user_id):
            raise ConfigError(f"{path}: user id {user_id!r} in '{name}' must match [A-Za-z0-9_.-]{{1,64}}")
        if role == ROLE_USER and user_id == DEFAULT_USER:
            # "default" owns what was stored before there were users: only an admin may hold it.
            raise ConfigError(f"{path}: '{where}': the user id 'default' is reserved for admins (put it in 'admins')")
        if not isinstance(entry, dict) or set(entry) != {"key"}:
            raise ConfigError(f"{path}: '{where}' must be an object with exactly one field, \"key\"")
        problem = _key_problem(entry["key"])
        if problem is not None:
            raise ConfigError(f"{path}: '{where}.key' {problem}")
        out.append((f"{where}.key", entry["key"], Identity(user_id, role)))
    return out


def load_key_file(path: Path, admin_key: str | None = None) -> KeyTable:
    """The key table of `path`:
    `{"users": {"alice": {"key": "..."}}, "admins": {"ops": {"key": "..."}}}` (either section may
    be absent, not both). `admin_key` (the single --api-key) joins it as the admin "default".
    ConfigError names the file and the field for anything malformed or a key used twice."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"--api-keys-file {path}: cannot read it ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"--api-keys-file {path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not set(data) <= {"users", "admins"} or not data:
        raise ConfigError(f"{path}: expected a JSON object with 'users' and/or 'admins' (and nothing else)")
    rows = _section(path, data, "users", ROLE_USER) + _section(path, data, "admins", ROLE_ADMIN)
    if admin_key is not None:
        rows.append(("--api-key", admin_key, ADMIN_DEFAULT))
    if not rows:
        raise ConfigError(f"{path}: no keys: add at least one entry to 'users' or 'admins'")
    return _table(path, rows)


def _table(path: Path, rows: Iterable[tuple[str, str, Identity]]) -> KeyTable:
    seen: dict[str, str] = {}
    for where, key, _ in rows:
        if key in seen:  # one key for two ids: the request's user would be a guess
            raise ConfigError(f"{path}: '{where}' repeats the key of '{seen[key]}': every key must be unique")
        seen[key] = where
    return KeyTable(tuple((key.encode("utf-8", "surrogateescape"), identity) for _, key, identity in rows))


def single_key_table(api_key: str) -> KeyTable:
    """The single --api-key alone: its holder is the admin "default" (today's one-user server)."""
    return KeyTable(((api_key.encode("utf-8", "surrogateescape"), ADMIN_DEFAULT),))


def scope_identity(scope: Mapping[str, Any]) -> Identity:
    """The identity the middleware resolved. A route reached without it is a wiring fault, not a
    client error: failing loudly keeps a request from silently acting as the admin."""
    identity = scope.get("state", {}).get(SCOPE_KEY)
    if not isinstance(identity, Identity):
        raise RuntimeError("no request identity in the ASGI scope: IdentityMiddleware is not installed")
    return identity
