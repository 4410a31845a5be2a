"""Maintenance: the size bound (evict fully consumed turns), retention, purges, and `verify`
(SQLite's integrity check plus the buffer's own invariants)."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence

from openclaw.buffer.chunks import release_chunks, unpack_refs
from openclaw.buffer.records import AWAITING, CLOSED, JUDGED, STATES, unpack_floats
from openclaw.buffer.schema import C_EVICTED, C_PURGED_SESSION, C_PURGED_TTL, bump

log = logging.getLogger("openclaw.buffer")


def used_bytes(c: sqlite3.Connection) -> int:
    ps = c.execute("PRAGMA page_size").fetchone()[0]
    pc = c.execute("PRAGMA page_count").fetchone()[0]
    fl = c.execute("PRAGMA freelist_count").fetchone()[0]
    return (pc - fl) * ps


def delete_turns(c: sqlite3.Connection, ids: Sequence[int]) -> None:
    for i in range(0, len(ids), 500):
        chunk = list(ids[i : i + 500])
        marks = ",".join("?" * len(chunk))
        rows = c.execute(
            f"SELECT msg_chunks, tools_chunk, prompt_chunks FROM turns WHERE turn_id IN ({marks})", chunk
        ).fetchall()
        c.execute(f"DELETE FROM consumed WHERE turn_id IN ({marks})", chunk)
        c.execute(f"DELETE FROM feedback WHERE turn_id IN ({marks})", chunk)  # a comment is the user's text
        c.execute(f"DELETE FROM turns WHERE turn_id IN ({marks})", chunk)
        release_chunks(c, rows)


def make_room(c: sqlite3.Connection, max_bytes: int) -> bool:
    """Size policy: when the live data exceeds the bound, delete fully consumed turns
    (consumed by every known consumer), oldest first. If that is not enough, refuse new
    records (the caller counts them in `dropped_buffer_full` and logs). Nothing unconsumed
    is ever evicted to make room."""
    if used_bytes(c) < max_bytes:
        return True
    n_consumers = c.execute("SELECT count(*) FROM consumers").fetchone()[0]
    evicted = 0
    while n_consumers and used_bytes(c) >= max_bytes:
        ids = [r[0] for r in c.execute(
            "SELECT t.turn_id FROM turns t WHERE t.state=? AND"
            " (SELECT count(*) FROM consumed x WHERE x.turn_id=t.turn_id) >= ? ORDER BY t.turn_id LIMIT 64",
            (JUDGED, n_consumers),
        ).fetchall()]
        if not ids:
            break
        delete_turns(c, ids)
        evicted += len(ids)
    if evicted:
        bump(c, C_EVICTED, evicted)
        log.info("trajectory buffer: evicted %d fully consumed turn(s) to stay under %d bytes", evicted, max_bytes)
    return used_bytes(c) < max_bytes


def purge_older_than(c: sqlite3.Connection, cutoff: float) -> int:
    ids = [r[0] for r in c.execute("SELECT turn_id FROM turns WHERE created_at < ?", (cutoff,)).fetchall()]
    delete_turns(c, ids)
    c.execute(
        "DELETE FROM sessions WHERE last_seen < ? AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.session_id=sessions.session_id)",
        (cutoff,),
    )
    if ids:
        bump(c, C_PURGED_TTL, len(ids))
    return len(ids)


def purge_session(c: sqlite3.Connection, session_id: str) -> int:
    ids = [r[0] for r in c.execute("SELECT turn_id FROM turns WHERE session_id=?", (session_id,)).fetchall()]
    delete_turns(c, ids)
    c.execute("DELETE FROM sessions WHERE session_id=?", (session_id,))
    if ids:
        bump(c, C_PURGED_SESSION, len(ids))
    return len(ids)


def invariant_problems(c: sqlite3.Connection) -> list[str]:
    """SQLite integrity_check plus the buffer's invariants. Returns problems ([] = ok)."""
    problems: list[str] = []
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
        refs = unpack_refs(r[6]) + unpack_refs(r[14]) + ([r[15]] if r[15] is not None else [])
        for cid in refs:
            counted[cid] = counted.get(cid, 0) + 1
        missing = [cid for cid in refs if cid not in chunk_len]
        if missing:
            problems.append(f"turn {r[0]}: references {len(missing)} missing chunk(s)")
        n_prompt_bytes = sum(chunk_len.get(cid, (0, 0))[0] for cid in unpack_refs(r[6]))
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
    for (tid,) in c.execute("SELECT turn_id FROM feedback WHERE turn_id NOT IN (SELECT turn_id FROM turns)"):
        problems.append(f"feedback for missing turn {tid}")
    for (sid,) in c.execute(
        "SELECT DISTINCT session_id FROM turns WHERE session_id NOT IN (SELECT session_id FROM sessions)"
    ):
        problems.append(f"turns of unknown session {sid!r}")
    dup = c.execute(
        "SELECT session_id, turn_index, count(*) FROM turns GROUP BY session_id, turn_index HAVING count(*) > 1 LIMIT 10"
    ).fetchall()
    for sid, idx, n in dup:
        problems.append(f"session {sid!r}: turn_index {idx} stored {n} times")
    return problems
