"""Reads: turn records reassembled from their row and chunks."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from openclaw.buffer.chunks import fetch_chunks, unpack_refs
from openclaw.buffer.provenance import feedback_for
from openclaw.buffer.records import TurnRecord, unpack_floats, unpack_ids


def load(c: sqlite3.Connection, ids: Sequence[int]) -> list[TurnRecord]:
    if not ids:
        return []
    out: dict[int, TurnRecord] = {}
    for i in range(0, len(ids), 500):
        chunk = list(ids[i : i + 500])
        rows = c.execute(
            "SELECT turn_id, session_id, turn_index, turn_type, trainable, state, created_at, finished_at,"
            " weight_version, model, request_id, payload, msg_chunks, tools_chunk, prompt_chunks, response_ids,"
            " response_logprobs, next_state, judgement, judge_attempts, judge_error, user_id FROM turns WHERE turn_id IN"
            f" ({','.join('?' * len(chunk))})",
            chunk,
        ).fetchall()
        need: set[bytes] = set()
        for row in rows:
            need.update(unpack_refs(row[12]))
            need.update(unpack_refs(row[14]))
            if row[13] is not None:
                need.add(row[13])
        data = fetch_chunks(c, need)
        rated = feedback_for(c, chunk)
        for row in rows:
            out[row[0]] = _record(row, data)
            out[row[0]].feedback = rated.get(row[0])
    return [out[i] for i in ids if i in out]


def _record(row: Sequence[Any], data: dict[bytes, Any]) -> TurnRecord:
    p = json.loads(row[11])
    prompt: list[int] = []
    for cid in unpack_refs(row[14]):
        prompt.extend(unpack_ids(data[cid]))
    return TurnRecord(
        session_id=row[1], turn_index=row[2], turn_type=row[3], trainable=bool(row[4]),
        messages=[json.loads(data[cid]) for cid in unpack_refs(row[12])],
        tools=json.loads(data[row[13]]) if row[13] is not None else None,
        prompt_ids=prompt, response_ids=unpack_ids(row[15]), response_logprobs=unpack_floats(row[16]),
        response_text=p.get("response_text", ""), content=p.get("content"),
        tool_calls=p.get("tool_calls"), model=row[9], weight_version=row[8],
        created_at=row[6], finished_at=row[7], request_id=row[10],
        next_state=json.loads(row[17]) if row[17] is not None else None,
        metadata=p.get("metadata") or {}, turn_id=row[0], state=row[5],
        judgement=json.loads(row[18]) if row[18] is not None else None,
        judge_attempts=row[19], judge_error=row[20], user_id=row[21],
    )


def latest_ids(c: sqlite3.Connection, after_turn_id: int, n: int, session_id: str | None,
               user_id: str | None = None) -> list[int]:
    """The ids of the latest `n` turns after `after_turn_id` (optionally of one session, of one
    user), oldest first."""
    q = "SELECT turn_id FROM turns WHERE turn_id>?" + (" AND session_id=?" if session_id else "")
    q += " AND user_id=?" if user_id is not None else ""
    q += " ORDER BY turn_id DESC LIMIT ?"
    params: list[Any] = [after_turn_id] + ([session_id] if session_id else []) + (
        [user_id] if user_id is not None else []) + [int(n)]
    return [r[0] for r in c.execute(q, params).fetchall()][::-1]
