"""Buffer turn record -> judge input, and judge result -> the judgement dict stored back."""

from __future__ import annotations

import json
import time
from typing import Any

from openclaw.buffer.records import content_text
from openclaw.judge.schema import JudgeInput, JudgeResult

MAX_TOOL_CALL_CHARS = 1000


def response_text(rec: Any) -> str:
    """What the assistant said, plus its tool calls (a tool's output judges the call). Never the
    think block: with the server's --reasoning-parser, `content` is the answer without it, and
    the raw `response_text` (which holds it) is no fallback for a turn that had one."""
    text = rec.content
    if text is None:
        had_reasoning = "reasoning" in (getattr(rec, "metadata", None) or {})
        text = "" if had_reasoning else (rec.response_text or "")
    calls = []
    for tc in rec.tool_calls or []:
        fn = (tc or {}).get("function") or {}
        calls.append(f"{fn.get('name', '?')}({fn.get('arguments', '')})")
    if calls:
        text = (text + "\n" if text else "") + "[tool calls] " + "; ".join(calls)[:MAX_TOOL_CALL_CHARS]
    return text


def next_state_of(rec: Any) -> tuple[str, str] | None:
    """(text, role) of the record's next state, None when the session ended without one."""
    ns = rec.next_state
    if not ns:
        return None
    role = str(ns.get("role") or "user")
    msgs = ns.get("messages")
    if isinstance(msgs, list) and len(msgs) > 1 and role == "tool":
        # Several tool results answer one assistant message: judge them together.
        return "\n".join(content_text(m.get("content")) for m in msgs if isinstance(m, dict)), role
    return content_text(ns.get("content")), role


def to_input(rec: Any) -> JudgeInput | None:
    ns = next_state_of(rec)
    if ns is None:
        return None
    return JudgeInput(response=response_text(rec), next_state=ns[0], next_state_role=ns[1],
                      prompt=rec.messages, turn_id=rec.turn_id)


def no_next_state_result() -> JudgeResult:
    """A session that ended after this turn: nothing to learn from, reward 0 without a call."""
    return JudgeResult(reward=0.0, votes=[], backend="none", rationale="session ended without a next state",
                       vote_reason="no_next_state", hint_reason="no_next_state")


def judgement_payload(result: JudgeResult, worker_id: str) -> dict[str, Any]:
    d = result.to_dict()
    d["score"] = result.reward  # the key trainers read (TrajectoryBuffer contract)
    d["worker_id"] = worker_id
    d["judged_at"] = time.time()
    # Plugins may return values JSON cannot store (numpy floats, objects): stringify them here
    # rather than fail inside the buffer's transaction.
    return json.loads(json.dumps(d, default=str))
