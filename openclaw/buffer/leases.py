"""Judge leases: judge workers claim ready turns for a while, write a verdict or a failure.
A lease that expires (a dead worker) makes the turn claimable again."""

from __future__ import annotations

import json
import logging
import sqlite3
from typing import Any

from openclaw.buffer.records import JUDGE_FAILED, JUDGED, READY
from openclaw.buffer.schema import C_JUDGE_FAILED, bump

log = logging.getLogger("openclaw.buffer")


def claim(c: sqlite3.Connection, worker_id: str, limit: int, lease_seconds: float, require_next_state: bool,
          now: float) -> list[int]:
    extra = " AND next_state IS NOT NULL" if require_next_state else ""
    rows = c.execute(
        "SELECT turn_id FROM turns WHERE state=? AND (lease_expires IS NULL OR lease_expires < ?)"
        f"{extra} ORDER BY turn_id LIMIT ?",
        (READY, now, int(limit)),
    ).fetchall()
    ids = [r[0] for r in rows]
    c.executemany(
        "UPDATE turns SET lease_owner=?, lease_expires=? WHERE turn_id=?",
        [(worker_id, now + lease_seconds, t) for t in ids],
    )
    return ids


def write_judgement(c: sqlite3.Connection, turn_id: int, result: dict[str, Any], worker_id: str | None,
                    now: float) -> bool:
    q = ("UPDATE turns SET state=?, judgement=?, judged_at=?, lease_owner=NULL, lease_expires=NULL"
         " WHERE turn_id=? AND state=?")
    args: list[Any] = [JUDGED, json.dumps(result, ensure_ascii=False), now, turn_id, READY]
    if worker_id is not None:
        q += " AND lease_owner=?"
        args.append(worker_id)
    return c.execute(q, args).rowcount == 1


def record_failure(c: sqlite3.Connection, turn_id: int, error: str, max_attempts: int) -> str | None:
    row = c.execute("SELECT judge_attempts, state FROM turns WHERE turn_id=?", (turn_id,)).fetchone()
    if row is None:
        return None
    attempts, state = row[0] + 1, row[1]
    if state == READY and attempts >= max_attempts:
        state = JUDGE_FAILED
        bump(c, C_JUDGE_FAILED, 1)
        log.warning("turn %d: judge failed %d times, giving up: %s", turn_id, attempts, error[:200])
    c.execute(
        "UPDATE turns SET judge_attempts=?, judge_error=?, state=?, lease_owner=NULL, lease_expires=NULL WHERE turn_id=?",
        (attempts, error[:4000], state, turn_id),
    )
    return state


def release(c: sqlite3.Connection, worker_id: str) -> int:
    return c.execute(
        "UPDATE turns SET lease_owner=NULL, lease_expires=NULL WHERE lease_owner=? AND state=?",
        (worker_id, READY),
    ).rowcount


def owners(c: sqlite3.Connection) -> list[str]:
    """Workers that hold at least one live-or-expired lease on a ready turn."""
    rows = c.execute("SELECT DISTINCT lease_owner FROM turns WHERE state=? AND lease_owner IS NOT NULL", (READY,))
    return [r[0] for r in rows]


def leased_count(c: sqlite3.Connection, now: float) -> int:
    return c.execute("SELECT count(*) FROM turns WHERE state=? AND lease_expires >= ?", (READY, now)).fetchone()[0]
