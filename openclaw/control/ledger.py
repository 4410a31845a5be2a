"""The provenance ledger: for every trained sample, the turn it came from (session id, turn
id, turn index), the training step, and the weight version it went into.

Rows are written by the bridge when the trainer reports a step (`slime.ray.driver` calls the
data source's `on_trained(indices, step, weight_version)` after the step's weight push; the
version is the one just pushed, or the next one when `--update-weights-interval` defers the
push). They hold ids only, never text, and stay after a retract (marked `invalidated_at` when
the version they went into was rolled back) as the audit trail of what was undone.

Versions are linear: version V holds every valid row with `weight_version <= V`. A retract
that rolls back to version W invalidates every row above W, so "the served version's ledger"
is always `ledger(max_version=served, valid_only=True)`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from openclaw.buffer import TrajectoryBuffer

log = logging.getLogger("openclaw.control.ledger")


def record_step(buffer: TrajectoryBuffer, consumer_id: str, turn_ids: Sequence[int], step: int, weight_version: int,
                *, save_dir: str | None, base_model: str | None) -> int:
    """Ledger rows for one trained step. A turn missing from the buffer (retracted while its
    step trained) gets no row: that is logged loudly, since those weights now hold a retracted
    session and the trainer stops at its next rollout (`retraction_blocks`)."""
    n = buffer.record_trained(consumer_id, turn_ids, step, weight_version, save_dir=save_dir, base_model=base_model)
    if n < len(set(turn_ids)):
        log.warning("ledger: %d of %d turn(s) trained at step %d are no longer in the buffer (retracted during "
                    "the step?)", len(set(turn_ids)) - n, len(set(turn_ids)), step)
    return n


def version_ledger(buffer: TrajectoryBuffer, version: int) -> list[dict[str, Any]]:
    """The rows weight version `version` was trained on (valid rows up to it)."""
    return buffer.ledger(max_version=version, valid_only=True)


def version_sessions(buffer: TrajectoryBuffer, version: int) -> set[str]:
    return {r["session_id"] for r in version_ledger(buffer, version)}


def session_versions(buffer: TrajectoryBuffer, session_id: str, *, valid_only: bool = True) -> list[int]:
    """The weight versions a session's turns went into."""
    return sorted({int(r["weight_version"]) for r in buffer.ledger(session_id=session_id, valid_only=valid_only)})


def ledger_summary(buffer: TrajectoryBuffer) -> list[dict[str, Any]]:
    """Per weight version: steps, turns, sessions, whether it was rolled back (for a dashboard)."""
    by_version: dict[int, dict[str, Any]] = {}
    for r in buffer.ledger():
        v = by_version.setdefault(int(r["weight_version"]), {"weight_version": int(r["weight_version"]), "steps": set(),
                                                              "turns": 0, "sessions": set(), "invalidated": False})
        v["steps"].add(int(r["step"]))
        v["turns"] += 1
        v["sessions"].add(r["session_id"])
        v["invalidated"] = v["invalidated"] or r["invalidated_at"] is not None
    return [{**v, "steps": sorted(v["steps"]), "sessions": sorted(v["sessions"])} for _, v in sorted(by_version.items())]
