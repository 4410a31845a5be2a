"""The database: file name, schema, counters, and the one way a connection is opened."""

from __future__ import annotations

import sqlite3
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from openclaw.buffer.files import create_private_db, make_private

DB_NAME = "buffer.sqlite3"
SCHEMA_VERSION = 6
# Older versions this code upgrades in place: their tables are a subset (the CREATE ... IF NOT
# EXISTS statements below add what is missing) and, before 5, `turns` and `sessions` lack
# `user_id` (added by `_add_user_columns`: every old row belongs to "default"); before 6, `ledger`
# lacks `adapter` (every old row trained the served weights: '').
UPGRADABLE_FROM = (2, 3, 4, 5)
CHUNK_IDS = 1024  # prompt token ids per chunk

SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    turn_id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    user_id TEXT NOT NULL DEFAULT 'default',  -- version 5: the session's owner (openclaw.buffer.users)
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
    user_id TEXT NOT NULL DEFAULT 'default',  -- version 5
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
-- Version 3: explicit feedback, the provenance ledger, exports we wrote, the retract
-- journal. See openclaw/control/README.md.
-- One row per rated turn: the last rating wins, `changes` counts how often it was replaced.
CREATE TABLE IF NOT EXISTS feedback (
    turn_id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    turn_index INTEGER NOT NULL,
    rating TEXT NOT NULL,            -- 'up' | 'down' | '1'..'5'
    score REAL NOT NULL,             -- the rating as a reward in [-1, 1]
    comment TEXT,
    changes INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS feedback_session ON feedback(session_id);
-- Provenance: which turn went into which training step and weight version (ids only, no text).
-- `invalidated_at`: the version it went into was rolled back (a retract), so no served weights
-- descend from this row any more.
CREATE TABLE IF NOT EXISTS ledger (
    consumer_id TEXT NOT NULL,
    turn_id INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    turn_index INTEGER NOT NULL,
    step INTEGER NOT NULL,
    weight_version INTEGER NOT NULL,
    adapter TEXT NOT NULL DEFAULT '', -- version 6: the LoRA adapter trained (--lora-adapter-name), '' = the served weights
    save_dir TEXT,                   -- the trainer's checkpoint dir (--save), or NULL
    base_model TEXT,                 -- what the trainer started from (--hf-checkpoint)
    trained_at REAL NOT NULL,
    invalidated_at REAL,
    PRIMARY KEY (consumer_id, turn_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ledger_session ON ledger(session_id);
CREATE INDEX IF NOT EXISTS ledger_version ON ledger(weight_version);
-- Files `export -o FILE` wrote, per session, so a retract can rewrite them without it.
CREATE TABLE IF NOT EXISTS exports (
    path TEXT NOT NULL,
    session_id TEXT NOT NULL,
    exported_at REAL NOT NULL,
    PRIMARY KEY (path, session_id)
) WITHOUT ROWID;
-- The retract journal: written first, advanced after each idempotent step, completed on the
-- next start if a crash interrupted it.
CREATE TABLE IF NOT EXISTS retractions (
    session_id TEXT PRIMARY KEY,
    state TEXT NOT NULL,             -- planned -> deleted -> purged (the WAL is clean) -> done
    plan TEXT NOT NULL,              -- JSON (openclaw.control.retract.RetractPlan)
    result TEXT,                     -- JSON: what was removed (from `deleted` on), the whole result when done
    started_at REAL NOT NULL,
    finished_at REAL
);
-- Version 4: files a trainer writes that hold conversation text (its rollout debug dumps,
-- --save-debug-rollout-data), registered when its data source opens, so a retract finds them.
CREATE TABLE IF NOT EXISTS trainer_files (
    consumer_id TEXT NOT NULL,
    kind TEXT NOT NULL,              -- 'debug_rollout_data'
    path TEXT NOT NULL,              -- a folder (rollout_<id>.jsonl inside) or a {rollout_id} template
    registered_at REAL NOT NULL,
    PRIMARY KEY (consumer_id, kind, path)
) WITHOUT ROWID;
"""

# Version 5: per-user reads ("judged turns of user U", "sessions of user U") use these. Created
# after the columns exist (an upgraded buffer gets them from `_add_user_columns`).
USER_INDEXES = """
CREATE INDEX IF NOT EXISTS turns_user ON turns(user_id, state, turn_id);
CREATE INDEX IF NOT EXISTS sessions_user ON sessions(user_id, created_at)
"""

# Counter names (persisted, so `stats` shows them across restarts and processes).
C_DROPPED_FULL = "dropped_buffer_full"  # records refused because the size bound was reached
C_EVICTED = "evicted_consumed"  # fully consumed records deleted to make room
C_PURGED_TTL = "purged_ttl"  # records deleted by the retention TTL
C_PURGED_SESSION = "purged_session"  # records deleted by `purge --session`
C_OPTED_OUT = "opted_out_turns"  # turns served but never stored (opt-out)
C_REDACTED = "redacted_turns"  # turns in which at least one secret was redacted
C_JUDGE_FAILED = "judge_failed"
C_BAD_RECORD = "bad_records"  # records SQLite could not store (each failed only its own request)
C_FEEDBACK_CHANGED = "feedback_changed"  # ratings that replaced an earlier rating of the same turn
C_RETRACTED = "retracted_sessions"  # sessions removed by `retract`


def connect(db: Path, *, busy_timeout_ms: int, durability: str, create: bool) -> sqlite3.Connection:
    """Open (and with `create`, create) the database in WAL mode with the schema in place.

    Never opens a raw descriptor on `db`: POSIX advisory locks belong to the process, so
    closing ANY descriptor of the file drops the locks of every SQLite connection this process
    holds on it, and another process closing the database then deletes the -wal this one is
    still writing to. The file is created by SQLite itself, private from its
    first byte (see `files.create_private_db`)."""
    timeout = busy_timeout_ms / 1000
    if create:
        conn = create_private_db(db, timeout)
    else:  # mode=rw: never create a file where the caller expected an existing buffer
        uri = f"file:{urllib.parse.quote(str(db))}?mode=rw"
        conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise RuntimeError(f"could not put {db} in WAL mode (got {mode})")
        conn.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
        # Deleted rows are overwritten with zeros, so purge/eviction really removes the bytes.
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA journal_size_limit=67108864")  # keep the WAL from growing unbounded
        with immediate(conn):
            for stmt in SCHEMA.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            v = conn.execute("PRAGMA user_version").fetchone()[0]
            if v == 0:
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            elif v in UPGRADABLE_FROM:  # the new tables were created above; existing rows are kept
                _add_user_columns(conn)
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            elif v != SCHEMA_VERSION:
                raise RuntimeError(f"{db}: schema version {v}, this code reads {SCHEMA_VERSION}")
            for stmt in USER_INDEXES.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
        make_private(db)
    except BaseException:
        conn.close()
        raise
    return conn


def _add_user_columns(conn: sqlite3.Connection) -> None:
    """Upgrade to version 6: `user_id` on turns and sessions, "default" for every existing row, and
    `adapter` on the ledger, '' (the served weights) for every existing row (constant defaults:
    SQLite adds the columns without rewriting the tables)."""
    for table, column, decl in (("turns", "user_id", "TEXT NOT NULL DEFAULT 'default'"),
                                ("sessions", "user_id", "TEXT NOT NULL DEFAULT 'default'"),
                                ("ledger", "adapter", "TEXT NOT NULL DEFAULT ''")):
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if column not in columns:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[None]:
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


def bump(c: sqlite3.Connection, name: str, n: int) -> None:
    c.execute(
        "INSERT INTO counters (name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value=value+excluded.value",
        (name, n),
    )
