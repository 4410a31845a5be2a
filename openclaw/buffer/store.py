"""`TrajectoryBuffer`: one handle on one buffer directory (see the package docstring for the
contract). This class is the API; the SQL lives in one module per job: `schema` (file,
schema, connection), `chunks` + `writes` (records and group commits), `leases` (judge
workers), `cursors` (trainers), `reads`, `maintenance` (size bound, retention, verify) and
`files` (modes, WAL health)."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from openclaw.buffer import cursors, leases, maintenance, provenance, reads, writes
from openclaw.buffer.chunks import Prepared, PrepCache, prepare
from openclaw.buffer.errors import BufferFull, BufferNotFoundError  # noqa: F401 - re-exported
from openclaw.buffer.files import mode_problems, wal_problems
from openclaw.buffer.records import AWAITING, READY, STATES, RecordError, TurnRecord
from openclaw.buffer.schema import C_DROPPED_FULL, DB_NAME, bump, connect, immediate
from openclaw.buffer.writes import AppendOp, AttachOp, Batch, BatchResult, CountOp, FinalizeOp, Op  # noqa: F401

log = logging.getLogger("openclaw.buffer")


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
        self._prep_cache = PrepCache()

    # ------------------------------------------------------------------ open / close
    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        create: bool = True,
        max_mb: float | None = None,
        durability: str = "full",
        busy_timeout_ms: int = 30_000,
        max_judge_attempts: int = 3,
    ) -> TrajectoryBuffer:
        """Open the buffer in `directory` (created 0700, the database 0600, unless it exists).
        `create=False` opens an EXISTING buffer only: BufferNotFoundError, naming the path and
        the server flag that creates one, instead of an empty buffer a consumer waits on."""
        if durability not in ("full", "normal"):
            raise ValueError("durability must be 'full' or 'normal'")
        d = Path(directory)
        db = d / DB_NAME
        if not create and not db.is_file():
            raise BufferNotFoundError(d)
        if create:
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(d, 0o700)  # mkdir's mode is masked by umask and ignored for an existing dir
        try:
            conn = connect(db, busy_timeout_ms=busy_timeout_ms, durability=durability, create=create)
        except sqlite3.OperationalError as e:
            if not create and not db.is_file():  # removed between the check and the open
                raise BufferNotFoundError(d) from e
            raise
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
        with self._lock, immediate(self._conn):
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
        result per op: AppendOp -> turn id; AttachOp -> turn id or None; FinalizeOp -> turns
        finalized; CountOp -> None. An op whose data cannot be stored gets its RecordError (an
        append refused by the size bound its BufferFull) as its result and the rest still
        commits: one bad record never fails the group. Any other error (disk full, I/O) rolls
        the whole transaction back and is raised. This is the intercept's group-commit path."""
        results: list[Any] = [None] * len(ops)
        prepared: dict[int, Prepared] = {}
        for i, op in enumerate(ops):  # checked and packed outside the write lock
            try:
                if isinstance(op, AppendOp):
                    prepared[i] = prepare(op.record, self._prep_cache)
                else:
                    writes.check_op(op)
            except RecordError as e:
                results[i] = e
        has_append = any(isinstance(op, AppendOp) for op in ops)
        with self._tx() as c:
            room = maintenance.make_room(c, self.max_bytes) if has_append and self.max_bytes else True
            writes.apply_ops(c, ops, results, prepared, room, self.max_bytes, _now())
        refused = sum(isinstance(r, BufferFull) for r in results)
        if refused:
            log.warning("trajectory buffer full: refused %d record(s) (counter %s)", refused, C_DROPPED_FULL)
        bad = sum(isinstance(r, RecordError) for r in results)
        if bad:
            log.warning("trajectory buffer: refused %d bad record(s) of a group of %d op(s)", bad, len(ops))
        return results

    def attach_next_state(self, session_id: str, next_state: dict[str, Any], turn_id: int | None = None) -> int | None:
        """Attach the next state to `turn_id`, or to the session's latest turn awaiting one;
        that turn becomes ready for the judge. Returns the turn id, or None if none awaited."""
        with self._tx() as c:
            if turn_id is None:
                turn_id = writes.latest_awaiting(c, session_id)
                if turn_id is None:
                    return None
            return turn_id if writes.attach(c, turn_id, next_state) else None

    def finalize_session(self, session_id: str, reason: str = "done") -> int:
        """End a session: turns still awaiting a next state become ready without one. Returns
        how many turns were finalized."""
        with self._tx() as c:
            return writes.finalize(c, session_id, reason, _now())

    def finalize_idle_sessions(self, idle_seconds: float) -> list[str]:
        """Finalize every open session not seen for `idle_seconds` (works across restarts)."""
        with self._tx() as c:
            return writes.finalize_idle(c, idle_seconds, _now())

    def session_next_index(self, session_id: str) -> int:
        row = self._q1("SELECT next_turn_index FROM sessions WHERE session_id=?", (session_id,))
        return int(row[0]) if row else 0

    def bump_counter(self, name: str, n: int = 1) -> None:
        with self._tx() as c:
            bump(c, name, n)

    # ------------------------------------------------------------------ judge
    def claim_for_judging(
        self, worker_id: str, limit: int = 1, lease_seconds: float = 300.0, require_next_state: bool = False
    ) -> list[TurnRecord]:
        """Lease up to `limit` ready turns to `worker_id`. A lease that expires (dead worker)
        makes the turn claimable again. Two workers never hold the same turn at once."""
        if limit <= 0:
            return []
        with self._tx() as c:
            ids = leases.claim(c, worker_id, limit, lease_seconds, require_next_state, _now())
            return reads.load(c, ids)

    def write_judgement(self, turn_id: int, result: dict[str, Any], worker_id: str | None = None) -> bool:
        """Store the judge's result; the turn becomes `judged`. With `worker_id`, only if that
        worker still holds the lease. Returns False if the turn was not ready (or lease lost)."""
        with self._tx() as c:
            return leases.write_judgement(c, turn_id, result, worker_id, _now())

    def record_judge_failure(self, turn_id: int, error: str) -> str | None:
        """Count a failed attempt and release the lease; after max attempts the turn becomes
        `judge_failed` (counted, never trained). Returns the new state (None: unknown turn)."""
        with self._tx() as c:
            return leases.record_failure(c, turn_id, error, self.max_judge_attempts)

    def release_claims(self, worker_id: str) -> int:
        with self._tx() as c:
            return leases.release(c, worker_id)

    def lease_owners(self) -> list[str]:
        """Worker ids holding leases on ready turns (a crashed worker's stay until they expire)."""
        with self._tx() as c:
            return leases.owners(c)

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
        user_id: str | None = None,
    ) -> list[TurnRecord]:
        """Judged turns not yet consumed by `consumer_id` (of one user with `user_id`), oldest
        first. The user filter is part of the query, before its LIMIT: however many turns other
        users have ahead, the page holds this user's. Does NOT mark them: call `commit_consumed`
        with the trainer's checkpoint once they are trained on."""
        with self._lock:
            ids = cursors.unconsumed_judged(
                self._conn, consumer_id, limit, turn_type=turn_type, min_weight_version=min_weight_version,
                after_turn_id=after_turn_id, session_id=session_id, user_id=user_id,
            )
            return reads.load(self._conn, ids)

    def commit_consumed(self, consumer_id: str, turn_ids: Sequence[int], checkpoint_tag: str | None) -> int:
        """Mark turns consumed by `consumer_id` and record its checkpoint tag, atomically.
        Idempotent (re-committing the same ids is a no-op), so a trainer that crashed after
        saving its checkpoint but before this call replays it from the ids it saved in the
        checkpoint. Returns how many turns were newly marked."""
        with self._tx() as c:
            return cursors.commit(c, consumer_id, turn_ids, checkpoint_tag, _now())

    def consumer_position(self, consumer_id: str) -> dict[str, Any] | None:
        """{"consumer_id", "checkpoint_tag", "consumed", "updated_at", "max_turn_id"} or None."""
        with self._lock:
            return cursors.position(self._conn, consumer_id)

    # ------------------------------------------------------------------ read
    def get_turn(self, turn_id: int) -> TurnRecord | None:
        with self._lock:
            got = reads.load(self._conn, [turn_id])
        return got[0] if got else None

    def session_turns(self, session_id: str) -> list[TurnRecord]:
        with self._lock:
            ids = [r[0] for r in self._conn.execute(
                "SELECT turn_id FROM turns WHERE session_id=? ORDER BY turn_index, turn_id", (session_id,)
            ).fetchall()]
            return reads.load(self._conn, ids)

    def latest_turns(self, n: int, *, after_turn_id: int = 0, session_id: str | None = None,
                     user_id: str | None = None) -> list[TurnRecord]:
        """The latest `n` turns after `after_turn_id` (optionally of one session, of one user), oldest first."""
        with self._lock:
            return reads.load(self._conn, reads.latest_ids(self._conn, after_turn_id, n, session_id, user_id))

    def session_ids(self, limit: int | None = None, *, user_id: str | None = None) -> list[str]:
        """Stored session ids, oldest first (of one user with `user_id`)."""
        q = "SELECT session_id FROM sessions" + (" WHERE user_id=?" if user_id is not None else "")
        q += " ORDER BY created_at, session_id"
        if limit is not None:
            q += f" LIMIT {int(limit)}"
        with self._lock:
            return [r[0] for r in self._conn.execute(q, () if user_id is None else (user_id,)).fetchall()]

    def session_rows(self, *, user_id: str | None = None) -> list[dict[str, Any]]:
        """One row per stored session (of one user with `user_id`), oldest first: ids, owner,
        times, close reason and turn count; no text."""
        q = ("SELECT s.session_id, s.user_id, s.created_at, s.last_seen, s.closed_at, s.close_reason,"
             " (SELECT count(*) FROM turns t WHERE t.session_id=s.session_id) FROM sessions s")
        q += " WHERE s.user_id=?" if user_id is not None else ""
        with self._lock:
            rows = self._conn.execute(q + " ORDER BY s.created_at, s.session_id",
                                      () if user_id is None else (user_id,)).fetchall()
        keys = ("session_id", "user_id", "created_at", "last_seen", "closed_at", "close_reason", "turns")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def unjudged_count(self, user_id: str | None = None) -> int:
        """Turns (of `user_id`; None: every user's) the judge has not scored yet: waiting for their
        next state, or ready."""
        if user_id is None:
            row = self._q1("SELECT count(*) FROM turns WHERE state IN (?, ?)", (AWAITING, READY))
        else:
            row = self._q1("SELECT count(*) FROM turns WHERE user_id=? AND state IN (?, ?)", (user_id, AWAITING, READY))
        return int(row[0]) if row else 0

    def turn_users(self, turn_ids: Sequence[int]) -> dict[int, str]:
        """{turn id: its user} for the turns still stored (a purged id is absent)."""
        ids = sorted({int(t) for t in turn_ids})
        out: dict[int, str] = {}
        with self._lock:
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                out.update((int(r[0]), str(r[1])) for r in self._conn.execute(
                    f"SELECT turn_id, user_id FROM turns WHERE turn_id IN ({','.join('?' * len(chunk))})", chunk))
        return out

    def session_user(self, session_id: str) -> str | None:
        """The owner of a stored session (None: no such session row)."""
        row = self._q1("SELECT user_id FROM sessions WHERE session_id=?", (session_id,))
        return None if row is None else str(row[0])

    def iter_turns(self, *, after_turn_id: int = 0, batch: int = 256) -> Iterator[TurnRecord]:
        last = after_turn_id
        while True:
            with self._lock:
                ids = [r[0] for r in self._conn.execute(
                    "SELECT turn_id FROM turns WHERE turn_id>? ORDER BY turn_id LIMIT ?", (last, batch)
                ).fetchall()]
                recs = reads.load(self._conn, ids)
            if not recs:
                return
            yield from recs
            last = ids[-1]

    def open_sessions(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT session_id, created_at, last_seen, next_turn_index, user_id FROM sessions WHERE closed_at IS NULL"
            ).fetchall()
        return [{"session_id": r[0], "created_at": r[1], "last_seen": r[2], "next_turn_index": r[3], "user_id": r[4]}
                for r in rows]

    def _q1(self, q: str, args: Sequence[Any] = ()) -> Any:
        with self._lock:
            return self._conn.execute(q, args).fetchone()

    # ------------------------------------------------------------------ size bound, retention
    def used_bytes(self) -> int:
        with self._lock:
            return maintenance.used_bytes(self._conn)

    def purge_older_than(self, seconds: float) -> int:
        """Retention: delete every turn (any state) created more than `seconds` ago, and
        sessions left empty. Counted in `purged_ttl`."""
        with self._tx() as c:
            n = maintenance.purge_older_than(c, _now() - seconds)
        if n:
            log.info("trajectory buffer: retention purged %d turn(s) older than %.0f s", n, seconds)
            self.checkpoint()
        return n

    def purge_session(self, session_id: str) -> int:
        """Remove a session completely: its turns, consumption marks and session row. Deleted
        pages are zeroed (secure_delete) and the WAL is truncated, so no copy stays on disk."""
        with self._tx() as c:
            n = maintenance.purge_session(c, session_id)
        self.checkpoint()
        return n

    def checkpoint(self) -> tuple[int, int, int]:
        """WAL checkpoint (TRUNCATE): copies the WAL into the db and truncates it. Returns
        SQLite's (busy, wal_frames, checkpointed_frames); busy=1 when a reader blocked it."""
        with self._lock:
            return tuple(self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())  # type: ignore[return-value]

    # ------------------------------------------------------------------ user control
    # Rows only; the rules are openclaw.control's (feedback, ledger, retract).
    def find_turn(self, *, request_id: str | None = None, session_id: str | None = None,
                  turn_index: int | None = None) -> tuple[int, str, int] | None:
        """(turn_id, session_id, turn_index) by chat completion id, or by session id + turn index."""
        with self._lock:
            if request_id is not None:
                return provenance.turn_by_request(self._conn, request_id)
            if session_id is None or turn_index is None:
                raise ValueError("find_turn needs request_id, or session_id and turn_index")
            return provenance.turn_by_index(self._conn, session_id, int(turn_index))

    def put_feedback(self, turn: tuple[int, str, int], rating: str, score: float, comment: str | None) -> dict[str, Any]:
        """Store (or replace: counted in `changes`) a turn's rating; durable when this returns."""
        with self._tx() as c:
            return provenance.put_feedback(c, turn, rating, score, comment, _now())

    def feedback_for(self, turn_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        with self._lock:
            return provenance.feedback_for(self._conn, list(turn_ids))

    def session_feedback(self, session_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return provenance.session_feedback(self._conn, session_id)

    def record_trained(self, consumer_id: str, turn_ids: Sequence[int], step: int, weight_version: int, *,
                       save_dir: str | None, base_model: str | None, adapter: str = provenance.SERVED_WEIGHTS) -> int:
        """Provenance ledger: these turns were trained at `step` into `weight_version` of `adapter`
        (SERVED_WEIGHTS: the served weights). Returns how many of them the buffer still holds
        (each got a row)."""
        with self._tx() as c:
            return provenance.record_trained(c, consumer_id, turn_ids, step, weight_version, save_dir, base_model,
                                             _now(), adapter)

    def ledger(self, *, session_id: str | None = None, max_version: int | None = None,
               valid_only: bool = False, consumer_id: str | None = None,
               adapter: str | None = None) -> list[dict[str, Any]]:
        """Ledger rows, filtered in SQL: of one session, up to a version, not rolled back, of one
        consumer (one trainer), of one weight line (`adapter`: a LoRA adapter's name, or
        SERVED_WEIGHTS; None: all; a version number means something only within its line)."""
        with self._lock:
            return provenance.ledger_rows(self._conn, session_id=session_id, max_version=max_version,
                                          valid_only=valid_only, consumer_id=consumer_id, adapter=adapter)

    def record_export(self, path: str | os.PathLike[str], session_ids: Sequence[str]) -> None:
        with self._tx() as c:
            provenance.record_export(c, str(Path(path).resolve()), list(session_ids), _now())

    def exports_of(self, session_id: str) -> list[str]:
        with self._lock:
            return provenance.exports_of(self._conn, session_id)

    def has_session(self, session_id: str) -> bool:
        """Whether anything of the session is stored (its row, a turn or a rating)."""
        with self._lock:
            return provenance.has_session(self._conn, session_id)

    def highest_weight_version(self) -> int:
        """The highest weight version in the ledger (rolled back or not) or under which a turn was served."""
        with self._lock:
            return provenance.highest_version(self._conn)

    def record_trainer_file(self, consumer_id: str, kind: str, path: str | os.PathLike[str]) -> None:
        """A file (or folder, or {rollout_id} template) a trainer writes that holds conversation text."""
        with self._tx() as c:
            provenance.record_trainer_file(c, consumer_id, kind, str(path), _now())

    def trainer_files(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            return provenance.trainer_files(self._conn, kind)

    def retractions(self, *, unfinished: bool = False) -> list[dict[str, Any]]:
        with self._lock:
            return provenance.journal_list(self._conn, unfinished=unfinished)

    def retraction(self, session_id: str) -> dict[str, Any] | None:
        with self._lock:
            return provenance.journal_get(self._conn, session_id)

    def begin_retraction(self, session_id: str, plan: dict[str, Any]) -> None:
        with self._tx() as c:
            provenance.journal_begin(c, session_id, plan, _now())

    def purge_retracted(self, session_id: str, progress: dict[str, Any] | None = None, *,
                        consumers: Sequence[str] = (), removed_checkpoints: Sequence[str] = ()) -> dict[str, int]:
        """One transaction: the session's turns, judgements, hints, feedback and export records
        go, `consumers` positions that name a removed checkpoint (folder names) name none, and
        the journal moves to `deleted` holding `progress` with the counts under "removed". The
        bytes are not gone yet: old WAL frames (and pages not yet checkpointed) still hold them
        until `finish_purge`."""
        with self._tx() as c:
            counts = provenance.purge_session_everywhere(c, session_id)
            provenance.forget_checkpoint_tags(c, consumers, removed_checkpoints)
            provenance.journal_advance(c, session_id, "deleted", _now(), {**(progress or {}), "removed": counts})
        return counts

    def finish_purge(self, session_id: str) -> None:
        """Checkpoint and truncate the WAL (the zeroed pages reach the database, no old frame is
        left), then move the journal to `purged`: that state is recorded only once the WAL is clean."""
        self.truncate_wal()
        with self._tx() as c:
            provenance.journal_advance(c, session_id, "purged", _now())

    def finish_retraction(self, session_id: str, result: dict[str, Any], *,
                          invalidate_above: dict[str, int], requeue_consumers: Sequence[str] = ()) -> int:
        """Invalidate each weight line's ledger above its rollback version (`invalidate_above`:
        adapter name, or SERVED_WEIGHTS, to version; requeueing those turns for
        `requeue_consumers`) and close the journal row, in one transaction. Returns turns requeued."""
        with self._tx() as c:
            requeued = 0
            for adapter, above in sorted(invalidate_above.items()):
                requeued += provenance.invalidate_versions(c, above, _now(), adapter=adapter,
                                                           requeue_consumers=requeue_consumers)
            result = {**result, "requeued_turns": requeued}
            provenance.journal_advance(c, session_id, "done", _now(), result)
        return requeued

    def truncate_wal(self, attempts: int = 50) -> None:
        """`checkpoint()` until SQLite reports it complete (busy=0): the WAL is then empty."""
        for _ in range(attempts):
            busy, _frames, _done = self.checkpoint()
            if not busy:
                return
            time.sleep(0.1)  # a reader (judge poll, trainer fetch) holds an old snapshot; it ends quickly
        raise RuntimeError(f"{self.path}-wal: a reader kept the WAL busy through {attempts} checkpoints; "
                           "the purged pages are zeroed in the database but old WAL frames remain: retry")

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
            leased = leases.leased_count(c, _now())
            consumers = cursors.all_positions(c)
            used = maintenance.used_bytes(c)
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
        """SQLite integrity_check, the buffer's invariants, file modes, and that every live
        process with the database open writes to the -wal/-shm at the path (a writer whose WAL
        was unlinked loses its commits). Returns problems ([] = ok)."""
        with self._lock:
            problems = maintenance.invariant_problems(self._conn)
        return problems + mode_problems(self.directory, self.path) + wal_problems(self.path)

