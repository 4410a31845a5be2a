"""What the dashboard shows, as one JSON snapshot (`GET /dashboard/state`; the page polls it).

* sessions: the newest turns grouped by session, each with the user's message, the reply, the
  judge's verdict, the hint, and the user's explicit feedback (when the buffer has it);
* curves: reward, loss and KL per step from the trainer's `metrics.jsonl` (`OPENCLAW_TRAIN_LOG_DIR`),
  one line per run (a run ends where the step goes back: a restart, a resume from an earlier
  checkpoint), each ordered by step;
* weight versions with their canary results (`PromotionController.listing()`) and what each
  was trained on (the provenance ledger);
* buffer and judge-queue counts (`TrajectoryBuffer.stats()`).

Everything is read from the same stores the trainer and the judge use; nothing is cached here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openclaw.buffer import TurnRecord, content_text
from openclaw.control.viewer import ADMIN_VIEW, Viewer

CURVE_KEYS = ("reward/mean", "loss/total", "loss/binary", "loss/opd")
MAX_TEXT = 600  # characters of a message shown per turn (the page is an overview, not an export)
METRICS_TAIL_BYTES = 2_000_000  # read at most this much of metrics.jsonl (the newest steps)


def _short(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + " …"


def _user_message(rec: TurnRecord) -> str:
    for message in reversed(rec.messages):
        if message.get("role") == "user":
            return content_text(message.get("content"))
    return ""


def sessions_view(buffer: Any, limit_turns: int = 200, viewer: Viewer = ADMIN_VIEW) -> list[dict[str, Any]]:
    """Sessions of the newest `limit_turns` turns `viewer` may see, newest session first."""
    recs = buffer.latest_turns(limit_turns, user_id=viewer.user_id)
    feedback = buffer.feedback_for([int(r.turn_id) for r in recs]) if hasattr(buffer, "feedback_for") else {}
    sessions: dict[str, dict[str, Any]] = {}
    for rec in recs:
        judgement = rec.judgement or {}
        entry = sessions.setdefault(rec.session_id, {"session_id": viewer.shown(rec.session_id), "user_id": rec.user_id,
                                                     "turns": [], "last_turn_id": 0})
        entry["last_turn_id"] = max(entry["last_turn_id"], int(rec.turn_id))
        entry["turns"].append({
            "turn_id": rec.turn_id, "turn_index": rec.turn_index, "type": rec.turn_type, "state": rec.state,
            "weight_version": rec.weight_version, "user": _short(_user_message(rec)),
            "reply": _short(rec.content if rec.content is not None else rec.response_text),
            "verdict": judgement.get("score"), "hint": _short(judgement.get("hint")) or None,
            "feedback": feedback.get(int(rec.turn_id)),
            "next_state": _short(content_text((rec.next_state or {}).get("content"))) or None,
        })
    return sorted(sessions.values(), key=lambda s: -s["last_turn_id"])


def curves(log_dir: Path | None) -> dict[str, Any]:
    """{"source", "metrics": [names], "runs": [{"run", "steps": [...], "series": {name: [value|None
    per step]}}]} from metrics.jsonl. Several runs append to one --log-dir: a row whose step is not
    above the previous row's starts a new run (a restart, or a resume from an earlier checkpoint),
    so every run is one line over increasing steps instead of a zigzag across runs."""
    if log_dir is None:
        return {"source": None, "metrics": [], "runs": [],
                "note": "set OPENCLAW_TRAIN_LOG_DIR to the trainer's --log-dir"}
    path = Path(log_dir) / "metrics.jsonl"
    if not path.is_file():
        return {"source": str(path), "metrics": [], "runs": [], "note": "no metrics yet"}
    with path.open("rb") as fh:
        size = fh.seek(0, 2)
        fh.seek(max(0, size - METRICS_TAIL_BYTES))
        lines = fh.read().decode("utf-8", errors="replace").splitlines()
    runs: list[list[dict[str, Any]]] = []
    for line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a partial first line of the tail, or a line being written
        if not isinstance(row, dict) or not isinstance(row.get("step"), int | float):
            continue
        if not runs or row["step"] <= runs[-1][-1]["step"]:
            runs.append([])
        runs[-1].append(row)
    rows = [row for run in runs for row in run]
    kl_keys = sorted({k for row in rows for k in row if "kl" in k.lower().split("/")[-1]})
    keys = [k for k in CURVE_KEYS if any(k in row for row in rows)] + kl_keys
    return {"source": str(path), "metrics": keys, "runs": [
        {"run": i + 1, "steps": [row["step"] for row in run],
         "series": {k: [row.get(k) if isinstance(row.get(k), int | float) else None for row in run] for k in keys}}
        for i, run in enumerate(runs)]}


def queue_view(buffer: Any) -> dict[str, Any]:
    stats = buffer.stats()
    by_state = stats["by_state"]
    return {"turns": stats["turns"], "sessions": stats["sessions"], "open_sessions": stats["open_sessions"],
            "by_state": by_state, "by_type": stats["by_type"],
            "judge_queue": {"waiting_for_next_state": by_state.get("awaiting_next_state", 0),
                            "ready_to_judge": by_state.get("ready", 0), "being_judged": stats["leased"],
                            "judged": by_state.get("judged", 0), "judge_failed": by_state.get("judge_failed", 0)},
            "consumers": stats["consumers"], "used_bytes": stats["used_bytes"], "max_bytes": stats["max_bytes"]}


def ledger_view(buffer: Any, viewer: Viewer = ADMIN_VIEW) -> dict[str, Any]:
    """Per weight version ("N" for the served weights, "NAME:N" for adapter NAME): what it was
    trained on (the provenance ledger, `ledger.py`); a user's view counts only their own turns."""
    from openclaw.control.ledger import ledger_summary

    rows = None if viewer.identity.is_admin else viewer.rows(buffer.ledger())
    return {(f"{v['adapter']}:" if v["adapter"] else "") + str(v["weight_version"]):
            {"steps": len(v["steps"]), "turns": v["turns"], "sessions": len(v["sessions"]), "invalidated": v["invalidated"]}
            for v in ledger_summary(buffer, rows)}


def snapshot(buffer: Any | None, controller: Any, log_dir: Path | None, served_model: str,
             viewer: Viewer = ADMIN_VIEW) -> dict[str, Any]:
    """The page's state as `viewer` may see it: a user gets their own sessions and ledger counts,
    and no buffer-wide counts (those are every user's traffic)."""
    notes = [] if buffer is not None else ["the RL intercept is off: no sessions are recorded"]
    if not viewer.identity.is_admin:
        notes.append(f"signed in as user {viewer.identity.user_id!r}: your sessions only")
    return {
        "ledger": ledger_view(buffer, viewer) if buffer is not None else {},
        "model": served_model,
        "served_version": controller.served_version,
        "weights": controller.listing(),
        "sessions": sessions_view(buffer, viewer=viewer) if buffer is not None else [],
        "buffer": queue_view(buffer) if buffer is not None and viewer.identity.is_admin else None,
        "curves": curves(log_dir),
        "user": {"id": viewer.identity.user_id, "role": viewer.identity.role},
        "notes": notes,
    }
