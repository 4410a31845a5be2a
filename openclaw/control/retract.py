"""Retract and unlearn: take a session back after it was (maybe) trained on.

    retract_session(buffer, session_id, engine)   # -> RetractResult (JSON via .to_json())

What it does, in this order, each step idempotent and journaled (table `retractions`):
  1. plan (state `planned`, written before anything is touched): the session's turns, the
     ledger rows that trained on it (consumers, steps, weight versions), the version being
     served, the versions it went into (`taint`: from the first one that used it up to the
     highest one that exists now; from this moment none of them can be served, promoted,
     rolled back to or loaded: `openclaw.control.ledger.retracted_in`), the checkpoint to roll
     back to (the newest one of that trainer that predates the session's first step, else the
     trainer's base model, version 0), the later checkpoints to delete, the export files we
     wrote that hold it, and OPD top-k files derived from its turns;
  2. purge: export files are rewritten without the session (atomic replace), top-k files, the
     later checkpoints and the trainers' rollout debug dumps holding it are deleted
     (`checkpoint-latest` repointed), then ONE buffer transaction removes its turns (with their
     judgements and hints), feedback and export records (state `deleted`); then the WAL is
     checkpointed and truncated (deleted pages are zeroed: secure_delete) and only then is the
     state `purged`: `purged` means no byte of the session is left in the buffer's files;
  3. roll back: if the served version used the session, the rollback checkpoint is loaded
     into the engine and served under its own version (never through the promotion gate's
     canary, never refused by it); the server's registry marks every version the session went
     into `retracted` and deletes its kept folder; every ledger row above the rollback version
     is marked invalidated. Trainers that trained on the session stop at their next rollout or
     weight push (`RetractedTrainingError`, naming the checkpoint to resume from).
     Policy "stop" (default): the later training is dropped. Policy "requeue": the other
     turns trained into the invalidated versions are marked unconsumed again for those
     trainers, so a trainer restarted from the rollback checkpoint re-applies that training
     without the retracted session (re-applied when the trainer restarts, not by the retract);
  4. done: the journal row holds the result.

Each weight line is planned and rolled back on its own (`openclaw.control.ledger`): the served
weights as above, and every LoRA adapter served by name that the session trained (a per-user
trainer's adapter, `AdapterLine`). An adapter that serves a version holding the session is
loaded back at its trainer's newest checkpoint before the session, or, with none, unloaded (its
user gets the served weights, which never held the session unless their own line says so). The
versions of that adapter the session went into are never loaded under its name again
(`retracted_in(..., adapter)`); other users' adapters and the served weights are not touched.

A crash (kill -9) anywhere leaves the journal row in `planned`, `deleted` or `purged`; the next
call for the session, `complete_pending` (run by the server at start and by the CLI), finishes
it. While a row is unfinished the bridge never hands the session's turns to a trainer.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from openclaw.buffer import TrajectoryBuffer
from openclaw.buffer.derived import TOPK_DIR_NAME, tokens_key
from openclaw.buffer.provenance import SERVED_WEIGHTS
from openclaw.control.ledger import (
    DEBUG_ROLLOUT_DATA,
    highest_weight_version,
    retracted_in,
    retracted_ranges,
    taint_ranges,
    version_sessions,
)
from openclaw.environment import env_value

log = logging.getLogger("openclaw.control.retract")

POLICIES = ("stop", "requeue")
# Test hook for the crash test: after the named journal state is durable, say so on stderr and
# block until killed (the test delivers the kill -9 from outside, at a known point):
# planned, deleted (rows gone, WAL not yet clean), purged (WAL clean).
PAUSE_ENV = "OPENCLAW_RETRACT_PAUSE_AT"
STATES = ("planned", "deleted", "purged", "done")


def missing_session_message(session_id: str) -> str:
    """The 404 for a session the caller cannot retract: one text for "never stored" and "another
    user's", so the answer tells nothing about other users' ids."""
    return f"No session '{session_id}' in the buffer (never stored, or already purged)."


class RetractError(Exception):
    """A retract that cannot be done; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400, code: str = "retract_failed") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class WeightTarget(Protocol):
    """The serving engine, as far as a retract needs it."""

    def served_version(self) -> int: ...

    def known_versions(self) -> list[int]:
        """Every version number the server knows (its registry), [] when it keeps none."""
        ...

    def load(self, model_path: str, version: int) -> None:
        """Serve `model_path` as `version`: the retract's rollback, never gated, never refused."""
        ...

    def sync_registry(self) -> None:
        """Let the server's weight registry mark the versions the retract took back (and delete
        their kept folders) now, not when it is next listed."""
        ...

    def served_adapters(self) -> dict[str, int] | None:
        """{name: version} of the LoRA adapters served by name; None from an engine that does not
        version them (SGLang), where a retract rolls back every adapter line the session trained."""
        ...

    def load_adapter(self, name: str, path: str, version: int) -> None:
        """Serve the adapter folder `path` under `name` as `version` (the retract's rollback)."""
        ...

    def unload_adapter(self, name: str) -> None:
        """Stop serving adapter `name` (no checkpoint predates the session); not loaded is not an error."""
        ...


class HTTPWeightTarget:
    """An engine (or the OpenClaw server) over SGLang's native HTTP API. An OpenClaw server with
    the promotion gate on recognises the rollback push as the retract's (the journal names the
    checkpoint and version) and serves it without the canary."""

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

    def _weights(self) -> dict[str, Any] | None:
        """`GET /v1/weights` of an OpenClaw server (which also reconciles its registry); None from
        an engine that has none (SGLang: 404)."""
        import httpx
        from slime.rollout.sglang_client import auth_headers

        try:
            resp = httpx.get(self.url + "/v1/weights", headers=auth_headers(), timeout=60)
        except httpx.HTTPError as exc:
            raise RetractError(f"cannot reach the server at {self.url}: {exc}", status=502) from exc
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise RetractError(f"GET {self.url}/v1/weights -> HTTP {resp.status_code}: {resp.text[:300]}", status=502)
        return resp.json()

    def known_versions(self) -> list[int]:
        listing = self._weights()
        return [int(v["version"]) for v in listing["data"]] if listing else []

    def load(self, model_path: str, version: int) -> None:
        from slime.rollout.sglang_client import SGLangClientError
        from slime.utils.weight_sync import push_to_engines

        try:
            push_to_engines([self.url], model_path, version, timeout_s=self.timeout_s)
        except SGLangClientError as exc:
            raise RetractError(f"rolling back: {exc}", status=502) from None

    def sync_registry(self) -> None:
        self._weights()

    def served_adapters(self) -> dict[str, int] | None:
        from slime.rollout.sglang_client import SyncSGLangClient
        from slime.utils.weight_sync import adapter_versions, server_info

        with SyncSGLangClient(self.url, timeout=30) as client:
            return adapter_versions(server_info(client))

    def load_adapter(self, name: str, path: str, version: int) -> None:
        from slime.rollout.sglang_client import SGLangClientError
        from slime.utils.weight_sync import push_to_engines

        try:
            push_to_engines([self.url], path, version, timeout_s=self.timeout_s, adapter_name=name)
        except SGLangClientError as exc:
            raise RetractError(f"rolling back adapter {name!r}: {exc}", status=502) from None

    def unload_adapter(self, name: str) -> None:
        from slime.rollout.sglang_client import SGLangClientError, SyncSGLangClient

        with SyncSGLangClient(self.url, timeout=self.timeout_s) as client:
            try:
                client.unload_lora_adapter(name)
            except SGLangClientError as exc:
                if "not loaded" not in str(exc):
                    raise RetractError(f"unloading adapter {name!r}: {exc}", status=502) from None


@dataclass
class AdapterLine:
    """One LoRA adapter served by name that the session trained: its own line of versions."""

    adapter: str
    consumers: list[str]
    trained_versions: list[int]
    first_version: int | None  # None: only an earlier retract of the same session id trained it
    served_version: int | None  # at planning time; None: not loaded, or the engine does not say
    # {"path", "weight_version", "step"}: its trainer's newest checkpoint before the session;
    # None: unload it (the user is then served the served weights)
    rollback_to: dict[str, Any] | None
    taint: list[list[int]] = field(default_factory=list)  # versions of this adapter holding the session


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
    # The highest weight version that existed at planning time (buffer, registry, engine) and the
    # versions the session went into: [[first, highest], ...] (inclusive; earlier retracts of the
    # same session id kept). Versions made later get higher numbers (`ledger.weight_version_floor`).
    max_version: int | None = None
    taint: list[list[int]] = field(default_factory=list)
    # The fields above are the served weights' line; each adapter the session trained is its own.
    adapters: list[AdapterLine] = field(default_factory=list)

    @property
    def needs_rollback(self) -> bool:
        return self.first_version is not None and self.served_version is not None \
            and self.served_version >= self.first_version

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RetractPlan:
        """A journal row's plan (rows written before adapters were planned have none)."""
        lines = [AdapterLine(**line) for line in data.get("adapters") or []]
        return cls(**{**data, "adapters": lines})


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
    removed_debug_dumps: list[str] = field(default_factory=list)
    retracted_versions: list[list[int]] = field(default_factory=list)  # = the plan's taint
    # Per adapter line: {"adapter", "served_version_before", "served_version" (None: not served),
    # "rolled_back_to", "retracted_versions"}
    adapters: list[dict[str, Any]] = field(default_factory=list)
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
    d = buffer.directory / TOPK_DIR_NAME
    out = []
    for t in turns:
        if t.prompt_ids and t.response_ids:
            p = d / f"{tokens_key(list(t.prompt_ids) + list(t.response_ids))}.json"
            if p.exists():
                out.append(str(p))
    return out


def plan_retract(buffer: TrajectoryBuffer, session_id: str, served_version: int | None, policy: str = "stop",
                 known_versions: list[int] | None = None, earlier_plan: dict[str, Any] | None = None,
                 served_adapters: dict[str, int] | None = None) -> RetractPlan:
    """What a retract of `session_id` will do (nothing is touched). `earlier_plan`: the journal's
    plan of an earlier retract of the same session id, whose retracted versions stay retracted."""
    if policy not in POLICIES:
        raise RetractError(f"'policy' must be one of {POLICIES} (stop: drop the training after the rollback point; "
                           f"requeue: give its other turns back to the trainer), got {policy!r}")
    turns = buffer.session_turns(session_id)
    rows = buffer.ledger(session_id=session_id, valid_only=True)
    exports = buffer.exports_of(session_id)
    if not turns and not rows and not exports and session_id not in buffer.session_ids():
        raise RetractError(missing_session_message(session_id), status=404, code="session_not_found")
    served_rows = [r for r in rows if r["adapter"] == SERVED_WEIGHTS]
    trained_versions = sorted({int(r["weight_version"]) for r in served_rows})
    first_version = trained_versions[0] if trained_versions else None
    rollback_to: dict[str, Any] | None = None
    if served_rows:
        rollback_to = _newest_checkpoint_before(served_rows, first_version)
        if rollback_to is None:
            bases = sorted({r["base_model"] for r in served_rows if r["base_model"]})
            if len(bases) != 1:
                raise RetractError(f"session '{session_id}' was trained on, no checkpoint predates it, and the ledger "
                                   f"names {len(bases)} base models ({bases}): cannot tell what to roll back to",
                                   status=409)
            rollback_to = {"path": bases[0], "weight_version": 0, "step": None}
    all_versions = {int(r["weight_version"]) for r in buffer.ledger(valid_only=True, adapter=SERVED_WEIGHTS)}
    affected: set[int] = set()
    adapter_versions = served_adapters if served_adapters is not None else {}
    max_version = max([highest_weight_version(buffer), served_version or 0, *(known_versions or []),
                       *adapter_versions.values()])
    earlier = earlier_plan or {}
    taint = [list(r) for r in taint_ranges(earlier)] if earlier else []
    if first_version is not None:
        affected = {v for v in all_versions if v >= first_version}
        if served_version is not None and served_version >= first_version:
            affected.add(served_version)
        taint.append([first_version, max(max_version, first_version)])
    return RetractPlan(
        session_id=session_id, policy=policy, turn_ids=[int(t.turn_id) for t in turns],
        consumers=sorted({r["consumer_id"] for r in rows}), trained_versions=trained_versions,
        first_version=first_version, served_version=served_version, affected_versions=sorted(affected),
        rollback_to=rollback_to, remove_checkpoints=_checkpoints_after(rows), exports=exports,
        topk_files=_topk_files(buffer, turns), max_version=max_version, taint=taint,
        adapters=_adapter_lines(rows, adapter_versions, max_version, earlier),
    )


def _checkpoints_after(rows: list[dict[str, Any]]) -> list[str]:
    """The checkpoints of the trainers that wrote `rows` taken at or after their first step with
    the session: they hold it, and are deleted."""
    remove = []
    for save_dir in sorted({r["save_dir"] for r in rows if r["save_dir"]}):
        first_step = min(int(r["step"]) for r in rows if r["save_dir"] == save_dir)
        remove += [str(path) for path, meta in _checkpoints(save_dir) if int(meta.rollout_id) >= first_step]
    return remove


def _newest_checkpoint_before(rows: list[dict[str, Any]], first_version: int | None) -> dict[str, Any] | None:
    """The newest checkpoint of the trainers that wrote `rows` (one weight line's) from before
    their first step with the session and below the line's first version holding it, or None."""
    candidates = []
    for save_dir in sorted({r["save_dir"] for r in rows if r["save_dir"]}):
        first_step = min(int(r["step"]) for r in rows if r["save_dir"] == save_dir)
        candidates += [{"path": str(path), "weight_version": int(meta.weight_version), "step": int(meta.rollout_id)}
                       for path, meta in _checkpoints(save_dir)
                       if int(meta.rollout_id) < first_step and first_version is not None
                       and int(meta.weight_version) < first_version]
    return max(candidates, key=lambda c: (c["weight_version"], c["step"])) if candidates else None


def _adapter_lines(rows: list[dict[str, Any]], served: dict[str, int], max_version: int,
                   earlier: dict[str, Any]) -> list[AdapterLine]:
    """One AdapterLine per adapter the session trained (and per adapter an earlier retract of the
    same session id took versions of: those stay taken)."""
    names = sorted({r["adapter"] for r in rows if r["adapter"] != SERVED_WEIGHTS}
                   | {line["adapter"] for line in earlier.get("adapters") or []})
    lines = []
    for name in names:
        mine = [r for r in rows if r["adapter"] == name]
        versions = sorted({int(r["weight_version"]) for r in mine})
        first = versions[0] if versions else None
        taint = [list(r) for r in taint_ranges(earlier, name)] if earlier else []
        if first is not None:
            taint.append([first, max(max_version, first)])
        lines.append(AdapterLine(adapter=name, consumers=sorted({r["consumer_id"] for r in mine}),
                                 trained_versions=versions, first_version=first, served_version=served.get(name),
                                 rollback_to=_newest_checkpoint_before(mine, first), taint=taint))
    return lines


# ------------------------------------------------------------------ steps
def _pause_point(state: str) -> None:
    if env_value(PAUSE_ENV) == state:
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


def debug_dumps(buffer: TrajectoryBuffer) -> list[Path]:
    """Every rollout debug dump the registered trainers wrote (`--save-debug-rollout-data`: a
    folder of rollout_<id>.jsonl, or a path template with {rollout_id})."""
    found: set[Path] = set()
    for row in buffer.trainer_files(DEBUG_ROLLOUT_DATA):
        where = row["path"]
        if "{rollout_id}" in where:
            pattern = "*".join(glob.escape(part) for part in where.split("{rollout_id}"))
        else:
            pattern = os.path.join(glob.escape(where), "rollout_*.jsonl")
        found.update(Path(p) for p in glob.glob(pattern) if os.path.isfile(p))
    return sorted(found)


def _dump_holds(path: Path, session_id: str) -> bool:
    """Whether a dump (one Sample per JSON line, as slime writes them) holds a sample of the
    session. A line that is not JSON is judged by its bytes: the session id in it counts."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return False
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            sample = json.loads(line)
        except ValueError:
            if session_id.encode() in line:
                return True
            continue
        if isinstance(sample, dict) and sample.get("session_id") == session_id:
            return True
    return False


def _remove_debug_dumps(buffer: TrajectoryBuffer, session_id: str, result: RetractResult) -> None:
    """Delete the dumps that hold the session (a dump is one rollout: replaying it without some of
    its samples would train on a different batch than the one recorded, so it goes whole)."""
    for path in debug_dumps(buffer):
        if _dump_holds(path, session_id):
            path.unlink(missing_ok=True)
            if str(path) not in result.removed_debug_dumps:
                result.removed_debug_dumps.append(str(path))


def _purge(buffer: TrajectoryBuffer, plan: RetractPlan, result: RetractResult) -> None:
    for path in plan.exports:
        if rewrite_export(path, plan.session_id):
            result.rewritten_exports.append(path)
    for path in plan.topk_files:
        Path(path).unlink(missing_ok=True)
    result.removed_checkpoints = _remove_checkpoints(plan.remove_checkpoints, plan.rollback_to)
    _remove_debug_dumps(buffer, plan.session_id, result)
    progress = {k: getattr(result, k) for k in ("rewritten_exports", "removed_checkpoints", "removed_debug_dumps")}
    result.removed = buffer.purge_retracted(plan.session_id, progress, consumers=plan.consumers,
                                            removed_checkpoints=[Path(c).name for c in plan.remove_checkpoints])


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


def _rollback_adapters(plan: RetractPlan, engine: WeightTarget | None, result: RetractResult) -> dict[str, int]:
    """Roll back each adapter line that serves a version holding the session: load its trainer's
    checkpoint from before the session under the adapter's name, or unload it. Returns, per
    adapter, the version its ledger stays valid up to."""
    lines = [line for line in plan.adapters if line.first_version is not None]
    if not lines:
        return {}
    if engine is None:
        raise RetractError(f"session '{plan.session_id}' trained LoRA adapter(s) {[x.adapter for x in lines]}: the "
                           "retract must roll them back on the engine that serves them", status=409)
    served = engine.served_adapters()
    valid_up_to: dict[str, int] = {}
    for line in lines:
        before = None if served is None else served.get(line.adapter)
        entry: dict[str, Any] = {"adapter": line.adapter, "served_version_before": before, "served_version": before,
                                 "rolled_back_to": None, "retracted_versions": line.taint}
        result.adapters.append(entry)
        assert line.first_version is not None  # (the lines were chosen for it; this tells the type checker)
        # Not loaded, or serving a version from before the session: nothing served holds it. An
        # engine that cannot say (None) is rolled back regardless; so is a line the plan saw served
        # (a crash between the load and `done` leaves the rollback version served: loading it again is harmless).
        planned_served = line.served_version is not None and line.served_version >= line.first_version
        if served is not None and (before is None or before < line.first_version) and not planned_served:
            valid_up_to[line.adapter] = line.first_version - 1
            continue
        target = line.rollback_to
        if target is None:
            engine.unload_adapter(line.adapter)
            entry["served_version"] = None
            valid_up_to[line.adapter] = 0
            result.actions.append(f"unloaded adapter {line.adapter!r} (no checkpoint of its trainer predates the "
                                  "session): its user is served the served weights")
            continue
        engine.load_adapter(line.adapter, str(target["path"]), int(target["weight_version"]))
        entry["served_version"] = int(target["weight_version"])
        entry["rolled_back_to"] = target
        valid_up_to[line.adapter] = int(target["weight_version"])
        result.actions.append(f"rolled adapter {line.adapter!r} back from version {before} to "
                              f"{target['weight_version']} ({target['path']})")
    return valid_up_to


def _known_versions(engine: WeightTarget | None) -> list[int]:
    known = getattr(engine, "known_versions", None)
    return list(known()) if known is not None else []


def format_ranges(taint: list[list[int]] | list[tuple[int, int]]) -> str:
    """Inclusive version ranges as people read them: "3, 5-7"."""
    return ", ".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in taint)


def retract_session(buffer: TrajectoryBuffer, session_id: str, engine: WeightTarget | None,
                    policy: str = "stop") -> RetractResult:
    """Retract `session_id` (see the module docstring). `engine` None is allowed only when the
    session was never trained on (the CLI without --engine-url): a RetractError otherwise,
    before anything is touched."""
    t0 = time.perf_counter()
    journal = buffer.retraction(session_id)
    if journal is not None and journal["state"] == "done" and not buffer.has_session(session_id):
        return RetractResult(**journal["result"]) if journal["result"] else RetractResult(session_id, "done")
    resumed = journal is not None and journal["state"] != "done"
    if resumed:
        plan = RetractPlan.from_json(journal["plan"])  # resume what a crash interrupted
        state = journal["state"]
    else:
        served = engine.served_version() if engine is not None else None
        adapters = engine.served_adapters() if engine is not None else None
        # The same session id used again after an earlier retract: the versions that one took back stay taken back.
        plan = plan_retract(buffer, session_id, served, policy, _known_versions(engine),
                            journal["plan"] if journal is not None else None, adapters)
        trained = [f"weight version(s) {plan.trained_versions}"] if plan.trained_versions else []
        trained += [f"adapter {x.adapter!r} version(s) {x.trained_versions}" for x in plan.adapters if x.trained_versions]
        if trained and engine is None:
            raise RetractError(f"session '{session_id}' was trained into {', '.join(trained)}: "
                               "the retract must check (and maybe roll back) the served weights; pass the engine "
                               "(--engine-url URL of the server), or retract through the server's "
                               f"POST /v1/sessions/{session_id}/retract", status=409)
        buffer.begin_retraction(session_id, plan.to_json())
        state = "planned"
        _pause_point("planned")
    result = RetractResult(session_id=session_id, state="done", affected_versions=plan.affected_versions,
                           stopped_consumers=plan.consumers, retracted_versions=plan.taint)
    if resumed:
        result.actions.append(f"resumed a retract interrupted in state '{state}'")
        done_so_far = journal["result"] or {}  # what the purge removed before the crash (from `deleted` on)
        for key in ("removed", "rewritten_exports", "removed_checkpoints", "removed_debug_dumps"):
            if key in done_so_far:
                setattr(result, key, done_so_far[key])
    if state == "planned":
        _purge(buffer, plan, result)
        state = "deleted"
        _pause_point("deleted")
    if state == "deleted":
        buffer.finish_purge(plan.session_id)
        result.actions.append(f"removed {result.removed.get('turns', 0)} turn(s) (judgements and hints with them), "
                              f"{result.removed.get('feedback', 0)} feedback row(s), "
                              f"{len(result.rewritten_exports)} export file(s) rewritten, "
                              f"{len(plan.topk_files)} top-k file(s), {len(result.removed_checkpoints)} checkpoint(s), "
                              f"{len(result.removed_debug_dumps)} rollout debug dump(s); WAL truncated")
        _pause_point("purged")
    rolled = _rollback(plan, engine, result)
    adapters_valid_up_to = _rollback_adapters(plan, engine, result)
    if rolled is not None:
        result.actions.append(f"rolled the served weights back from version {result.served_version_before} to "
                              f"{rolled} ({plan.rollback_to['path'] if plan.rollback_to else ''})")
    elif plan.trained_versions:
        result.actions.append(f"the served version {result.served_version_before} predates the session: nothing to "
                              "roll back")
    # A rollout a trainer had already taken before the plan may have dumped the session since.
    _remove_debug_dumps(buffer, plan.session_id, result)
    if plan.taint:
        if engine is not None and hasattr(engine, "sync_registry"):
            engine.sync_registry()
        result.actions.append(f"weight version(s) {format_ranges(plan.taint)} hold the session: never served, promoted, "
                              "rolled back to or loaded again (kept folders deleted)")
    if plan.consumers:
        result.actions.append(f"trainer(s) {plan.consumers} stop at their next rollout (policy '{plan.policy}'): resume from "
                              f"{plan.rollback_to['path'] if plan.rollback_to else 'the base model'}")
    result.seconds = round(time.perf_counter() - t0, 3)
    served_above = rolled if rolled is not None else \
        (plan.first_version - 1 if plan.first_version is not None else None)
    invalidate_above = {**({SERVED_WEIGHTS: served_above} if served_above is not None else {}), **adapters_valid_up_to}
    requeue = plan.consumers if plan.policy == "requeue" and invalidate_above else []
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
    """Whether weight version `served_version` holds no turn of `session_id`: neither a valid ledger
    row up to it nor, for a retracted session, one of the versions the retract took back."""
    return session_id not in version_sessions(buffer, served_version)


class RetractedVersionError(RetractError):
    """A weight version holds a retracted session: it is never served again (HTTP 409)."""

    def __init__(self, version: int, sessions: list[str], action: str, adapter: str = SERVED_WEIGHTS) -> None:
        names = ", ".join(f"'{s}'" for s in sessions)
        what = f"version {version} of LoRA adapter {adapter!r}" if adapter != SERVED_WEIGHTS else \
            f"weight version {version}"
        super().__init__(f"cannot {action} {what}: it was trained on retracted session(s) {names}; "
                         "a version that holds a retracted session is never served again (GET /v1/retractions)",
                         status=409, code="weight_version_retracted")
        self.version = version
        self.sessions = sessions


class JournalView:
    """The retract journal as the server's weight registry reads it (`promotion.RetractJournal`):
    read afresh on every call, so a retract run by another process (the CLI) counts at once."""

    def __init__(self, get_buffer: Callable[[], TrajectoryBuffer | None]) -> None:
        self._get = get_buffer

    def retracted_in(self, version: int, adapter: str = SERVED_WEIGHTS) -> list[str]:
        buffer = self._get()
        return retracted_in(buffer, version, adapter) if buffer is not None else []

    def retracted_ranges(self, adapter: str) -> list[tuple[int, int]]:
        buffer = self._get()
        return retracted_ranges(buffer, adapter) if buffer is not None else []

    def rollback_target(self, model_path: str, version: int,
                        adapter: str = SERVED_WEIGHTS) -> tuple[str, dict[str, Any]] | None:
        """(session id, target) of the unfinished retract that rolls `adapter`'s line back to
        `model_path` as `version`, else None."""
        buffer = self._get()
        if buffer is None:
            return None
        for j in buffer.retractions(unfinished=True):
            plan = j["plan"]
            targets = [plan.get("rollback_to")] if adapter == SERVED_WEIGHTS else \
                [line.get("rollback_to") for line in plan.get("adapters") or [] if line["adapter"] == adapter]
            for target in targets:
                if target and int(target["weight_version"]) == int(version) and \
                        os.path.realpath(str(target["path"])) == os.path.realpath(model_path):
                    return j["session_id"], target
        return None
