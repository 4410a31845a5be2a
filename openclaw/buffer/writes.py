"""Writes: the producer's operations (append a turn, attach its next state, finalize a
session, count) and how a group of them is applied in one transaction.

A group commit carries many users' turns. One record that SQLite refuses must fail only its
own request: records are checked before the transaction (`chunks.prepare`), and if one still
fails inside it, the group is replayed op by op, each in its own SAVEPOINT, so that record is
refused alone and the rest of the group lands."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from openclaw.buffer.chunks import Prepared, json_text, upsert_chunks, utf8
from openclaw.buffer.errors import BufferFull
from openclaw.buffer.records import AWAITING, CLOSED, READY, RecordError, TurnRecord
from openclaw.buffer.schema import C_BAD_RECORD, C_DROPPED_FULL, bump

log = logging.getLogger("openclaw.buffer")


@dataclass
class AppendOp:
    record: TurnRecord  # record.turn_index None: the buffer assigns the session's next index


@dataclass
class AttachOp:
    target: int | TurnRecord  # a turn id, or a record appended earlier (same or earlier batch)
    next_state: dict[str, Any]


@dataclass
class FinalizeOp:
    session_id: str
    reason: str = "done"


@dataclass
class CountOp:
    name: str
    n: int = 1


Op = AppendOp | AttachOp | FinalizeOp | CountOp


@dataclass
class Batch:
    """Writes applied in ONE transaction. Applied in order: attaches, appends, finalizes."""

    appends: list[TurnRecord] = field(default_factory=list)
    attaches: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (turn_id, next_state)
    finalizes: list[tuple[str, str]] = field(default_factory=list)  # (session_id, reason)
    counters: dict[str, int] = field(default_factory=dict)

    def ops(self) -> list[Op]:
        out: list[Op] = [AttachOp(t, ns) for t, ns in self.attaches]
        out += [AppendOp(r) for r in self.appends]
        out += [FinalizeOp(sid, reason) for sid, reason in self.finalizes]
        out += [CountOp(k, v) for k, v in self.counters.items()]
        return out


@dataclass
class BatchResult:
    turn_ids: list[int | None]  # one per append, None where refused (buffer full) or invalid
    errors: list[Exception | None]


# Errors that belong to one op's data (a value SQLite cannot bind, a constraint). Anything else
# (sqlite3.OperationalError: disk full, I/O error) fails the whole transaction and is raised.
_RECORD_ERRORS = (sqlite3.IntegrityError, sqlite3.InterfaceError, sqlite3.ProgrammingError, sqlite3.DataError,
                  UnicodeError, TypeError, ValueError, OverflowError)


def check_op(op: Op) -> None:
    """RecordError for a non-append op SQLite could not store (appends: `chunks.prepare`)."""
    if isinstance(op, AttachOp):
        json_text(op.next_state, "next_state")
    elif isinstance(op, FinalizeOp):
        utf8(str(op.session_id), "session_id")
        utf8(str(op.reason), "finalize reason")
    elif isinstance(op, CountOp):
        utf8(str(op.name), "counter name")
    elif not isinstance(op, AppendOp):
        raise TypeError(f"unknown op {op!r}")


def apply_ops(c: sqlite3.Connection, ops: Sequence[Op], results: list[Any], prepared: dict[int, Prepared],
              room: bool, max_bytes: int | None, now: float) -> None:
    """Apply `ops` inside the caller's transaction, filling `results` (ops that already hold an
    error there are skipped). Fast path: all chunks in one upsert. If one op's data fails
    inside SQLite, the group is rolled back to its savepoint and replayed op by op."""
    todo = [i for i in range(len(ops)) if results[i] is None]
    saved = {i: _record_fields(ops[i]) for i in todo if isinstance(ops[i], AppendOp)}
    c.execute("SAVEPOINT group_commit")
    try:
        if room:
            upsert_chunks(c, [prepared[i] for i in todo if i in prepared])
        for i in todo:
            results[i] = _apply_one(c, ops[i], prepared.get(i), room, max_bytes, now)
        c.execute("RELEASE group_commit")
        _count_bad(c, results)
        return
    except _RECORD_ERRORS as e:
        c.execute("ROLLBACK TO group_commit")
        c.execute("RELEASE group_commit")
        log.warning("a record failed inside a group commit of %d op(s) (%s: %s); applying them one by one",
                    len(todo), type(e).__name__, e)
    for i in todo:
        _restore_fields(ops[i], saved.get(i))
        results[i] = None
    for i in todo:
        c.execute("SAVEPOINT one_op")
        try:
            if room and i in prepared:
                upsert_chunks(c, [prepared[i]])
            results[i] = _apply_one(c, ops[i], prepared.get(i), room, max_bytes, now)
            c.execute("RELEASE one_op")
        except _RECORD_ERRORS as e:
            c.execute("ROLLBACK TO one_op")
            c.execute("RELEASE one_op")
            _restore_fields(ops[i], saved.get(i))
            results[i] = RecordError(f"record cannot be stored: {type(e).__name__}: {e}")
    _count_bad(c, results)


def _count_bad(c: sqlite3.Connection, results: list[Any]) -> None:
    bad = sum(isinstance(r, RecordError) for r in results)
    if bad:
        bump(c, C_BAD_RECORD, bad)


def _record_fields(op: Op) -> tuple[int | None, int | None, str | None]:
    r = op.record  # type: ignore[union-attr]
    return r.turn_index, r.turn_id, r.state


def _restore_fields(op: Op, saved: tuple[int | None, int | None, str | None] | None) -> None:
    """Undo what a rolled-back insert wrote into the record object (its id would otherwise
    name a row that does not exist, or later another turn's row)."""
    if saved is not None and isinstance(op, AppendOp):
        op.record.turn_index, op.record.turn_id, op.record.state = saved


def _apply_one(c: sqlite3.Connection, op: Op, prep: Prepared | None, room: bool, max_bytes: int | None,
               now: float) -> Any:
    if isinstance(op, AppendOp):
        if not room:
            bump(c, C_DROPPED_FULL, 1)
            return BufferFull(f"trajectory buffer is at its bound ({max_bytes} bytes)")
        assert prep is not None
        return insert(c, op.record, now, prep)
    if isinstance(op, AttachOp):
        tid = op.target.turn_id if isinstance(op.target, TurnRecord) else op.target
        return tid if tid is not None and attach(c, tid, op.next_state) else None
    if isinstance(op, FinalizeOp):
        return finalize(c, op.session_id, op.reason, now)
    if isinstance(op, CountOp):
        bump(c, op.name, op.n)
        return None
    raise TypeError(f"unknown op {op!r}")


def insert(c: sqlite3.Connection, r: TurnRecord, now: float, prep: Prepared) -> int:
    if r.turn_index is None:
        row = c.execute("SELECT next_turn_index FROM sessions WHERE session_id=?", (r.session_id,)).fetchone()
        r.turn_index = int(row[0]) if row else 0
    state = AWAITING if r.trainable else CLOSED
    if r.trainable and r.next_state is not None:
        state = READY
    cur = c.execute(
        "INSERT INTO turns (session_id, user_id, turn_index, turn_type, trainable, state, created_at, finished_at,"
        " stored_at, weight_version, model, request_id, payload, msg_chunks, tools_chunk, prompt_chunks,"
        " response_ids, response_logprobs, n_prompt, n_response, next_state)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            r.session_id, r.user_id, r.turn_index, r.turn_type, int(r.trainable), state, r.created_at or now,
            r.finished_at or now, now, int(r.weight_version), r.model, r.request_id, prep.payload,
            b"".join(h for h, _ in prep.messages), prep.tools[0] if prep.tools else None,
            b"".join(h for h, _ in prep.prompt), prep.response_ids, prep.logprobs,
            len(r.prompt_ids), len(r.response_ids), prep.next_state,
        ),
    )
    c.execute(
        "INSERT INTO sessions (session_id, user_id, created_at, last_seen, next_turn_index) VALUES (?,?,?,?,?)"
        " ON CONFLICT(session_id) DO UPDATE SET last_seen=excluded.last_seen,"
        " next_turn_index=max(next_turn_index, excluded.next_turn_index), closed_at=NULL, close_reason=NULL",
        (r.session_id, r.user_id, now, now, r.turn_index + 1),
    )
    owner = c.execute("SELECT user_id FROM sessions WHERE session_id=?", (r.session_id,)).fetchone()[0]
    if owner != r.user_id:
        # The intercept keeps users' session ids apart; this is the last line if a bug did not.
        raise RecordError(f"turn of user {r.user_id!r} refused: its session belongs to another user")
    r.turn_id = int(cur.lastrowid)
    r.state = state
    return r.turn_id


def attach(c: sqlite3.Connection, turn_id: int, next_state: dict[str, Any]) -> bool:
    # A closed (non-trainable) turn keeps its state but still gets the next state for export.
    cur = c.execute(
        "UPDATE turns SET next_state=?, state=CASE WHEN state=? THEN ? ELSE state END"
        " WHERE turn_id=? AND next_state IS NULL AND state IN (?, ?)",
        (json.dumps(next_state, ensure_ascii=False), AWAITING, READY, turn_id, AWAITING, CLOSED),
    )
    return cur.rowcount == 1


def finalize(c: sqlite3.Connection, session_id: str, reason: str, now: float) -> int:
    cur = c.execute("UPDATE turns SET state=? WHERE session_id=? AND state=?", (READY, session_id, AWAITING))
    c.execute(
        "UPDATE sessions SET closed_at=?, close_reason=? WHERE session_id=? AND closed_at IS NULL",
        (now, reason, session_id),
    )
    return cur.rowcount


def finalize_idle(c: sqlite3.Connection, idle_seconds: float, now: float) -> list[str]:
    rows = c.execute(
        "SELECT session_id FROM sessions WHERE closed_at IS NULL AND last_seen < ?", (now - idle_seconds,)
    ).fetchall()
    for (sid,) in rows:
        finalize(c, sid, "idle", now)
    return [r[0] for r in rows]


def latest_awaiting(c: sqlite3.Connection, session_id: str) -> int | None:
    row = c.execute(
        "SELECT turn_id FROM turns WHERE session_id=? AND state=? ORDER BY turn_index DESC, turn_id DESC LIMIT 1",
        (session_id, AWAITING),
    ).fetchone()
    return None if row is None else int(row[0])
