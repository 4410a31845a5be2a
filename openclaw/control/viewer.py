"""What one request may see of the buffer: an admin every user's sessions by their stored ids, a
user only their own, named by the ids they chose (`openclaw.buffer.users`).

A session of another user is treated exactly as a session that does not exist (same status,
same message), so a user cannot learn which ids others use.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from openclaw.buffer.users import session_owner, shown_session_id, stored_session_id
from openclaw.httpapi.identity import ADMIN_DEFAULT, Identity


@dataclass(frozen=True)
class Viewer:
    identity: Identity

    @property
    def user_id(self) -> str | None:
        """The user whose rows to read; None: every user's (an admin)."""
        return None if self.identity.is_admin else self.identity.user_id

    def stored(self, session_id: str) -> str:
        """The stored id of a session this viewer names (an admin names stored ids)."""
        return session_id if self.identity.is_admin else stored_session_id(self.identity.user_id, session_id)

    def shown(self, stored_id: str) -> str:
        return stored_id if self.identity.is_admin else shown_session_id(self.identity.user_id, stored_id)

    def owns(self, stored_id: str) -> bool:
        return self.identity.is_admin or session_owner(stored_id) == self.identity.user_id

    def rows(self, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows (each with a stored `session_id`) this viewer may see, ids as it names them."""
        return [{**r, "session_id": self.shown(r["session_id"])} for r in rows if self.owns(r["session_id"])]


# The command line and in-process callers act on the buffer files directly: they see everything.
ADMIN_VIEW = Viewer(ADMIN_DEFAULT)
