"""Consumer cursors: which judged turns each trainer (consumer id) has consumed, committed
together with its checkpoint tag, so a crash never loses or double-trains a turn."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from openclaw.buffer.records import JUDGED


def unconsumed_judged(c: sqlite3.Connection, consumer_id: str, limit: int, *, turn_type: str | None,
                      min_weight_version: int | None, after_turn_id: int | None, session_id: str | None,
                      user_id: str | None = None) -> list[int]:
    q = (
        "SELECT t.turn_id FROM turns t WHERE t.state=? AND NOT EXISTS"
        " (SELECT 1 FROM consumed c WHERE c.consumer_id=? AND c.turn_id=t.turn_id)"
    )
    args: list[Any] = [JUDGED, consumer_id]
    if turn_type is not None:
        q += " AND t.turn_type=?"
        args.append(turn_type)
    if min_weight_version is not None:
        q += " AND t.weight_version>=?"
        args.append(int(min_weight_version))
    if after_turn_id is not None:
        q += " AND t.turn_id>?"
        args.append(int(after_turn_id))
    if session_id is not None:
        q += " AND t.session_id=?"
        args.append(session_id)
    if user_id is not None:  # index turns_user: (user_id, state, turn_id)
        q += " AND t.user_id=?"
        args.append(user_id)
    q += " ORDER BY t.turn_id LIMIT ?"
    args.append(int(limit))
    return [r[0] for r in c.execute(q, args).fetchall()]


def commit(c: sqlite3.Connection, consumer_id: str, turn_ids: Sequence[int], checkpoint_tag: str | None,
           now: float) -> int:
    before = c.total_changes
    c.executemany(
        "INSERT OR IGNORE INTO consumed (consumer_id, turn_id, checkpoint_tag, consumed_at)"
        " SELECT ?, turn_id, ?, ? FROM turns WHERE turn_id=?",
        [(consumer_id, checkpoint_tag, now, int(t)) for t in turn_ids],
    )
    n = c.total_changes - before
    c.execute(
        "INSERT INTO consumers (consumer_id, checkpoint_tag, consumed, updated_at) VALUES (?,?,?,?)"
        " ON CONFLICT(consumer_id) DO UPDATE SET checkpoint_tag=excluded.checkpoint_tag,"
        " consumed=consumed+excluded.consumed, updated_at=excluded.updated_at",
        (consumer_id, checkpoint_tag, n, now),
    )
    return n


def position(c: sqlite3.Connection, consumer_id: str) -> dict[str, Any] | None:
    row = c.execute(
        "SELECT consumer_id, checkpoint_tag, consumed, updated_at FROM consumers WHERE consumer_id=?",
        (consumer_id,),
    ).fetchone()
    if row is None:
        return None
    mx = c.execute("SELECT max(turn_id) FROM consumed WHERE consumer_id=?", (consumer_id,)).fetchone()[0]
    return {"consumer_id": row[0], "checkpoint_tag": row[1], "consumed": row[2], "updated_at": row[3], "max_turn_id": mx}


def all_positions(c: sqlite3.Connection) -> list[dict[str, Any]]:
    return [
        {"consumer_id": r[0], "checkpoint_tag": r[1], "consumed": r[2], "updated_at": r[3]}
        for r in c.execute("SELECT consumer_id, checkpoint_tag, consumed, updated_at FROM consumers ORDER BY consumer_id")
    ]
