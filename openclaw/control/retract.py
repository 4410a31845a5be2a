"""Retract and unlearn: take a session back after it was (maybe) trained on.

    retract_session(buffer, session_id, engine)   # -> RetractResult (JSON via .to_json())

What it does, in this order, each step idempotent and journaled (table `retractions`):
  1. plan (state `planned`, written before anything is touched): the session's turns, the
     ledger rows that trained on it (consumers, steps, weight versions), the version being
     served, the versions affected (every version at or after the first one that used it), the
     checkpoint to roll back to (the newest one of that trainer that predates the session's
     first step, else the trainer's base model, version 0), the later checkpoints to delete,
     the export files we wrote that hold it, and OPD top-k files derived from its turns;
  2. purge (state `purged`): export files are rewritten without the session (atomic replace),
     top-k files and the later checkpoints are deleted (`checkpoint-latest` repointed), then ONE
     buffer transaction removes its turns (with their judgements and hints), feedback and export
     records, and the WAL is truncated (deleted pages are zeroed: secure_delete);
  3. roll back: if the served version used the session, the rollback checkpoint is loaded
     into the engine (`/update_weights_from_disk`) and served under its own version; every
     ledger row above it is marked invalidated. Trainers that trained on the session stop at
     their next rollout (`RetractedTrainingError`, naming the checkpoint to resume from).
     Policy "stop" (default): the later training is dropped. Policy "requeue": the other
     turns trained into the invalidated versions are marked unconsumed again for those
     trainers, so a trainer restarted from the rollback checkpoint re-applies that training
     without the retracted session (re-applied when the trainer restarts, not by the retract);
  4. done: the journal row holds the result.

A crash (kill -9) anywhere leaves the journal row in `planned` or `purged`; the next call for
the session, `complete_pending` (run by the server at start and by the CLI), finishes it. While
a row is unfinished the bridge never hands the session's turns to a trainer.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from openclaw.buffer import TrajectoryBuffer

log = logging.getLogger("openclaw.control.retract")

POLICIES = ("stop", "requeue")
# Test hook for the crash test: after the named journal state is durable, say so on stderr and
# block until killed (the test delivers the kill -9 from outside, at a known point).
PAUSE_ENV = "OPENCLAW_RETRACT_PAUSE_AT"


class RetractError(Exception):
    """A retract that cannot be done; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400, code: str = "retract_failed") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class WeightTarget(Protocol):
    """The serving engine, as far as a retract needs it."""

    def served_version(self) -> int: ...

    def load(self, model_path: str, version: int) -> None: ...


class HTTPWeightTarget:
    """An engine (or the OpenClaw server) over SGLang's native HTTP API."""

    def __init__(self, url: str, timeout_s: float = 600.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def served_version(self) -> int:
        from slime.rollout.sglang_client import SyncSGLangClient

        with SyncSGLangClient(self.url, timeout=30) as client:
            raw = client.get_weight_version()
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise RetractError(f"the engine at {self.url} reports weight version {raw!r}, not an integer: cannot "
                               "tell whether it serves retracted training", status=409) from None

    def load(self, model_path: str, version: int) -> None:
        from slime.utils.weight_sync import push_to_engines

        push_to_engines([self.url], model_path, version, timeout_s=self.timeout_s)


@dataclass
class RetractPlan:
    session_id: str
    policy: str
    turn_ids: list[int]
    consumers: list[str]
    trained_versions: list[int]
    first_version: int | None
    served_version: int | None
    affected_versions: list[int]
    rollback_to: dict[str, Any] | None  # {"path", "weight_version", "step"} (step None: the base model)
    remove_checkpoints: list[str]
    exports: list[str]
    topk_files: list[str]

    @property
    def needs_rollback(self) -> bool:
        return self.first_version is not None and self.served_version is not None \
            and self.served_version >= self.first_version

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RetractResult:
    session_id: str
    state: str
    removed: dict[str, int] = field(default_factory=dict)
    affected_versions: list[int] = field(default_factory=list)
    served_version_before: int | None = None
    served_version: int | None = None
    rolled_back_to: dict[str, Any] | None = None
    removed_checkpoints: list[str] = field(default_factory=list)
    rewritten_exports: list[str] = field(default_factory=list)
    stopped_consumers: list[str] = field(default_factory=list)
    requeued_turns: int = 0
    actions: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def fields(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> dict[str, Any]:
        return {"object": "session.retraction", **asdict(self)}


# ------------------------------------------------------------------ plan
def _checkpoints(save_dir: str) -> list[tuple[Path, Any]]:
    from slime.utils.checkpoint import list_checkpoints, load_meta

    return [(p, load_meta(p)) for p in list_checkpoints(save_dir)] if save_dir and Path(save_dir).is_dir() else []


def _topk_files(buffer: TrajectoryBuffer, turns: list[Any]) -> list[str]:
    """OPD top-k files the teacher wrote for these turns (default cache dir, under the buffer)."""
    from openclaw.bridge.teacher import tokens_key

    d = buffer.directory / "opd_topk"
    out = []
    for t in turns:
        if t.prompt_ids and t.response_ids:
            p = d / f"{tokens_key(list(t.prompt_ids) + list(t.response_ids))}.json"
            if p.exists():
                out.append(str(p))
    return out


def plan_retract(buffer: TrajectoryBuffer, session_id: str, served_version: int | None, policy: str = "stop") -> RetractPlan:
    if policy not in POLICIES:
        raise RetractError(f"'policy' must be one of {POLICIES} (stop: drop the training after the rollback point; "
                           f"requeue: give its other turns back to the trainer), got {policy!r}")
    turns = buffer.session_turns(session_id)
    rows = buffer.ledger(session_id=session_id, valid_only=True)
    exports = buffer.exports_of(session_id)
    if not turns and not rows and not exports and session_id not in buffer.session_ids():
        raise RetractError(f"No session '{session_id}' in the buffer (never stored, or already purged).",
                           status=404, code="session_not_found")
    trained_versions = sorted({int(r["weight_version"]) for r in rows})
    first_version = trained_versions[0] if trained_versions else None
    rollback_to: dict[str, Any] | None = None
    remove: list[str] = []
    if rows:
        candidates: list[dict[str, Any]] = []
        for save_dir in sorted({r["save_dir"] for r in rows if r["save_dir"]}):
            first_step = min(int(r["step"]) for r in rows if r["save_dir"] == save_dir)
            for path, meta in _checkpoints(save_dir):
                if int(meta.rollout_id) >= first_step:
                    remove.append(str(path))
                elif first_version is not None and int(meta.weight_version) < first_version:
                    candidates.append({"path": str(path), "weight_version": int(meta.weight_version),
                                       "step": int(meta.rollout_id)})
        if candidates:
            rollback_to = max(candidates, key=lambda c: (c["weight_version"], c["step"]))
        else:
            bases = sorted({r["base_model"] for r in rows if r["base_model"]})
            if len(bases) != 1:
                raise RetractError(f"session '{session_id}' was trained on, no checkpoint predates it, and the ledger "
                                   f"names {len(bases)} base models ({bases}): cannot tell what to roll back to",
                                   status=409)
            rollback_to = {"path": bases[0], "weight_version": 0, "step": None}
    all_versions = {int(r["weight_version"]) for r in buffer.ledger(valid_only=True)}
    affected: set[int] = set()
    if first_version is not None:
        affected = {v for v in all_versions if v >= first_version}
        if served_version is not None and served_version >= first_version:
            affected.add(served_version)
    return RetractPlan(
        session_id=session_id, policy=policy, turn_ids=[int(t.turn_id) for t in turns],
        consumers=sorted({r["consumer_id"] for r in rows}), trained_versions=trained_versions,
        first_version=first_version, served_version=served_version, affected_versions=sorted(affected),
        rollback_to=rollback_to, remove_checkpoints=remove, exports=exports, topk_files=_topk_files(buffer, turns),
    )


# ------------------------------------------------------------------ steps
def _pause_point(state: str) -> None:
    if os.environ.get(PAUSE_ENV) == state:
        print(f"retract: paused at {state}", file=sys.stderr, flush=True)
        while True:
            signal.pause()  # until the crash test's kill -9


def rewrite_export(path: str, session_id: str) -> bool:
    """Rewrite an export file (JSON or JSONL, as `export` writes them) without the session;
    atomic (temp file + fsync + rename), a no-op when it is not in there (idempotent). Returns
    whether the file changed; a missing file is already clean."""
    from openclaw.buffer.exchange import parse_sessions

    p = Path(path)
    if not p.is_file():
        return False
    text = p.read_text(encoding="utf-8")
    sessions = parse_sessions(text)
    kept = [s for s in sessions if s.get("session_id") != session_id]
    if len(kept) == len(sessions):
        return False
    try:
        json.loads(text)
        jsonl = False
    except ValueError:  # one session per line
        jsonl = True
    out = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in kept) if jsonl else \
        json.dumps(kept, indent=1, ensure_ascii=False) + "\n"
    tmp = p.with_name(f".{p.name}.retract-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(out)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, p)
    return True


def _remove_checkpoints(paths: list[str], rollback_to: dict[str, Any] | None) -> list[str]:
    from slime.utils.checkpoint import LATEST

    removed = []
    for path in paths:
        p = Path(path)
        latest = p.parent / LATEST
        if latest.is_symlink() and os.path.realpath(latest) == os.path.realpath(p):
            # repoint (or drop) `checkpoint-latest` first: it never names a deleted folder
            target = Path(rollback_to["path"]) if rollback_to and rollback_to.get("step") is not None else None
            if target is not None and target.parent == p.parent:
                tmp = p.parent / f".tmp-latest-retract-{os.getpid()}"
                if tmp.is_symlink() or tmp.exists():
                    tmp.unlink()
                os.symlink(target.name, tmp)
                os.replace(tmp, latest)
            else:
                latest.unlink()
        if p.exists():
            shutil.rmtree(p)
            removed.append(path)
    return removed


def _purge(buffer: TrajectoryBuffer, plan: RetractPlan, result: RetractResult) -> None:
    for path in plan.exports:
        if rewrite_export(path, plan.session_id):
            result.rewritten_exports.append(path)
    for path in plan.topk_files:
        Path(path).unlink(missing_ok=True)
    result.removed_checkpoints = _remove_checkpoints(plan.remove_checkpoints, plan.rollback_to)
    result.removed = buffer.purge_retracted(plan.session_id)


def _rollback(plan: RetractPlan, engine: WeightTarget | None, result: RetractResult) -> int | None:
    """Load the rollback checkpoint if the engine serves a version that used the session."""
    if engine is None:
        return None
    served = engine.served_version()
    result.served_version_before = served
    # The plan's view counts too: after a crash between the load and `done`, the engine already
    # serves the rollback version, and loading it again is harmless.
    if plan.first_version is None or (served < plan.first_version and not plan.needs_rollback):
        result.served_version = served
        return None
    assert plan.rollback_to is not None  # a trained session always has a rollback target
    target = plan.rollback_to
    engine.load(str(target["path"]), int(target["weight_version"]))
    now = engine.served_version()
    if now != int(target["weight_version"]):
        raise RetractError(f"the engine serves version {now} after loading {target['path']} as version "
                           f"{target['weight_version']}", status=500)
    result.served_version = now
    result.rolled_back_to = target
    return int(target["weight_version"])


def retract_session(buffer: TrajectoryBuffer, session_id: str, engine: WeightTarget | None,
                    policy: str = "stop") -> RetractResult:
    """Retract `session_id` (see the module docstring). `engine` None is allowed only when the
    session was never trained on (the CLI without --engine-url): a RetractError otherwise,
    before anything is touched."""
    t0 = time.perf_counter()
    journal = buffer.retraction(session_id)
    if journal is not None and journal["state"] == "done" and not buffer.session_turns(session_id) \
            and session_id not in buffer.session_ids():
        return RetractResult(**journal["result"]) if journal["result"] else RetractResult(session_id, "done")
    if journal is not None and journal["state"] != "done":
        plan = RetractPlan(**journal["plan"])  # resume what a crash interrupted
        state = journal["state"]
    else:
        served = engine.served_version() if engine is not None else None
        plan = plan_retract(buffer, session_id, served, policy)
        if plan.trained_versions and engine is None:
            raise RetractError(f"session '{session_id}' was trained into weight version(s) {plan.trained_versions}: "
                               "the retract must check (and maybe roll back) the served weights; pass the engine "
                               "(--engine-url URL of the server), or retract through the server's "
                               f"POST /v1/sessions/{session_id}/retract", status=409)
        buffer.begin_retraction(session_id, plan.to_json())
        state = "planned"
        _pause_point("planned")
    result = RetractResult(session_id=session_id, state="done", affected_versions=plan.affected_versions,
                           stopped_consumers=plan.consumers)
    if journal is not None and journal["state"] != "done":
        result.actions.append(f"resumed a retract interrupted in state '{state}'")
    if state == "planned":
        _purge(buffer, plan, result)
        result.actions.append(f"removed {result.removed.get('turns', 0)} turn(s) (judgements and hints with them), "
                              f"{result.removed.get('feedback', 0)} feedback row(s), "
                              f"{len(result.rewritten_exports)} export file(s) rewritten, "
                              f"{len(plan.topk_files)} top-k file(s), {len(result.removed_checkpoints)} checkpoint(s)")
        _pause_point("purged")
    rolled = _rollback(plan, engine, result)
    if rolled is not None:
        result.actions.append(f"rolled the served weights back from version {result.served_version_before} to "
                              f"{rolled} ({plan.rollback_to['path'] if plan.rollback_to else ''})")
    elif plan.trained_versions:
        result.actions.append(f"the served version {result.served_version_before} predates the session: nothing to "
                              "roll back")
    if plan.consumers:
        result.actions.append(f"trainer(s) {plan.consumers} stop at their next rollout (policy '{plan.policy}'): resume from "
                              f"{plan.rollback_to['path'] if plan.rollback_to else 'the base model'}")
    result.seconds = round(time.perf_counter() - t0, 3)
    invalidate_above = rolled if rolled is not None else \
        (plan.first_version - 1 if plan.first_version is not None else None)
    requeue = plan.consumers if plan.policy == "requeue" and invalidate_above is not None else []
    if requeue:
        result.actions.append(f"requeued the turns trained after the rollback point for {requeue} (requeued_turns): "
                              "a trainer restarted from the rollback checkpoint trains on them again")
    result.requeued_turns = buffer.finish_retraction(session_id, result.fields(), invalidate_above=invalidate_above,
                                                     requeue_consumers=requeue)
    log.warning("retracted session %r: %s", session_id, "; ".join(result.actions))
    return result


def complete_pending(buffer: TrajectoryBuffer, engine: WeightTarget | None) -> list[RetractResult]:
    """Finish every retract a crash interrupted (the server runs this at start)."""
    return [retract_session(buffer, j["session_id"], engine, j["plan"].get("policy", "stop"))
            for j in buffer.retractions(unfinished=True)]


def served_excludes(buffer: TrajectoryBuffer, session_id: str, served_version: int) -> bool:
    """Whether the ledger of the served version holds no turn of `session_id`."""
    return all(r["session_id"] != session_id for r in buffer.ledger(max_version=served_version, valid_only=True))

