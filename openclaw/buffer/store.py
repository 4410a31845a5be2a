"""SQLite implementation of the trajectory buffer (see the package docstring for the contract)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openclaw.buffer.records import (
    AWAITING,
    CLOSED,
    JUDGE_FAILED,
    JUDGED,
    READY,
    STATES,
    RecordError,
    TurnRecord,
    pack_floats,
    pack_ids,
    unpack_floats,
    unpack_ids,
)

log = logging.getLogger("openclaw.buffer")

DB_NAME = "buffer.sqlite3"
SCHEMA_VERSION = 2
CHUNK_IDS = 1024  # prompt token ids per chunk

_SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    turn_id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    turn_index INTEGER NOT NULL,
    turn_type TEXT NOT NULL CHECK (turn_type IN ('main', 'side')),
    trainable INTEGER NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    finished_at REAL NOT NULL,
    stored_at REAL NOT NULL,
    weight_version INTEGER NOT NULL,
    model TEXT NOT NULL,
    request_id TEXT NOT NULL,
    payload TEXT NOT NULL,           -- JSON: response text, content, tool_calls, metadata
    msg_chunks BLOB NOT NULL,        -- chunk hashes (16 bytes each), one per message (see `chunks`)
    tools_chunk BLOB,                -- chunk hash of the tools JSON, or NULL
    prompt_chunks BLOB NOT NULL,     -- chunk hashes of the prompt ids, CHUNK_IDS ids each
    response_ids BLOB NOT NULL,      -- int32 little-endian
    response_logprobs BLOB NOT NULL, -- float64, 1:1 with response_ids (or empty)
    n_prompt INTEGER NOT NULL,
    n_response INTEGER NOT NULL,
    next_state TEXT,                 -- JSON or NULL
    judgement TEXT,                  -- JSON or NULL
    judged_at REAL,
    judge_attempts INTEGER NOT NULL DEFAULT 0,
    judge_error TEXT,
    lease_owner TEXT,
    lease_expires REAL
);
CREATE INDEX IF NOT EXISTS turns_session ON turns(session_id, turn_index);
CREATE INDEX IF NOT EXISTS turns_state ON turns(state, turn_id);
CREATE INDEX IF NOT EXISTS turns_created ON turns(created_at);
-- Content-addressed, reference-counted pieces of turns. A session re-sends its whole history
-- every turn, so storing each turn's messages and prompt ids in full is O(n^2) bytes per
-- session and made I/O the bottleneck (~100 KB per 8k-token turn). Messages (JSON text, one
-- chunk each), tool lists and fixed-size blocks of prompt token ids (aligned at 0, so a
-- shared prefix dedups block for block) are stored once and shared by every turn (and every
-- session: OpenClaw's system prompt) that contains them. Deleting a turn decrements `refs`,
-- a chunk is deleted (and zeroed, secure_delete) when nothing references it.
-- Turns reference chunks by hash, so a whole batch's chunks are upserted in one statement
-- (every statement releases and re-takes the GIL, and per-chunk round trips starved the writer).
-- Reference counts live in their own small table: SQLite rewrites a whole row (overflow pages
-- included) on any update, so a counter next to 50 KB of data made every reuse a 50 KB write.
CREATE TABLE IF NOT EXISTS chunks (
    hash BLOB PRIMARY KEY,           -- blake2b-128 of kind + data
    data BLOB NOT NULL               -- TEXT for JSON, BLOB (int32 little-endian) for token ids
);
CREATE TABLE IF NOT EXISTS chunk_refs (
    hash BLOB PRIMARY KEY,
    refs INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    last_seen REAL NOT NULL,
    closed_at REAL,
    close_reason TEXT,
    next_turn_index INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS consumers (
    consumer_id TEXT PRIMARY KEY,
    checkpoint_tag TEXT,
    consumed INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS consumed (
    consumer_id TEXT NOT NULL,
    turn_id INTEGER NOT NULL,
    checkpoint_tag TEXT,
    consumed_at REAL NOT NULL,
    PRIMARY KEY (consumer_id, turn_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS consumed_turn ON consumed(turn_id);
CREATE TABLE IF NOT EXISTS counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
"""

# Counter names (persisted, so `stats` shows them across restarts and processes).
C_DROPPED_FULL = "dropped_buffer_full"  # records refused because the size bound was reached
C_EVICTED = "evicted_consumed"  # fully consumed records deleted to make room
C_PURGED_TTL = "purged_ttl"  # records deleted by the retention TTL
C_PURGED_SESSION = "purged_session"  # records deleted by `purge --session`
C_OPTED_OUT = "opted_out_turns"  # turns served but never stored (opt-out)
C_REDACTED = "redacted_turns"  # turns in which at least one secret was redacted
C_JUDGE_FAILED = "judge_failed"


class BufferFull(RuntimeError):
    """The size bound is reached and nothing fully consumed is left to evict."""


@dataclass
class Durability:
    """`full`: WAL + synchronous=FULL, the WAL is fsynced at every commit, so a record is
    durable against power loss when `append_turn` returns. `normal`: synchronous=NORMAL, safe
    against process crashes (kill -9) but the last commits may roll back on power loss."""

    mode: str = "full"


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


def _now() -> float:
    return time.time()


class TrajectoryBuffer:
    """A handle on one buffer directory. Thread-safe (one connection behind a lock); open one
    handle per process. See the package docstring for the API contract."""

    def __init__(self, directory: Path, conn: sqlite3.Connection, max_bytes: int | None, max_judge_attempts: int):
        self.directory = directory
        self.path = directory / DB_NAME
        self._conn = conn
        self._lock = threading.RLock()
        self.max_bytes = max_bytes
        self.max_judge_attempts = max_judge_attempts
        self._prep_cache = _PrepCache()

    # ------------------------------------------------------------------ open / close
    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        max_mb: float | None = None,
        durability: str = "full",
        busy_timeout_ms: int = 30_000,
        max_judge_attempts: int = 3,
    ) -> TrajectoryBuffer:
        if durability not in ("full", "normal"):
            raise ValueError("durability must be 'full' or 'normal'")
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(d, 0o700)  # mkdir's mode is masked by umask and ignored for an existing dir
        db = d / DB_NAME
        # Create the file 0600 ourselves: SQLite creates -wal / -shm with the db file's mode.
        fd = os.open(db, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)
        os.chmod(db, 0o600)
        conn = sqlite3.connect(db, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise RuntimeError(f"could not put {db} in WAL mode (got {mode})")
        conn.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
        # Deleted rows are overwritten with zeros, so purge/eviction really removes the bytes.
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA journal_size_limit=67108864")  # keep the WAL from growing unbounded
        with _immediate(conn):
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            v = conn.execute("PRAGMA user_version").fetchone()[0]
            if v == 0:
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            elif v != SCHEMA_VERSION:
                raise RuntimeError(f"{db}: schema version {v}, this code reads {SCHEMA_VERSION}")
        for suffix in ("-wal", "-shm"):
            p = Path(str(db) + suffix)
            if p.exists():
                os.chmod(p, 0o600)
        max_bytes = int(max_mb * 1024 * 1024) if max_mb else None
        return cls(d, conn, max_bytes, max_judge_attempts)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> TrajectoryBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock, _immediate(self._conn):
            yield self._conn

    # ------------------------------------------------------------------ producer
    def append_turn(self, record: TurnRecord) -> int:
        """Store one turn; durable when this returns. Raises RecordError / BufferFull."""
        res = self.write_batch(Batch(appends=[record]))
        if res.errors[0] is not None:
            raise res.errors[0]
        assert res.turn_ids[0] is not None
        return res.turn_ids[0]

    def append_turns(self, records: Sequence[TurnRecord]) -> list[int]:
        res = self.write_batch(Batch(appends=list(records)))
        for e in res.errors:
            if e is not None:
                raise e
        return [t for t in res.turn_ids if t is not None]

    def write_batch(self, batch: Batch) -> BatchResult:
        """Apply a batch in one transaction; see `write_ops`."""
        ops = batch.ops()
        results = self.write_ops(ops)
        ids: list[int | None] = []
        errors: list[Exception | None] = []
        for op, res in zip(ops, results, strict=True):
            if isinstance(op, AppendOp):
                ids.append(res if isinstance(res, int) else None)
                errors.append(res if isinstance(res, Exception) else None)
        return BatchResult(ids, errors)

    def write_ops(self, ops: Sequence[Op]) -> list[Any]:
        """Apply `ops` in order in ONE `BEGIN IMMEDIATE` transaction (one fsync) and return one
        result per op: AppendOp -> turn id, or the RecordError/BufferFull that refused it (the
        rest still commits); AttachOp -> turn id or None; FinalizeOp -> turns finalized. This
        is the group-commit path the intercept uses for bursts of concurrent requests. Any
        other error (disk full, I/O) rolls the whole transaction back and is raised."""
        results: list[Any] = [None] * len(ops)
        packed: dict[int, _Prepared] = {}
        for i, op in enumerate(ops):
            if isinstance(op, AppendOp):
                r = op.record
                try:
                    r.validate()
                    # Packed outside the write lock; a non-int id is a bad record, not a crash.
                    packed[i] = _prepare(r, self._prep_cache)
                except RecordError as e:
                    results[i] = e
                except (TypeError, OverflowError, ValueError) as e:
                    results[i] = RecordError(f"token ids / log-probs must be ints / floats: {e}")
        refused = 0
        has_append = any(isinstance(op, AppendOp) for op in ops)
        with self._tx() as c:
            now = _now()
            room = self._make_room(c) if has_append and self.max_bytes else True
            if room:
                _upsert_chunks(c, [packed[i] for i in sorted(packed)])
            for i, op in enumerate(ops):
                if isinstance(op, AppendOp):
                    if results[i] is not None:
                        continue
                    if not room:
                        results[i] = BufferFull(f"trajectory buffer is at its bound ({self.max_bytes} bytes)")
                        refused += 1
                        continue
                    results[i] = self._insert(c, op.record, now, packed[i])
                elif isinstance(op, AttachOp):
                    tid = op.target.turn_id if isinstance(op.target, TurnRecord) else op.target
                    results[i] = tid if tid is not None and self._attach(c, tid, op.next_state) else None
                elif isinstance(op, FinalizeOp):
                    results[i] = self._finalize(c, op.session_id, op.reason, now)
                elif isinstance(op, CountOp):
                    _bump(c, op.name, op.n)
                else:
                    raise TypeError(f"unknown op {op!r}")
            if refused:
                _bump(c, C_DROPPED_FULL, refused)
        if refused:
            log.warning("trajectory buffer full: refused %d record(s) (counter %s)", refused, C_DROPPED_FULL)
        return results

    def _insert(self, c: sqlite3.Connection, r: TurnRecord, now: float, prep: _Prepared) -> int:
        if r.turn_index is None:
            row = c.execute("SELECT next_turn_index FROM sessions WHERE session_id=?", (r.session_id,)).fetchone()
            r.turn_index = int(row[0]) if row else 0
        state = AWAITING if r.trainable else CLOSED
        if r.trainable and r.next_state is not None:
            state = READY
        cur = c.execute(
            "INSERT INTO turns (session_id, turn_index, turn_type, trainable, state, created_at, finished_at,"
            " stored_at, weight_version, model, request_id, payload, msg_chunks, tools_chunk, prompt_chunks,"
            " response_ids, response_logprobs, n_prompt, n_response, next_state)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                r.session_id, r.turn_index, r.turn_type, int(r.trainable), state, r.created_at or now,
                r.finished_at or now, now, int(r.weight_version), r.model, r.request_id, prep.payload,
                b"".join(h for h, _ in prep.messages), prep.tools[0] if prep.tools else None,
                b"".join(h for h, _ in prep.prompt), prep.response_ids, prep.logprobs,
                len(r.prompt_ids), len(r.response_ids),
                json.dumps(r.next_state, ensure_ascii=False) if r.next_state is not None else None,
            ),
        )
        c.execute(
            "INSERT INTO sessions (session_id, created_at, last_seen, next_turn_index) VALUES (?,?,?,?)"
            " ON CONFLICT(session_id) DO UPDATE SET last_seen=excluded.last_seen,"
            " next_turn_index=max(next_turn_index, excluded.next_turn_index), closed_at=NULL, close_reason=NULL",
            (r.session_id, now, now, r.turn_index + 1),
        )
        r.turn_id = int(cur.lastrowid)
        r.state = state
        return r.turn_id

    def _attach(self, c: sqlite3.Connection, turn_id: int, next_state: dict[str, Any]) -> bool:
        # A closed (non-trainable) turn keeps its state but still gets the next state for export.
        cur = c.execute(
            "UPDATE turns SET next_state=?, state=CASE WHEN state=? THEN ? ELSE state END"
            " WHERE turn_id=? AND next_state IS NULL AND state IN (?, ?)",
            (json.dumps(next_state, ensure_ascii=False), AWAITING, READY, turn_id, AWAITING, CLOSED),
        )
        return cur.rowcount == 1

    def _finalize(self, c: sqlite3.Connection, session_id: str, reason: str, now: float) -> int:
        cur = c.execute("UPDATE turns SET state=? WHERE session_id=? AND state=?", (READY, session_id, AWAITING))
        c.execute(
            "UPDATE sessions SET closed_at=?, close_reason=? WHERE session_id=? AND closed_at IS NULL",
            (now, reason, session_id),
        )
        return cur.rowcount

    def attach_next_state(self, session_id: str, next_state: dict[str, Any], turn_id: int | None = None) -> int | None:
        """Attach the next state to `turn_id`, or to the session's latest turn awaiting one;
        that turn becomes ready for the judge. Returns the turn id, or None if none awaited."""
        with self._tx() as c:
            if turn_id is None:
                row = c.execute(
                    "SELECT turn_id FROM turns WHERE session_id=? AND state=? ORDER BY turn_index DESC, turn_id DESC LIMIT 1",
                    (session_id, AWAITING),
                ).fetchone()
                if row is None:
                    return None
                turn_id = row[0]
            return turn_id if self._attach(c, turn_id, next_state) else None

    def finalize_session(self, session_id: str, reason: str = "done") -> int:
        """End a session: turns still awaiting a next state become ready without one. Returns
        how many turns were finalized."""
        with self._tx() as c:
            return self._finalize(c, session_id, reason, _now())

    def finalize_idle_sessions(self, idle_seconds: float) -> list[str]:
        """Finalize every open session not seen for `idle_seconds` (works across restarts)."""
        with self._tx() as c:
            now = _now()
            rows = c.execute(
                "SELECT session_id FROM sessions WHERE closed_at IS NULL AND last_seen < ?", (now - idle_seconds,)
            ).fetchall()
            for (sid,) in rows:
                self._finalize(c, sid, "idle", now)
        return [r[0] for r in rows]

    def session_next_index(self, session_id: str) -> int:
        row = self._q1("SELECT next_turn_index FROM sessions WHERE session_id=?", (session_id,))
        return int(row[0]) if row else 0

    def bump_counter(self, name: str, n: int = 1) -> None:
        with self._tx() as c:
            _bump(c, name, n)

    # ------------------------------------------------------------------ judge
    def claim_for_judging(
        self, worker_id: str, limit: int = 1, lease_seconds: float = 300.0, require_next_state: bool = False
    ) -> list[TurnRecord]:
        """Lease up to `limit` ready turns to `worker_id`. A lease that expires (dead worker)
        makes the turn claimable again. Two workers never hold the same turn at once."""
        if limit <= 0:
            return []
        with self._tx() as c:
            now = _now()
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
            return self._load(c, ids)

    def write_judgement(self, turn_id: int, result: dict[str, Any], worker_id: str | None = None) -> bool:
        """Store the judge's result; the turn becomes `judged`. With `worker_id`, only if that
        worker still holds the lease. Returns False if the turn was not ready (or lease lost)."""
        with self._tx() as c:
            q = "UPDATE turns SET state=?, judgement=?, judged_at=?, lease_owner=NULL, lease_expires=NULL WHERE turn_id=? AND state=?"
            args: list[Any] = [JUDGED, json.dumps(result, ensure_ascii=False), _now(), turn_id, READY]
            if worker_id is not None:
                q += " AND lease_owner=?"
                args.append(worker_id)
            return c.execute(q, args).rowcount == 1

    def record_judge_failure(self, turn_id: int, error: str) -> str | None:
        """Count a failed attempt and release the lease; after max attempts the turn becomes
        `judge_failed` (counted, never trained). Returns the new state (None: unknown turn)."""
        with self._tx() as c:
            row = c.execute("SELECT judge_attempts, state FROM turns WHERE turn_id=?", (turn_id,)).fetchone()
            if row is None:
                return None
            attempts, state = row[0] + 1, row[1]
            if state == READY and attempts >= self.max_judge_attempts:
                state = JUDGE_FAILED
                _bump(c, C_JUDGE_FAILED, 1)
                log.warning("turn %d: judge failed %d times, giving up: %s", turn_id, attempts, error[:200])
            c.execute(
                "UPDATE turns SET judge_attempts=?, judge_error=?, state=?, lease_owner=NULL, lease_expires=NULL WHERE turn_id=?",
                (attempts, error[:4000], state, turn_id),
            )
            return state

    def release_claims(self, worker_id: str) -> int:
        with self._tx() as c:
            return c.execute(
                "UPDATE turns SET lease_owner=NULL, lease_expires=NULL WHERE lease_owner=? AND state=?",
                (worker_id, READY),
            ).rowcount

    # ------------------------------------------------------------------ trainer
    def fetch_judged(
        self,
        consumer_id: str,
        limit: int = 64,
        *,
        turn_type: str | None = "main",
        min_weight_version: int | None = None,
        after_turn_id: int | None = None,
        session_id: str | None = None,
    ) -> list[TurnRecord]:
        """Judged turns not yet consumed by `consumer_id`, oldest first. Does NOT mark them:
        call `commit_consumed` with the trainer's checkpoint once they are trained on."""
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
        q += " ORDER BY t.turn_id LIMIT ?"
        args.append(int(limit))
        with self._lock:
            ids = [r[0] for r in self._conn.execute(q, args).fetchall()]
            return self._load(self._conn, ids)

    def commit_consumed(self, consumer_id: str, turn_ids: Sequence[int], checkpoint_tag: str | None) -> int:
        """Mark turns consumed by `consumer_id` and record its checkpoint tag, atomically.
        Idempotent (re-committing the same ids is a no-op), so a trainer that crashed after
        saving its checkpoint but before this call replays it from the ids it saved in the
        checkpoint. Returns how many turns were newly marked."""
        with self._tx() as c:
            now = _now()
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

    def consumer_position(self, consumer_id: str) -> dict[str, Any] | None:
        """{"consumer_id", "checkpoint_tag", "consumed", "updated_at", "max_turn_id"} or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT consumer_id, checkpoint_tag, consumed, updated_at FROM consumers WHERE consumer_id=?",
                (consumer_id,),
            ).fetchone()
            if row is None:
                return None
            mx = self._conn.execute("SELECT max(turn_id) FROM consumed WHERE consumer_id=?", (consumer_id,)).fetchone()[0]
        return {"consumer_id": row[0], "checkpoint_tag": row[1], "consumed": row[2], "updated_at": row[3], "max_turn_id": mx}

    # ------------------------------------------------------------------ read
    def get_turn(self, turn_id: int) -> TurnRecord | None:
        with self._lock:
            got = self._load(self._conn, [turn_id])
        return got[0] if got else None

    def session_turns(self, session_id: str) -> list[TurnRecord]:
        with self._lock:
            ids = [r[0] for r in self._conn.execute(
                "SELECT turn_id FROM turns WHERE session_id=? ORDER BY turn_index, turn_id", (session_id,)
            ).fetchall()]
            return self._load(self._conn, ids)

    def session_ids(self, limit: int | None = None) -> list[str]:
        q = "SELECT session_id FROM sessions ORDER BY created_at, session_id"
        if limit is not None:
            q += f" LIMIT {int(limit)}"
        with self._lock:
            return [r[0] for r in self._conn.execute(q).fetchall()]

    def iter_turns(self, *, after_turn_id: int = 0, batch: int = 256) -> Iterator[TurnRecord]:
        last = after_turn_id
        while True:
            with self._lock:
                ids = [r[0] for r in self._conn.execute(
                    "SELECT turn_id FROM turns WHERE turn_id>? ORDER BY turn_id LIMIT ?", (last, batch)
                ).fetchall()]
                recs = self._load(self._conn, ids)
            if not recs:
                return
            yield from recs
            last = ids[-1]

    def open_sessions(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT session_id, created_at, last_seen, next_turn_index FROM sessions WHERE closed_at IS NULL"
            ).fetchall()
        return [{"session_id": r[0], "created_at": r[1], "last_seen": r[2], "next_turn_index": r[3]} for r in rows]

    def _load(self, c: sqlite3.Connection, ids: Sequence[int]) -> list[TurnRecord]:
        if not ids:
            return []
        out: dict[int, TurnRecord] = {}
        for i in range(0, len(ids), 500):
            chunk = list(ids[i : i + 500])
            rows = c.execute(
                "SELECT turn_id, session_id, turn_index, turn_type, trainable, state, created_at, finished_at,"
                " weight_version, model, request_id, payload, msg_chunks, tools_chunk, prompt_chunks, response_ids,"
                " response_logprobs, next_state, judgement, judge_attempts, judge_error FROM turns WHERE turn_id IN"
                f" ({','.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
            need: set[bytes] = set()
            for row in rows:
                need.update(_unpack_refs(row[12]))
                need.update(_unpack_refs(row[14]))
                if row[13] is not None:
                    need.add(row[13])
            data = _fetch_chunks(c, need)
            for row in rows:
                p = json.loads(row[11])
                prompt: list[int] = []
                for cid in _unpack_refs(row[14]):
                    prompt.extend(unpack_ids(data[cid]))
                out[row[0]] = TurnRecord(
                    session_id=row[1], turn_index=row[2], turn_type=row[3], trainable=bool(row[4]),
                    messages=[json.loads(data[cid]) for cid in _unpack_refs(row[12])],
                    tools=json.loads(data[row[13]]) if row[13] is not None else None,
                    prompt_ids=prompt, response_ids=unpack_ids(row[15]), response_logprobs=unpack_floats(row[16]),
                    response_text=p.get("response_text", ""), content=p.get("content"),
                    tool_calls=p.get("tool_calls"), model=row[9], weight_version=row[8],
                    created_at=row[6], finished_at=row[7], request_id=row[10],
                    next_state=json.loads(row[17]) if row[17] is not None else None,
                    metadata=p.get("metadata") or {}, turn_id=row[0], state=row[5],
                    judgement=json.loads(row[18]) if row[18] is not None else None,
                    judge_attempts=row[19], judge_error=row[20],
                )
        return [out[i] for i in ids if i in out]

    def _q1(self, q: str, args: Sequence[Any] = ()) -> Any:
        with self._lock:
            return self._conn.execute(q, args).fetchone()

    # ------------------------------------------------------------------ size bound, retention
    def used_bytes(self) -> int:
        with self._lock:
            return self._used_bytes(self._conn)

    @staticmethod
    def _used_bytes(c: sqlite3.Connection) -> int:
        ps = c.execute("PRAGMA page_size").fetchone()[0]
        pc = c.execute("PRAGMA page_count").fetchone()[0]
        fl = c.execute("PRAGMA freelist_count").fetchone()[0]
        return (pc - fl) * ps

    def _make_room(self, c: sqlite3.Connection) -> bool:
        """Size policy: when the live data exceeds the bound, delete fully consumed turns
        (consumed by every known consumer), oldest first. If that is not enough, refuse new
        records (the caller counts them in `dropped_buffer_full` and logs). Nothing unconsumed
        is ever evicted to make room."""
        assert self.max_bytes is not None
        if self._used_bytes(c) < self.max_bytes:
            return True
        n_consumers = c.execute("SELECT count(*) FROM consumers").fetchone()[0]
        evicted = 0
        while n_consumers and self._used_bytes(c) >= self.max_bytes:
            ids = [r[0] for r in c.execute(
                "SELECT t.turn_id FROM turns t WHERE t.state=? AND"
                " (SELECT count(*) FROM consumed x WHERE x.turn_id=t.turn_id) >= ? ORDER BY t.turn_id LIMIT 64",
                (JUDGED, n_consumers),
            ).fetchall()]
            if not ids:
                break
            _delete_turns(c, ids)
            evicted += len(ids)
        if evicted:
            _bump(c, C_EVICTED, evicted)
            log.info("trajectory buffer: evicted %d fully consumed turn(s) to stay under %d bytes", evicted, self.max_bytes)
        return self._used_bytes(c) < self.max_bytes

    def purge_older_than(self, seconds: float) -> int:
        """Retention: delete every turn (any state) created more than `seconds` ago, and
        sessions left empty. Counted in `purged_ttl`."""
        with self._tx() as c:
            cutoff = _now() - seconds
            ids = [r[0] for r in c.execute("SELECT turn_id FROM turns WHERE created_at < ?", (cutoff,)).fetchall()]
            _delete_turns(c, ids)
            c.execute(
                "DELETE FROM sessions WHERE last_seen < ? AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.session_id=sessions.session_id)",
                (cutoff,),
            )
            if ids:
                _bump(c, C_PURGED_TTL, len(ids))
        if ids:
            log.info("trajectory buffer: retention purged %d turn(s) older than %.0f s", len(ids), seconds)
            self.checkpoint()
        return len(ids)

    def purge_session(self, session_id: str) -> int:
        """Remove a session completely: its turns, consumption marks and session row. Deleted
        pages are zeroed (secure_delete) and the WAL is truncated, so no copy stays on disk."""
        with self._tx() as c:
            ids = [r[0] for r in c.execute("SELECT turn_id FROM turns WHERE session_id=?", (session_id,)).fetchall()]
            _delete_turns(c, ids)
            c.execute("DELETE FROM sessions WHERE session_id=?", (session_id,))
            if ids:
                _bump(c, C_PURGED_SESSION, len(ids))
        self.checkpoint()
        return len(ids)

    def checkpoint(self) -> tuple[int, int, int]:
        """WAL checkpoint (TRUNCATE): copies the WAL into the db and truncates it. Returns
        SQLite's (busy, wal_frames, checkpointed_frames); busy=1 when a reader blocked it."""
        with self._lock:
            return tuple(self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())  # type: ignore[return-value]

    # ------------------------------------------------------------------ inspection
    def counters(self) -> dict[str, int]:
        with self._lock:
            return {r[0]: r[1] for r in self._conn.execute("SELECT name, value FROM counters").fetchall()}

    def stats(self) -> dict[str, Any]:
        with self._lock:
            c = self._conn
            by_state = {s: 0 for s in STATES}
            by_state.update({r[0]: r[1] for r in c.execute("SELECT state, count(*) FROM turns GROUP BY state")})
            by_type = {r[0]: r[1] for r in c.execute("SELECT turn_type, count(*) FROM turns GROUP BY turn_type")}
            n_turns = c.execute("SELECT count(*) FROM turns").fetchone()[0]
            sess = c.execute("SELECT count(*), sum(closed_at IS NULL) FROM sessions").fetchone()
            leased = c.execute(
                "SELECT count(*) FROM turns WHERE state=? AND lease_expires >= ?", (READY, _now())
            ).fetchone()[0]
            consumers = [
                {"consumer_id": r[0], "checkpoint_tag": r[1], "consumed": r[2], "updated_at": r[3]}
                for r in c.execute("SELECT consumer_id, checkpoint_tag, consumed, updated_at FROM consumers ORDER BY consumer_id")
            ]
            used = self._used_bytes(c)
        wal = Path(str(self.path) + "-wal")
        return {
            "dir": str(self.directory),
            "turns": n_turns,
            "by_state": by_state,
            "by_type": by_type,
            "sessions": sess[0],
            "open_sessions": int(sess[1] or 0),
            "leased": leased,
            "consumers": consumers,
            "used_bytes": used,
            "file_bytes": self.path.stat().st_size,
            "wal_bytes": wal.stat().st_size if wal.exists() else 0,
            "max_bytes": self.max_bytes,
            "counters": self.counters(),
        }

    def verify(self) -> list[str]:
        """SQLite integrity_check plus the buffer's invariants. Returns problems ([] = ok)."""
        problems: list[str] = []
        with self._lock:
            c = self._conn
            for (msg,) in c.execute("PRAGMA integrity_check").fetchall():
                if msg != "ok":
                    problems.append(f"integrity_check: {msg}")
            for (msg,) in c.execute("PRAGMA foreign_key_check").fetchall():
                problems.append(f"foreign_key_check: {msg}")
            chunk_len = {h: (n, refs) for h, n, refs in c.execute(
                "SELECT c.hash, length(CAST(c.data AS BLOB)), coalesce(r.refs, 0) FROM chunks c"
                " LEFT JOIN chunk_refs r ON r.hash=c.hash")}
            for (h,) in c.execute("SELECT hash FROM chunk_refs WHERE hash NOT IN (SELECT hash FROM chunks)"):
                problems.append(f"chunk {h.hex()}: reference count without data")
            counted: dict[bytes, int] = {}
            rows = c.execute(
                "SELECT turn_id, session_id, turn_type, trainable, state, payload, prompt_chunks, length(response_ids),"
                " length(response_logprobs), n_prompt, n_response, next_state, judgement, response_logprobs,"
                " msg_chunks, tools_chunk FROM turns"
            )
            for r in rows:
                refs = _unpack_refs(r[6]) + _unpack_refs(r[14]) + ([r[15]] if r[15] is not None else [])
                for cid in refs:
                    counted[cid] = counted.get(cid, 0) + 1
                missing = [cid for cid in refs if cid not in chunk_len]
                if missing:
                    problems.append(f"turn {r[0]}: references {len(missing)} missing chunk(s)")
                n_prompt_bytes = sum(chunk_len.get(cid, (0, 0))[0] for cid in _unpack_refs(r[6]))
                tid = r[0]
                if r[4] not in STATES:
                    problems.append(f"turn {tid}: unknown state {r[4]!r}")
                if not isinstance(r[13], bytes) or n_prompt_bytes != 4 * r[9] or r[7] != 4 * r[10]:
                    problems.append(f"turn {tid}: token blob length does not match its count")
                if r[8] not in (0, 8 * r[10]):
                    problems.append(f"turn {tid}: log-probs not 1:1 with response ids")
                if r[3] and (r[10] == 0 or r[9] == 0):
                    problems.append(f"turn {tid}: trainable without prompt/response token ids")
                if r[3] and r[2] != "main":
                    problems.append(f"turn {tid}: trainable side turn")
                if not r[3] and r[4] != CLOSED:
                    problems.append(f"turn {tid}: non-trainable turn in state {r[4]}")
                if r[3] and r[4] == CLOSED:
                    problems.append(f"turn {tid}: trainable turn in state closed")
                if r[4] == JUDGED and r[12] is None:
                    problems.append(f"turn {tid}: judged without a judgement")
                if r[4] == AWAITING and r[11] is not None:
                    problems.append(f"turn {tid}: awaiting a next state but has one")
                try:
                    json.loads(r[5])
                    for blob in (r[11], r[12]):
                        if blob is not None:
                            json.loads(blob)
                except (ValueError, TypeError) as e:
                    problems.append(f"turn {tid}: bad JSON ({e})")
                lps = unpack_floats(r[13]) if r[8] % 8 == 0 else []
                if any(not (x <= 0.0) for x in lps):
                    problems.append(f"turn {tid}: log-prob > 0 or NaN")
            for cid, (_, refs) in chunk_len.items():
                if counted.get(cid, 0) != refs:
                    problems.append(f"chunk {cid.hex()}: refs={refs} but referenced {counted.get(cid, 0)} time(s)")
            for (tid,) in c.execute("SELECT turn_id FROM consumed WHERE turn_id NOT IN (SELECT turn_id FROM turns)"):
                problems.append(f"consumed mark for missing turn {tid}")
            for (sid,) in c.execute(
                "SELECT DISTINCT session_id FROM turns WHERE session_id NOT IN (SELECT session_id FROM sessions)"
            ):
                problems.append(f"turns of unknown session {sid!r}")
            dup = c.execute(
                "SELECT session_id, turn_index, count(*) FROM turns GROUP BY session_id, turn_index HAVING count(*) > 1 LIMIT 10"
            ).fetchall()
            for sid, idx, n in dup:
                problems.append(f"session {sid!r}: turn_index {idx} stored {n} times")
        for p in [self.directory, self.path, Path(str(self.path) + "-wal"), Path(str(self.path) + "-shm")]:
            if p.exists():
                want = 0o700 if p.is_dir() else 0o600
                mode = p.stat().st_mode & 0o777
                if mode & ~want:
                    problems.append(f"{p}: mode {oct(mode)} is wider than {oct(want)}")
        return problems


@contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE takes the write lock up front, so concurrent writers queue on
    busy_timeout instead of failing with SQLITE_BUSY when a read transaction upgrades."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


def _bump(c: sqlite3.Connection, name: str, n: int) -> None:
    c.execute(
        "INSERT INTO counters (name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value=value+excluded.value",
        (name, n),
    )


def _delete_turns(c: sqlite3.Connection, ids: Sequence[int]) -> None:
    for i in range(0, len(ids), 500):
        chunk = list(ids[i : i + 500])
        marks = ",".join("?" * len(chunk))
        dec: dict[bytes, int] = {}
        for msg, tools, prompt in c.execute(
            f"SELECT msg_chunks, tools_chunk, prompt_chunks FROM turns WHERE turn_id IN ({marks})", chunk
        ):
            for cid in _unpack_refs(msg) + _unpack_refs(prompt) + ([tools] if tools is not None else []):
                dec[cid] = dec.get(cid, 0) + 1
        c.execute(f"DELETE FROM consumed WHERE turn_id IN ({marks})", chunk)
        c.execute(f"DELETE FROM turns WHERE turn_id IN ({marks})", chunk)
        c.executemany("UPDATE chunk_refs SET refs=refs-? WHERE hash=?", [(n, h) for h, n in dec.items()])
        c.execute("DELETE FROM chunks WHERE hash IN (SELECT hash FROM chunk_refs WHERE refs<=0)")
        c.execute("DELETE FROM chunk_refs WHERE refs<=0")


@dataclass
class _Prepared:
    """A record's bytes, computed before the write lock is taken."""

    payload: str
    messages: list[tuple[bytes, str]]  # (hash, JSON) per message
    tools: tuple[bytes, str] | None
    prompt: list[tuple[bytes, bytes]]  # (hash, int32 block) per CHUNK_IDS prompt ids
    response_ids: bytes
    logprobs: bytes


def _hash(kind: bytes, data: bytes) -> bytes:
    return hashlib.blake2b(kind + data, digest_size=16).digest()


class _PrepCache:
    """Per-handle memo of chunk encodings: a session's next turn repeats its history, so most
    messages and prompt-id blocks were encoded and hashed one turn earlier. Keys are the
    message's (role, content) for plain messages and the block's ids; values (hash, data)."""

    def __init__(self, size: int = 4096):
        self.size = size
        self.lock = threading.Lock()  # write_ops may run on several threads of one handle
        self.msgs: OrderedDict[tuple[str, str], tuple[bytes, str]] = OrderedDict()
        self.blocks: OrderedDict[tuple[int, ...], tuple[bytes, bytes]] = OrderedDict()

    @staticmethod
    def _get(d: OrderedDict, key: Any) -> Any:
        hit = d.get(key)
        if hit is not None:
            d.move_to_end(key)
        return hit

    def _put(self, d: OrderedDict, key: Any, value: Any) -> None:
        d[key] = value
        if len(d) > self.size:
            d.popitem(last=False)

    def message(self, m: dict[str, Any]) -> tuple[bytes, str]:
        plain = len(m) == 2 and isinstance(m.get("content"), str) and isinstance(m.get("role"), str)
        key = (m["role"], m["content"]) if plain else None
        if key is not None and (hit := self._get(self.msgs, key)) is not None:
            return hit
        js = json.dumps(m, ensure_ascii=False, sort_keys=True)
        out = (_hash(b"m", js.encode("utf-8", "surrogatepass")), js)
        if key is not None:
            self._put(self.msgs, key, out)
        return out

    def block(self, ids: list[int]) -> tuple[bytes, bytes]:
        key = tuple(ids)
        if (hit := self._get(self.blocks, key)) is not None:
            return hit
        data = pack_ids(ids)
        out = (_hash(b"p", data), data)
        if len(ids) == CHUNK_IDS:  # only full blocks repeat
            self._put(self.blocks, key, out)
        return out


def _prepare(r: TurnRecord, cache: _PrepCache) -> _Prepared:
    with cache.lock:
        return _prepare_locked(r, cache)


def _prepare_locked(r: TurnRecord, cache: _PrepCache) -> _Prepared:
    msgs = [cache.message(m) for m in r.messages]
    tools = None
    if r.tools is not None:
        js = json.dumps(r.tools, ensure_ascii=False, sort_keys=True)
        tools = (_hash(b"t", js.encode("utf-8", "surrogatepass")), js)
    ids = r.prompt_ids
    prompt = [cache.block(ids[i : i + CHUNK_IDS]) for i in range(0, len(ids), CHUNK_IDS)]
    payload = json.dumps(
        {"response_text": r.response_text, "content": r.content, "tool_calls": r.tool_calls, "metadata": r.metadata},
        ensure_ascii=False,
    )
    return _Prepared(payload, msgs, tools, prompt, pack_ids(r.response_ids), pack_floats(r.response_logprobs))


def _upsert_chunks(c: sqlite3.Connection, preps: list[_Prepared]) -> None:
    """Insert or add references to every chunk of `preps`, in as few statements as possible."""
    counts: dict[bytes, list[Any]] = {}
    for p in preps:
        for h, d in [*p.messages, *([p.tools] if p.tools else []), *p.prompt]:
            e = counts.get(h)
            if e is None:
                counts[h] = [d, 1]
            else:
                e[1] += 1
    rows = list(counts.items())
    for i in range(0, len(rows), 5000):  # 2 parameters per row, under SQLite's 32766 limit
        part = rows[i : i + 5000]
        marks = ",".join(["(?,?)"] * len(part))
        c.execute(f"INSERT OR IGNORE INTO chunks (hash, data) VALUES {marks}", [x for h, (d, _) in part for x in (h, d)])
        c.execute(
            f"INSERT INTO chunk_refs (hash, refs) VALUES {marks} ON CONFLICT(hash) DO UPDATE SET refs=refs+excluded.refs",
            [x for h, (_, n) in part for x in (h, n)],
        )


def _fetch_chunks(c: sqlite3.Connection, hashes: set[bytes]) -> dict[bytes, Any]:
    out: dict[bytes, Any] = {}
    lst = list(hashes)
    for i in range(0, len(lst), 500):
        part = lst[i : i + 500]
        out.update(c.execute(f"SELECT hash, data FROM chunks WHERE hash IN ({','.join('?' * len(part))})", part))
    return out


def _unpack_refs(blob: bytes | None) -> list[bytes]:
    if not blob:
        return []
    return [blob[i : i + 16] for i in range(0, len(blob), 16)]
