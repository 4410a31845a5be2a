"""The provenance ledger: for every trained sample, the turn it came from (session id, turn
id, turn index), the training step, and the weight version it went into.

Rows are written by the bridge when the trainer reports a step (`slime.ray.driver` calls the
data source's `on_trained(indices, step, weight_version)` after the step's weight push; the
version is the one just pushed, or the next one when `--update-weights-interval` defers the
push). They hold ids only, never text, and stay after a retract (marked `invalidated_at` when
the version they went into was rolled back) as the audit trail of what was undone.

Versions are linear: version V holds every valid row with `weight_version <= V`. A retract
that rolls back to version W invalidates every row above W, so "the served version's ledger"
is always `ledger(max_version=served, valid_only=True)`. Invalidated rows still went into the
versions that existed when they were rolled back: every version from the first one trained on a
retracted session up to the highest one that existed when it was retracted holds that session
(`retracted_in`, from the retract journal), and none of them is served again.

Each row names the weight line it trained: the served weights (`adapter` = SERVED_WEIGHTS) or a
LoRA adapter served by name (`--lora-adapter-name U`; with per-user trainers, `--buffer-user U`,
consumer `openclaw-<method>-U`, the adapter of user U). Every rule above holds within one line:
an adapter's versions are numbered, trained, rolled back and retracted on their own, so a retract
of U's session rolls back U's adapter and leaves the served weights and other users' adapters
alone, and version 5 of U's adapter says nothing about version 5 of anything else.
`adapter_ledger` is what one trainer wrote; `user_ledger` every row of U's sessions, whichever
trainer wrote it.

Version numbers are unique across trainer restarts: a trainer starts numbering after
`weight_version_floor` (the highest version the buffer, the registry or the engine knows), so a
number never names two different sets of weights.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from openclaw.buffer import TrajectoryBuffer
from openclaw.buffer.provenance import SERVED_WEIGHTS
from openclaw.buffer.users import session_owner

log = logging.getLogger("openclaw.control.ledger")


def record_step(buffer: TrajectoryBuffer, consumer_id: str, turn_ids: Sequence[int], step: int, weight_version: int,
                *, save_dir: str | None, base_model: str | None, adapter: str = SERVED_WEIGHTS) -> int:
    """Ledger rows for one trained step. A turn missing from the buffer (retracted while its
    step trained) gets no row: that is logged loudly, since those weights now hold a retracted
    session and the trainer stops at its next rollout (`retraction_blocks`)."""
    n = buffer.record_trained(consumer_id, turn_ids, step, weight_version, save_dir=save_dir, base_model=base_model,
                              adapter=adapter)
    if n < len(set(turn_ids)):
        log.warning("ledger: %d of %d turn(s) trained at step %d are no longer in the buffer (retracted during "
                    "the step?)", len(set(turn_ids)) - n, len(set(turn_ids)), step)
    return n


def version_ledger(buffer: TrajectoryBuffer, version: int, adapter: str = SERVED_WEIGHTS) -> list[dict[str, Any]]:
    """The rows weight version `version` of `adapter` was trained on (valid rows of that line up to it)."""
    return buffer.ledger(max_version=version, valid_only=True, adapter=adapter)


def adapter_ledger(buffer: TrajectoryBuffer, consumer_id: str, *, max_version: int | None = None,
                   valid_only: bool = True) -> list[dict[str, Any]]:
    """The rows one trainer (consumer) wrote: with a per-user trainer, the turns that trained that
    user's adapter (up to `max_version`; not rolled back unless `valid_only=False`)."""
    return buffer.ledger(consumer_id=consumer_id, max_version=max_version, valid_only=valid_only)


def user_ledger(buffer: TrajectoryBuffer, user_id: str, *, valid_only: bool = False) -> list[dict[str, Any]]:
    """Every row of `user_id`'s sessions, whichever trainer wrote it (the owner is read from the
    stored session id, which outlives the session's turns). A row here under a consumer that is not
    the user's own trainer means another model was trained on this user's turns."""
    return [r for r in buffer.ledger(valid_only=valid_only) if session_owner(r["session_id"]) == user_id]


def taint_ranges(plan: dict[str, Any], adapter: str = SERVED_WEIGHTS) -> list[tuple[int, int]]:
    """The versions of `adapter` (inclusive ranges) a retract journal row's session went into."""
    if adapter != SERVED_WEIGHTS:
        return [(int(lo), int(hi)) for line in plan.get("adapters") or [] if line["adapter"] == adapter
                for lo, hi in line["taint"]]
    if plan.get("taint") is not None:
        return [(int(lo), int(hi)) for lo, hi in plan["taint"]]
    first = plan.get("first_version")  # a journal row written before ranges were recorded
    if first is None:
        return []
    return [(int(first), max([int(first), *(int(v) for v in plan.get("affected_versions") or [])]))]


def retracted_in(buffer: TrajectoryBuffer, version: int, adapter: str = SERVED_WEIGHTS) -> list[str]:
    """The retracted sessions (journal rows in any state: from the moment a retract is planned)
    whose training went into weight version `version` of `adapter`. Non-empty: that version must
    never be served, promoted, rolled back to or loaded again."""
    return sorted(j["session_id"] for j in buffer.retractions()
                  if any(lo <= int(version) <= hi for lo, hi in taint_ranges(j["plan"], adapter)))


def retracted_ranges(buffer: TrajectoryBuffer, adapter: str = SERVED_WEIGHTS) -> list[tuple[int, int]]:
    """Every version range of `adapter` that holds a retracted session (journal rows in any state)."""
    return [r for j in buffer.retractions() for r in taint_ranges(j["plan"], adapter)]


def version_sessions(buffer: TrajectoryBuffer, version: int, adapter: str = SERVED_WEIGHTS) -> set[str]:
    """The sessions weight version `version` of `adapter` was trained on, retracted ones included."""
    return {r["session_id"] for r in version_ledger(buffer, version, adapter)} | \
        set(retracted_in(buffer, version, adapter))


def highest_weight_version(buffer: TrajectoryBuffer) -> int:
    """The highest weight version the buffer knows: the ledger (rolled back rows too), the turns'
    served versions, and the highest version a retract saw."""
    journal = [int(j["plan"].get("max_version") or 0) for j in buffer.retractions()]
    return max([buffer.highest_weight_version(), *journal])


def engine_versions(urls: Iterable[str], timeout_s: float = 30.0) -> list[int]:
    """What the engines know: the version each serves and, from an OpenClaw-RL server, every version
    in its registry (`GET /v1/weights`). An engine that does not answer is an error (a trainer must
    not guess its numbering); one that answers without integer versions (SGLang's default
    "default") adds nothing."""
    import httpx
    from slime.rollout.sglang_client import auth_headers

    found: list[int] = []
    for url in urls:
        base = url.rstrip("/")
        with httpx.Client(timeout=timeout_s, headers=auth_headers()) as client:
            try:
                served = client.get(base + "/get_weight_version")
                served.raise_for_status()
                listing = client.get(base + "/v1/weights")
            except httpx.HTTPError as exc:
                raise RuntimeError(f"cannot read the weight version of the engine at {base}: {exc}") from exc
        try:
            found.append(int(served.json()["weight_version"]))
        except (TypeError, ValueError, KeyError):
            pass
        if listing.status_code == 200:
            found += [int(v["version"]) for v in listing.json().get("data", [])]
        elif listing.status_code != 404:  # 404: an engine without a registry (SGLang)
            raise RuntimeError(f"GET {base}/v1/weights -> HTTP {listing.status_code}: {listing.text[:300]}")
    return found


def weight_version_floor(buffer: TrajectoryBuffer, engine_urls: Iterable[str] = ()) -> int:
    """The number a trainer's next weight version must be above: a trainer that starts (or
    restarts, from a checkpoint or from scratch) numbers its pushes from here + 1."""
    return max([highest_weight_version(buffer), *engine_versions(engine_urls)])


DEBUG_ROLLOUT_DATA = "debug_rollout_data"


def register_trainer_files(buffer: TrajectoryBuffer, consumer_id: str, *, debug_rollout_data: str | None) -> None:
    """Record where a trainer writes files that hold conversation text (its rollout debug dumps),
    before it writes any: a retract deletes those holding the session."""
    if debug_rollout_data:
        buffer.record_trainer_file(consumer_id, DEBUG_ROLLOUT_DATA, str(Path(debug_rollout_data).resolve()))


def session_versions(buffer: TrajectoryBuffer, session_id: str, *, valid_only: bool = True) -> list[int]:
    """The weight versions a session's turns went into."""
    return sorted({int(r["weight_version"]) for r in buffer.ledger(session_id=session_id, valid_only=valid_only)})


def ledger_summary(buffer: TrajectoryBuffer, rows: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Per weight version of each line (`adapter`, SERVED_WEIGHTS first): steps, turns, sessions,
    whether it was rolled back (for a dashboard). `rows`: summarise these ledger rows (one user's)
    instead of the whole ledger."""
    by_version: dict[tuple[str, int], dict[str, Any]] = {}
    for r in buffer.ledger() if rows is None else rows:
        key = (r["adapter"], int(r["weight_version"]))
        v = by_version.setdefault(key, {"adapter": key[0], "weight_version": key[1], "steps": set(),
                                        "turns": 0, "sessions": set(), "invalidated": False})
        v["steps"].add(int(r["step"]))
        v["turns"] += 1
        v["sessions"].add(r["session_id"])
        v["invalidated"] = v["invalidated"] or r["invalidated_at"] is not None
    return [{**v, "steps": sorted(v["steps"]), "sessions": sorted(v["sessions"])} for _, v in sorted(by_version.items())]
