"""SQL of the user-control tables (schema versions 3-4): explicit feedback, the provenance ledger,
export files we wrote, trainer files that hold text (debug dumps), and the retract journal. The rules (what a rating is worth, when a
retract rolls back) live in `openclaw.control`; this module only stores and reads rows.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from openclaw.buffer.schema import C_FEEDBACK_CHANGED, C_RETRACTED, bump


# ------------------------------------------------------------------ turns by id
def has_session(c: sqlite3.Connection, session_id: str) -> bool:
    """Whether the buffer holds anything of the session (its row, a turn or a rating)."""
    return any(c.execute(q, (session_id,)).fetchone() is not None for q in (
        "SELECT 1 FROM sessions WHERE session_id=?", "SELECT 1 FROM turns WHERE session_id=? LIMIT 1",
        "SELECT 1 FROM feedback WHERE session_id=? LIMIT 1"))


def turn_by_request(c: sqlite3.Connection, request_id: str) -> tuple[int, str, int] | None:
    """(turn_id, session_id, turn_index) of the turn a chat completion `id` produced."""
    row = c.execute("SELECT turn_id, session_id, turn_index FROM turns WHERE request_id=? ORDER BY turn_id LIMIT 1",
                    (request_id,)).fetchone()
    return (int(row[0]), row[1], int(row[2])) if row else None


def turn_by_index(c: sqlite3.Connection, session_id: str, turn_index: int) -> tuple[int, str, int] | None:
    row = c.execute("SELECT turn_id, session_id, turn_index FROM turns WHERE session_id=? AND turn_index=?",
                    (session_id, turn_index)).fetchone()
    return (int(row[0]), row[1], int(row[2])) if row else None


# ------------------------------------------------------------------ feedback
FEEDBACK_COLS = "turn_id, session_id, turn_index, rating, score, comment, changes, created_at, updated_at"


def _feedback_row(r: Sequence[Any]) -> dict[str, Any]:
    return dict(zip(FEEDBACK_COLS.split(", "), r, strict=True))


def put_feedback(c: sqlite3.Connection, turn: tuple[int, str, int], rating: str, score: float,
                 comment: str | None, now: float) -> dict[str, Any]:
    """Insert or replace the turn's rating; a replacement counts one change (also in a counter)."""
    turn_id, session_id, turn_index = turn
    had = c.execute("SELECT 1 FROM feedback WHERE turn_id=?", (turn_id,)).fetchone() is not None
    c.execute(
        f"INSERT INTO feedback ({FEEDBACK_COLS}) VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?) "
        "ON CONFLICT(turn_id) DO UPDATE SET rating=excluded.rating, score=excluded.score, "
        "comment=excluded.comment, changes=feedback.changes+1, updated_at=excluded.updated_at",
        (turn_id, session_id, turn_index, rating, score, comment, now, now),
    )
    if had:
        bump(c, C_FEEDBACK_CHANGED, 1)
    return _feedback_row(c.execute(f"SELECT {FEEDBACK_COLS} FROM feedback WHERE turn_id=?", (turn_id,)).fetchone())


def feedback_for(c: sqlite3.Connection, turn_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for i in range(0, len(turn_ids), 500):
        chunk = list(turn_ids[i:i + 500])
        marks = ",".join("?" * len(chunk))
        for r in c.execute(f"SELECT {FEEDBACK_COLS} FROM feedback WHERE turn_id IN ({marks})", chunk):
            out[int(r[0])] = _feedback_row(r)
    return out


def session_feedback(c: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
    return [_feedback_row(r) for r in c.execute(
        f"SELECT {FEEDBACK_COLS} FROM feedback WHERE session_id=? ORDER BY turn_index", (session_id,))]


# ------------------------------------------------------------------ ledger
LEDGER_COLS = ("consumer_id, turn_id, session_id, turn_index, step, weight_version, adapter, save_dir, base_model, "
               "trained_at, invalidated_at")
SERVED_WEIGHTS = ""  # `adapter` of a row that trained the served weights themselves (not a LoRA adapter by name)


def record_trained(c: sqlite3.Connection, consumer_id: str, turn_ids: Sequence[int], step: int, weight_version: int,
                   save_dir: str | None, base_model: str | None, now: float, adapter: str = SERVED_WEIGHTS) -> int:
    """Ledger rows for turns trained at `step` into `weight_version` of `adapter` (each adapter
    numbers its own versions). Idempotent per (consumer, turn): a replayed step after a resume
    keeps the first row. Returns how many of the turns are in the buffer (and so in the ledger);
    one gone (a retract raced the step) gets no row."""
    ids = sorted({int(t) for t in turn_ids})
    found = 0
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        marks = ",".join("?" * len(chunk))
        c.execute(
            f"INSERT OR IGNORE INTO ledger ({LEDGER_COLS}) SELECT ?, turn_id, session_id, turn_index, ?, ?, ?, ?, ?, ?,"
            f" NULL FROM turns WHERE turn_id IN ({marks})",
            (consumer_id, step, weight_version, adapter, save_dir, base_model, now, *chunk),
        )
        found += c.execute(f"SELECT count(*) FROM turns WHERE turn_id IN ({marks})", chunk).fetchone()[0]
    return found


def ledger_rows(c: sqlite3.Connection, *, session_id: str | None = None, max_version: int | None = None,
                valid_only: bool = False, consumer_id: str | None = None,
                adapter: str | None = None) -> list[dict[str, Any]]:
    """Rows filtered in SQL; `adapter` None: every weight line's, SERVED_WEIGHTS: the served weights'."""
    where: list[str] = []
    args: list[Any] = []
    if consumer_id is not None:  # the primary key (consumer_id, turn_id) serves it
        where.append("consumer_id=?")
        args.append(consumer_id)
    if adapter is not None:
        where.append("adapter=?")
        args.append(adapter)
    if session_id is not None:
        where.append("session_id=?")
        args.append(session_id)
    if max_version is not None:
        where.append("weight_version<=?")
        args.append(max_version)
    if valid_only:
        where.append("invalidated_at IS NULL")
    q = f"SELECT {LEDGER_COLS} FROM ledger" + (" WHERE " + " AND ".join(where) if where else "")
    q += " ORDER BY weight_version, step, turn_id"
    return [dict(zip(LEDGER_COLS.split(", "), r, strict=True)) for r in c.execute(q, args)]


def invalidate_versions(c: sqlite3.Connection, above_version: int, now: float, *, adapter: str = SERVED_WEIGHTS,
                        requeue_consumers: Sequence[str] = ()) -> int:
    """Mark every row trained into a version of `adapter` above `above_version` as rolled back
    (another adapter's versions are another line: untouched). For the consumers in
    `requeue_consumers`, those turns (still in the buffer) are marked unconsumed again, so the
    trainer restarted from the rollback checkpoint trains on them once more. Returns how many
    turns were requeued."""
    requeued = 0
    for consumer in requeue_consumers:
        requeued += c.execute(
            "DELETE FROM consumed WHERE consumer_id=? AND turn_id IN (SELECT turn_id FROM ledger WHERE consumer_id=?"
            " AND adapter=? AND weight_version>? AND invalidated_at IS NULL)",
            (consumer, consumer, adapter, above_version)).rowcount
    c.execute("UPDATE ledger SET invalidated_at=? WHERE adapter=? AND weight_version>? AND invalidated_at IS NULL",
              (now, adapter, above_version))
    return requeued


def highest_version(c: sqlite3.Connection) -> int:
    """The highest weight version this buffer has seen: trained into (the ledger, rolled back or
    not) or served (the version a turn was generated under)."""
    row = c.execute("SELECT max(weight_version) FROM ledger").fetchone()
    turns = c.execute("SELECT max(weight_version) FROM turns").fetchone()
    return max(int(row[0] or 0), int(turns[0] or 0))


# ------------------------------------------------------------------ trainer files
def record_trainer_file(c: sqlite3.Connection, consumer_id: str, kind: str, path: str, now: float) -> None:
    c.execute("INSERT INTO trainer_files (consumer_id, kind, path, registered_at) VALUES (?, ?, ?, ?) "
              "ON CONFLICT(consumer_id, kind, path) DO UPDATE SET registered_at=excluded.registered_at",
              (consumer_id, kind, path, now))


def trainer_files(c: sqlite3.Connection, kind: str) -> list[dict[str, Any]]:
    return [{"consumer_id": r[0], "path": r[1], "registered_at": r[2]} for r in c.execute(
        "SELECT consumer_id, path, registered_at FROM trainer_files WHERE kind=? ORDER BY path, consumer_id", (kind,))]


# ------------------------------------------------------------------ exports
def record_export(c: sqlite3.Connection, path: str, session_ids: Sequence[str], now: float) -> None:
    c.executemany("INSERT INTO exports (path, session_id, exported_at) VALUES (?, ?, ?) "
                  "ON CONFLICT(path, session_id) DO UPDATE SET exported_at=excluded.exported_at",
                  [(path, s, now) for s in session_ids])


def exports_of(c: sqlite3.Connection, session_id: str) -> list[str]:
    return [r[0] for r in c.execute("SELECT path FROM exports WHERE session_id=? ORDER BY path", (session_id,))]


# ------------------------------------------------------------------ retract journal
def journal_get(c: sqlite3.Connection, session_id: str) -> dict[str, Any] | None:
    r = c.execute("SELECT session_id, state, plan, result, started_at, finished_at FROM retractions WHERE session_id=?",
                  (session_id,)).fetchone()
    return _journal_row(r) if r else None


def _journal_row(r: Sequence[Any]) -> dict[str, Any]:
    return {"session_id": r[0], "state": r[1], "plan": json.loads(r[2]), "result": json.loads(r[3]) if r[3] else None,
            "started_at": r[4], "finished_at": r[5]}


def journal_list(c: sqlite3.Connection, *, unfinished: bool = False) -> list[dict[str, Any]]:
    q = "SELECT session_id, state, plan, result, started_at, finished_at FROM retractions"
    q += " WHERE state != 'done'" if unfinished else ""
    return [_journal_row(r) for r in c.execute(q + " ORDER BY started_at")]


def journal_begin(c: sqlite3.Connection, session_id: str, plan: dict[str, Any], now: float) -> None:
    c.execute("INSERT OR REPLACE INTO retractions (session_id, state, plan, result, started_at, finished_at) "
              "VALUES (?, 'planned', ?, NULL, ?, NULL)", (session_id, json.dumps(plan), now))


def journal_advance(c: sqlite3.Connection, session_id: str, state: str, now: float,
                    result: dict[str, Any] | None = None) -> None:
    c.execute("UPDATE retractions SET state=?, result=coalesce(?, result), finished_at=? WHERE session_id=?",
              (state, json.dumps(result) if result is not None else None, now if state == "done" else None, session_id))


def purge_session_everywhere(c: sqlite3.Connection, session_id: str) -> dict[str, int]:
    """Inside the caller's transaction: the session's turns (judgements and hints are columns of
    them), feedback, export records; ledger rows stay (ids only) for the audit trail."""
    from openclaw.buffer.maintenance import purge_session

    n_feedback = c.execute("DELETE FROM feedback WHERE session_id=?", (session_id,)).rowcount
    n_turns = purge_session(c, session_id)
    n_exports = c.execute("DELETE FROM exports WHERE session_id=?", (session_id,)).rowcount
    bump(c, C_RETRACTED, 1)
    return {"turns": n_turns, "feedback": n_feedback, "export_records": n_exports}


def forget_checkpoint_tags(c: sqlite3.Connection, consumers: Sequence[str], tags: Sequence[str]) -> int:
    """A consumer's position names the checkpoint it was committed with; once a retract deleted
    that checkpoint the name points at nothing, so it is cleared (shown as none)."""
    n = 0
    for consumer in consumers:
        for tag in tags:
            n += c.execute("UPDATE consumers SET checkpoint_tag=NULL WHERE consumer_id=? AND checkpoint_tag=?",
                           (consumer, tag)).rowcount
    return n
