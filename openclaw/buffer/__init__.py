"""The trajectory buffer: a durable, multi-process store of turn records.

One directory (`--rl-buffer-dir`, mode 0700) holds one SQLite database `buffer.sqlite3` (0600,
its -wal/-shm files too) in WAL mode. The server appends, judge workers update, trainers
consume, all at once from separate processes: every state transition runs in a
`BEGIN IMMEDIATE` transaction (writers queue on a 30 s busy_timeout instead of failing), and
readers never block writers (WAL).

Durability: `synchronous=FULL` by default, so the WAL is fsynced at every commit and a record is
durable, even against power loss, when `append_turn` returns. (`durability="normal"` keeps
commits safe against process crashes such as kill -9 but may lose the last commits on power
loss; the checkpoint then does the fsync.) The intercept groups concurrent turns into one
transaction (`write_batch`) so a burst costs one fsync, not one per request.

Log-probs are 1:1 with response ids or absent (imported text-only data); never padded.
A trainable turn always has prompt and response token ids.

Record life cycle (column `state`):

    trainable main turn:  awaiting_next_state --attach_next_state--> ready --write_judgement--> judged
                          awaiting_next_state --finalize_session----> ready (next_state None)
                          ready --record_judge_failure x max_attempts--> judge_failed
    side / non-trainable: closed (kept for export, never judged or trained)
    consumed:             per consumer id, in table `consumed` (commit_consumed)

API (all methods are synchronous and thread-safe; open one handle per process):

    buf = TrajectoryBuffer.open(dir, max_mb=None, durability="full")   # creates the buffer if needed
    buf = TrajectoryBuffer.open(dir, create=False)      # existing only: BufferNotFoundError names the path
                                                        # and `--enable-rl-intercept --rl-buffer-dir DIR`
    # producer (the server's intercept)
    turn_id = buf.append_turn(TurnRecord(...))          # durable on return; RecordError, BufferFull
    buf.attach_next_state(session_id, {"role": "user", "content": "..."})  # -> turn_id | None
    buf.finalize_session(session_id)                    # last turn becomes ready without next state
    buf.write_ops([AttachOp(prev, ns), AppendOp(rec), FinalizeOp(sid)])  # one transaction, in order
    # judge workers
    recs = buf.claim_for_judging(worker_id, limit=8, lease_seconds=300)   # leases expire
    buf.write_judgement(turn_id, {"score": 1.0, ...}, worker_id=worker_id)  # -> bool
    buf.record_judge_failure(turn_id, "timeout")        # -> new state
    # trainers
    recs = buf.fetch_judged(consumer_id, limit=64, turn_type="main", min_weight_version=None)
    ... train, save checkpoint (with the turn ids in it) ...
    buf.commit_consumed(consumer_id, [r.turn_id for r in recs], checkpoint_tag="checkpoint-12")
    buf.consumer_position(consumer_id)                  # {"checkpoint_tag", "consumed", "max_turn_id", ...}
    # inspection and maintenance
    buf.stats(); buf.verify(); buf.purge_session(sid); buf.purge_older_than(seconds)
    buf.latest_turns(n, after_turn_id=0, session_id=None)
    # user control (rules in openclaw.control: feedback, ledger, retract)
    buf.find_turn(request_id="chatcmpl-...")  or  buf.find_turn(session_id=sid, turn_index=0)
    buf.put_feedback(turn, "down", -1.0, "comment"); buf.feedback_for(ids); buf.session_feedback(sid)
    buf.record_trained(consumer, ids, step, version, save_dir=..., base_model=...); buf.ledger(...)
    buf.highest_weight_version(); buf.has_session(sid)
    buf.record_export(path, sids); buf.exports_of(sid)
    buf.record_trainer_file(consumer, "debug_rollout_data", path); buf.trainer_files(kind)
    buf.retractions(unfinished=False); buf.retraction(sid)    # the retract journal

Several processes (and several handles in one process) may have the buffer open at once: no
code opens a raw descriptor on the database file, since closing one would drop this process's
SQLite locks and let another process delete the WAL a live connection still writes to.
`verify` also checks that every live process writes to the -wal/-shm at the path.

One bad record fails only itself: `write_ops` returns a RecordError for that op (text SQLite
cannot store, e.g. a lone surrogate, is refused before the transaction; an op that still fails
inside it is isolated by replaying the group op by op under SAVEPOINTs); the rest commits.

Exactly-once training: `fetch_judged` never marks anything, so a trainer that crashes before
its checkpoint re-reads the same turns. The protocol: (1) save the checkpoint with the list of
consumed turn ids inside it (atomic rename), (2) `commit_consumed(consumer, ids, tag)`. On
resume, if `consumer_position(consumer)["checkpoint_tag"]` differs from the checkpoint being
loaded, replay step (2) from the ids stored in the checkpoint: `commit_consumed` is idempotent.

Size bound (`max_mb`): when live data exceeds it, turns consumed by every known consumer are
deleted oldest first; if that is not enough, new records are refused (BufferFull), counted in
the persistent counter `dropped_buffer_full` and logged. Nothing unconsumed is evicted.
Retention (`purge_older_than`) deletes everything older than the TTL, counted in `purged_ttl`
(the server runs it at start-up and on a timer). Module layout and tests: README.md here.
Deleted rows are zeroed (secure_delete) and the WAL truncated after purges.
"""

from openclaw.buffer.duration import parse_duration
from openclaw.buffer.errors import BufferFull, BufferNotFoundError
from openclaw.buffer.files import wal_problems
from openclaw.buffer.location import DEFAULT_BUFFER_DIR, buffer_dir_from_env
from openclaw.buffer.records import (
    AWAITING,
    CLOSED,
    JUDGE_FAILED,
    JUDGED,
    READY,
    STATES,
    RecordError,
    TurnRecord,
    content_text,
)
from openclaw.buffer.schema import (
    C_BAD_RECORD,
    C_DROPPED_FULL,
    C_EVICTED,
    C_JUDGE_FAILED,
    C_OPTED_OUT,
    C_PURGED_SESSION,
    C_PURGED_TTL,
    C_REDACTED,
    DB_NAME,
)
from openclaw.buffer.store import TrajectoryBuffer
from openclaw.buffer.writes import AppendOp, AttachOp, Batch, BatchResult, CountOp, FinalizeOp, Op

__all__ = [
    "DEFAULT_BUFFER_DIR",
    "buffer_dir_from_env",
    "AWAITING",
    "CLOSED",
    "C_BAD_RECORD",
    "C_DROPPED_FULL",
    "C_EVICTED",
    "C_JUDGE_FAILED",
    "C_OPTED_OUT",
    "C_PURGED_SESSION",
    "C_PURGED_TTL",
    "C_REDACTED",
    "DB_NAME",
    "JUDGED",
    "JUDGE_FAILED",
    "READY",
    "STATES",
    "AppendOp",
    "AttachOp",
    "Batch",
    "BatchResult",
    "BufferFull",
    "BufferNotFoundError",
    "CountOp",
    "FinalizeOp",
    "Op",
    "RecordError",
    "TrajectoryBuffer",
    "TurnRecord",
    "content_text",
    "parse_duration",
    "wal_problems",
]
