"""Whose a stored session is: one namespace of session ids per user.

A client chooses its session ids (`X-Session-Id`, the body, OpenClaw's runtime line), so two users
may choose the same one. The stored id is therefore the user's id, `~`, and the client's id
(`alice~s1`); the admin "default" (the single --api-key, a keyless server, every buffer written
before there were users) keeps the bare id, unless it holds a `~` (then it is prefixed too, so no
id of "default" can be read as another user's). User ids cannot hold `~`, so the mapping is
one-to-one and the owner can be read back from the stored id alone (ledger rows and the retract
journal outlive the session's rows). The `user_id` columns of `sessions` and `turns` hold the same
owner for fast per-user reads.
"""

from __future__ import annotations

from openclaw.httpapi.identity import DEFAULT_USER, valid_user_id

SEPARATOR = "~"


def stored_session_id(user_id: str, session_id: str) -> str:
    """The id stored for `session_id` as `user_id` names it."""
    if not valid_user_id(user_id):
        raise ValueError(f"user id {user_id!r} must match [A-Za-z0-9_.-]{{1,64}}")
    if user_id == DEFAULT_USER and SEPARATOR not in session_id:
        return session_id
    return f"{user_id}{SEPARATOR}{session_id}"


def session_owner(stored_id: str) -> str:
    """The user a stored session id belongs to (inverse of `stored_session_id`). A bare id written
    before there were users and holding a `~` reads as the part before it: see the README's limits."""
    user, sep, _ = stored_id.partition(SEPARATOR)
    return user if sep and valid_user_id(user) else DEFAULT_USER


def shown_session_id(user_id: str, stored_id: str) -> str:
    """The id as `user_id` named it (their own prefix dropped); an admin sees stored ids."""
    prefix = f"{user_id}{SEPARATOR}"
    if user_id != DEFAULT_USER and stored_id.startswith(prefix):
        return stored_id[len(prefix):]
    return stored_id
