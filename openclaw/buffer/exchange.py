"""Export to / import from the reference's session JSON format.

    {"session_id": "...", "turns": [{"type": "main"|"side", "prompt": str, "response": str,
                                      "next_state": str|null, "trainable": bool, ...}]}

Exported turns carry extra keys so a round trip is lossless: turn_index, messages, tools,
tool_calls, model, weight_version, created_at, finished_at, state, judgement, metadata,
next_state_role, next_state_messages and (unless text-only) prompt_ids, response_ids,
response_logprobs. Import accepts a session object, a list of them, {"sessions": [...]}, or
JSONL with one session per line; only `type`, `prompt` and `response` are required per turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from openclaw.buffer.records import READY, TURN_TYPES, TurnRecord
from openclaw.buffer.store import TrajectoryBuffer
from openclaw.buffer.users import session_owner
from openclaw.buffer.writes import AppendOp, FinalizeOp


class ImportFormatError(ValueError):
    pass


def export_turn(t: TurnRecord, *, tokens: bool = True) -> dict[str, Any]:
    ns = t.next_state or {}
    out: dict[str, Any] = {
        "type": t.turn_type,
        "prompt": t.prompt_text,
        "response": t.content if t.content is not None else t.response_text,
        "next_state": ns.get("content") if t.next_state is not None else None,
        "trainable": t.trainable,
        "turn_index": t.turn_index,
        "turn_id": t.turn_id,
        "state": t.state,
        "messages": t.messages,
        "tools": t.tools,
        "tool_calls": t.tool_calls,
        "response_text": t.response_text,
        "model": t.model,
        "weight_version": t.weight_version,
        "created_at": t.created_at,
        "finished_at": t.finished_at,
        "request_id": t.request_id,
        "judgement": t.judgement,
        "metadata": t.metadata,
    }
    if t.next_state is not None:
        out["next_state_role"] = ns.get("role")
        out["next_state_messages"] = ns.get("messages")
    if tokens:
        out["prompt_ids"] = t.prompt_ids
        out["response_ids"] = t.response_ids
        out["response_logprobs"] = t.response_logprobs
    return out


def export_sessions(buf: TrajectoryBuffer, session_ids: Iterable[str] | None = None, *,
                    tokens: bool = True, user_id: str | None = None) -> Iterator[dict[str, Any]]:
    """Sessions in the reference format, plus their owner (`user_id`); with `user_id`, only that
    user's (a named session of another user is left out, as a missing one is)."""
    for sid in session_ids if session_ids is not None else buf.session_ids(user_id=user_id):
        turns = [t for t in buf.session_turns(sid) if user_id is None or t.user_id == user_id]
        if turns:
            yield {"session_id": sid, "user_id": turns[0].user_id,
                   "turns": [export_turn(t, tokens=tokens) for t in turns]}


def parse_sessions(text: str) -> list[dict[str, Any]]:
    """JSON (object, list, or {"sessions": [...]}) or JSONL."""
    text = text.strip()
    if not text:
        return []
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
        out = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError as e:
                    raise ImportFormatError(f"line {n}: not JSON ({e})") from e
        sessions = out
    else:
        if isinstance(doc, dict) and "sessions" in doc:
            sessions = doc["sessions"]
        elif isinstance(doc, dict):
            sessions = [doc]
        else:
            sessions = doc
    if not isinstance(sessions, list):
        raise ImportFormatError("expected a session object, a list of sessions, or JSONL")
    for i, s in enumerate(sessions):
        if not isinstance(s, dict) or not isinstance(s.get("session_id"), str) or not s["session_id"]:
            raise ImportFormatError(f"session #{i}: needs a non-empty string session_id")
        if "\x00" in s["session_id"] or len(s["session_id"]) > 256:
            raise ImportFormatError(f"session #{i}: session_id has NUL or is longer than 256 characters")
        owner = s.get("user_id", session_owner(s["session_id"]))
        if owner != session_owner(s["session_id"]):
            # The stored id names its owner (openclaw.buffer.users): a mismatch would file the
            # session under one user and show it to another.
            raise ImportFormatError(f"session #{i}: user_id {owner!r} is not the owner its session_id names "
                                    f"({session_owner(s['session_id'])!r}, see openclaw/buffer/users.py)")
        if not isinstance(s.get("turns"), list):
            raise ImportFormatError(f"session {s['session_id']!r}: needs a turns list")
        for j, t in enumerate(s["turns"]):
            if not isinstance(t, dict):
                raise ImportFormatError(f"session {s['session_id']!r} turn #{j}: not an object")
            if t.get("type") not in TURN_TYPES:
                raise ImportFormatError(f"session {s['session_id']!r} turn #{j}: type must be main or side")
            for k in ("prompt", "response"):
                if k in t and t[k] is not None and not isinstance(t[k], str):
                    raise ImportFormatError(f"session {s['session_id']!r} turn #{j}: {k} must be a string")
    return sessions


@dataclass
class ImportReport:
    sessions: int = 0
    turns: int = 0
    skipped_sessions: int = 0  # already in the buffer (import is idempotent)
    untrainable_no_tokens: int = 0  # marked trainable but no token ids and no tokenizer given
    redacted: int = 0


def _ints(v: Any, what: str) -> list[int]:
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise ImportFormatError(f"{what} must be a list of integers")
    return v


def import_sessions(buf: TrajectoryBuffer, sessions: list[dict[str, Any]], *, tokenizer: Any = None,
                    redactor: Any = None) -> ImportReport:
    rep = ImportReport()
    existing = set(buf.session_ids())
    for s in sessions:
        sid = s["session_id"]
        if sid in existing:
            rep.skipped_sessions += 1
            continue
        ops: list[Any] = []
        judged: list[tuple[TurnRecord, dict[str, Any]]] = []
        for j, t in enumerate(s["turns"]):
            rec = _turn_record(sid, j, t, tokenizer, rep)
            rec.user_id = session_owner(sid)
            if redactor is not None:
                _redact_record(rec, redactor, rep)
            ops.append(AppendOp(rec))
            if isinstance(t.get("judgement"), dict) and rec.trainable:
                judged.append((rec, t["judgement"]))
        ops.append(FinalizeOp(sid, "imported"))
        results = buf.write_ops(ops)
        for r in results:
            if isinstance(r, Exception):
                raise ImportFormatError(f"session {sid!r}: {r}")
        for rec, judgement in judged:
            if rec.turn_id is not None and buf.get_turn(rec.turn_id).state == READY:
                buf.write_judgement(rec.turn_id, judgement)
        rep.sessions += 1
        rep.turns += len(s["turns"])
    return rep


def _turn_record(sid: str, j: int, t: dict[str, Any], tokenizer: Any, rep: ImportReport) -> TurnRecord:
    where = f"session {sid!r} turn #{j}"
    prompt = t.get("prompt") or ""
    response = t.get("response") or ""
    messages = t.get("messages")
    if not isinstance(messages, list):
        messages = [{"role": "user", "content": prompt}]
    ns = t.get("next_state")
    next_state = None
    if isinstance(ns, dict):
        next_state = ns
    elif isinstance(ns, str):
        next_state = {"role": t.get("next_state_role") or "user", "content": ns}
        if isinstance(t.get("next_state_messages"), list):
            next_state["messages"] = t["next_state_messages"]
    prompt_ids = _ints(t.get("prompt_ids"), f"{where}: prompt_ids")
    response_ids = _ints(t.get("response_ids"), f"{where}: response_ids")
    logprobs = t.get("response_logprobs") or []
    if not isinstance(logprobs, list) or not all(isinstance(x, int | float) for x in logprobs):
        raise ImportFormatError(f"{where}: response_logprobs must be a list of numbers")
    trainable = bool(t.get("trainable", t["type"] == "main")) and t["type"] == "main"
    if trainable and (not prompt_ids or not response_ids):
        if tokenizer is not None:
            enc = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            if hasattr(enc, "keys"):  # transformers 5 returns a BatchEncoding
                enc = enc["input_ids"]
            prompt_ids = [int(x) for x in enc]
            response_ids = list(tokenizer(response, add_special_tokens=False)["input_ids"])
            logprobs = []  # never invented: the trainer recomputes them
        else:
            trainable = False
            rep.untrainable_no_tokens += 1
    if trainable and not response_ids:
        trainable = False
        rep.untrainable_no_tokens += 1
    meta = t.get("metadata") if isinstance(t.get("metadata"), dict) else {}
    meta = {**meta, "imported": True}
    return TurnRecord(
        session_id=sid, turn_index=None, turn_type=t["type"], messages=messages,
        tools=t.get("tools") if isinstance(t.get("tools"), list) else None,
        prompt_ids=prompt_ids, response_ids=response_ids,
        response_logprobs=[float(x) for x in logprobs] if len(logprobs) == len(response_ids) else [],
        response_text=t.get("response_text") if isinstance(t.get("response_text"), str) else response,
        content=response, tool_calls=t.get("tool_calls") if isinstance(t.get("tool_calls"), list) else None,
        model=str(t.get("model") or ""), weight_version=int(t.get("weight_version") or 0),
        created_at=float(t.get("created_at") or 0.0), finished_at=float(t.get("finished_at") or 0.0),
        request_id=str(t.get("request_id") or ""), trainable=trainable, next_state=next_state, metadata=meta,
    )


def _redact_record(rec: TurnRecord, redactor: Any, rep: ImportReport) -> None:
    n = 0
    for attr in ("messages", "tools", "response_text", "content", "tool_calls"):
        val, k = redactor.redact(getattr(rec, attr))
        setattr(rec, attr, val)
        n += k
    rec.next_state, _ = redactor.redact(rec.next_state)  # text for the judge; ids unaffected
    if n:
        rep.redacted += 1
        rec.prompt_ids, rec.response_ids, rec.response_logprobs = [], [], []
        rec.trainable = False
        rec.metadata["redactions"] = {"import": n}
        rec.metadata["untrainable_reason"] = "redacted"


__all__ = ["ImportFormatError", "ImportReport", "export_sessions", "export_turn", "import_sessions", "parse_sessions"]
