"""Gated promotion with rollback: which weight version is served, and why.

The trainer writes weights and pushes them as before (`POST /update_weights_from_disk`). With
the gate on, the server answers that push here instead of in the engine: the folder is kept in
the control directory as a *candidate*, the canary (`openclaw.control.canary`) scores it and the
version being served on a private engine instance, and only a candidate that passes is loaded
into the serving engine. A refused candidate stays on disk, is not served, and is reported
(`GET /v1/weights`, the dashboard, the server log). Serving never stops: the canary runs beside
the serving engine and the engine swaps weights between two decode steps.

`promote VERSION` loads any kept version (the user decides; no canary), `rollback VERSION`
loads an older kept version and marks the versions after it `rolled_back`. The registry is one
JSON file (`versions.json`, replaced atomically) next to the kept folders `v<N>/`.

Retracts (`openclaw.control.retract`) overrule everything here: a version a retracted session
went into is `retracted`, its kept folder is deleted, and every way into service (the gated
push, promote, rollback, a retract's own rollback) refuses it; the retract's rollback is served
without the canary and without waiting for one. A version number is registered once: a push
under a number the registry holds is refused (numbers name one set of weights for good).

Each LoRA adapter served by name (a user's, with per-user training) is a weight line of its own:
`AdapterSlot` shows one adapter to a controller as an engine, with a registry of its own
(`<control dir>/adapters/<name>/`), so a push of the adapter (`POST /load_lora_adapter`) passes
the same gate, and promote and rollback act on that adapter alone. Its version `NOT_LOADED`
stands for "no adapter: the user is served the served weights".
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from openclaw.control.canary import Canary, CanaryScores
from openclaw.control.retract import RetractedVersionError

log = logging.getLogger("openclaw.control.promotion")

SERVING, CANDIDATE, REFUSED, RETIRED, ROLLED_BACK, FAILED, RETRACTED = (
    "serving", "candidate", "refused", "retired", "rolled_back", "failed", "retracted")
REGISTRY_FILE = "versions.json"


class PromotionError(Exception):
    """A promote/rollback/push the controller refuses; `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str, *, code: str = "weight_version_error", param: str = "version") -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.param = param


class RetractJournal(Protocol):
    """What the controller asks the retract journal (`openclaw.control.retract.JournalView`)."""

    def retracted_in(self, version: int) -> list[str]:
        """The retracted sessions weight version `version` holds (`openclaw.control.ledger.retracted_in`)."""
        ...

    def rollback_target(self, model_path: str, version: int) -> tuple[str, dict[str, Any]] | None:
        """(session id, rollback target) of the unfinished retract that rolls back to this, else None."""
        ...


@dataclass
class WeightVersion:
    version: int
    path: str
    status: str
    submitted_at: float
    canary: dict[str, Any] | None = None
    history: list[dict[str, Any]] = field(default_factory=list)  # [{"at", "event", "by", "note"}]

    def event(self, event: str, by: str, note: str = "") -> None:
        self.history.append({"at": time.time(), "event": event, "by": by, "note": note})


class VersionRegistry:
    """`versions.json` in `directory` (0700): every version the server was offered. Without a
    directory the registry lives in memory and kept folders go to a temp folder made on first use."""

    def __init__(self, directory: Path | None) -> None:
        self._persistent = directory is not None
        self._dir = Path(directory) if directory is not None else None
        self._lock = threading.Lock()
        self._versions: dict[int, WeightVersion] = {}
        if self._dir is None:
            return
        self._dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self._file.exists():
            for row in json.loads(self._file.read_text())["versions"]:
                self._versions[int(row["version"])] = WeightVersion(**row)

    @property
    def directory(self) -> Path:
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="openclaw-weight-versions-"))
        return self._dir

    @property
    def _file(self) -> Path:
        return self.directory / REGISTRY_FILE

    def all(self) -> list[WeightVersion]:
        with self._lock:
            return sorted(self._versions.values(), key=lambda v: v.version)

    def get(self, version: int) -> WeightVersion | None:
        with self._lock:
            return self._versions.get(version)

    def serving(self) -> WeightVersion | None:
        with self._lock:
            return next((v for v in self._versions.values() if v.status == SERVING), None)

    def put(self, entry: WeightVersion) -> None:
        with self._lock:
            self._versions[entry.version] = entry
            self._save()

    def save(self) -> None:
        with self._lock:
            self._save()

    def _save(self) -> None:
        if not self._persistent:
            return
        tmp = self._file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"versions": [asdict(v) for v in sorted(self._versions.values(),
                                                                          key=lambda v: v.version)]}, indent=1))
        os.replace(tmp, self._file)  # a reader sees the old or the new registry, never half of one

    def owns(self, path: str | Path) -> bool:
        """Whether `path` is one of the kept folders (never a trainer's checkpoint or a model)."""
        return self._dir is not None and Path(path).resolve().parent == self._dir.resolve()

    def keep_folder(self, version: int, source: str | Path) -> Path:
        """Keep `source` as `v<version>/`: hard links when on the same file system (the
        trainer deletes its sync folders after the next push; links keep the bytes), else a copy."""
        dest = self.directory / f"v{version}"
        if dest.exists():
            shutil.rmtree(dest)
        try:
            shutil.copytree(source, dest, copy_function=os.link)
        except OSError:
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(source, dest)
        return dest


@dataclass
class Outcome:
    """What the server answers a push, a promote or a rollback with."""

    version: int
    status: str
    served_version: int
    message: str
    canary: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


NOT_LOADED = -1  # an AdapterSlot's version while no adapter of its name is loaded


class LineJournal:
    """The retract journal as one adapter's controller asks it: that adapter's versions and
    rollback targets only."""

    def __init__(self, journal: Any, adapter: str) -> None:
        self._journal = journal
        self._adapter = adapter

    def retracted_in(self, version: int) -> list[str]:
        return self._journal.retracted_in(version, self._adapter)

    def rollback_target(self, model_path: str, version: int) -> tuple[str, dict[str, Any]] | None:
        return self._journal.rollback_target(model_path, version, self._adapter)


class AdapterSlot:
    """One LoRA adapter of the serving engine, driven by a `PromotionController` as if it were an
    engine: its version and folder are the adapter's (`NOT_LOADED` and the served weights' folder
    while none is loaded), and serving a folder loads it under the adapter's name (serving the
    served weights' folder as NOT_LOADED unloads it)."""

    def __init__(self, engine: Any, name: str) -> None:
        self.engine = engine
        self.name = name

    @property
    def weight_version(self) -> int:
        return int(self.engine.lora_adapters.get(self.name, NOT_LOADED))

    @property
    def model_path(self) -> str:
        if self.name not in self.engine.lora_adapters:
            return str(self.engine.model_path)
        return self.engine.lora_adapter_paths.get(self.name, f"(loaded under {self.name!r}, folder not reported)")

    async def update_weights_from_disk(self, path: str, version: int | None) -> tuple[bool, str]:
        if version == NOT_LOADED:
            if self.name not in self.engine.lora_adapters:
                return True, f"adapter {self.name!r} is not loaded"
            return await self.engine.unload_lora_adapter(self.name)
        return await self.engine.load_lora_adapter(self.name, path, version)


class PromotionController:
    """Owns the engine's weight changes while the server runs (one at a time)."""

    def __init__(self, engine: Any, registry: VersionRegistry, canary: Canary | None, gate: bool,
                 journal: RetractJournal | None = None) -> None:
        if gate and canary is None:
            raise ValueError("the promotion gate needs a canary")
        self.engine = engine
        self.registry = registry
        self.canary = canary
        self.gate = gate
        self.journal = journal
        self._lock = asyncio.Lock()
        self._incumbent_scores: dict[int, CanaryScores] = {}
        current = registry.serving()
        if current is None or current.version != engine.weight_version:
            # First start (or the engine was restarted from another folder): what it serves now is
            # the version everything is compared with.
            for v in registry.all():
                if v.status == SERVING:
                    v.status = RETIRED
                    v.event("retired", "server", "the server restarted serving another version")
            entry = registry.get(engine.weight_version) or WeightVersion(
                engine.weight_version, engine.model_path, SERVING, time.time())
            entry.status = SERVING
            entry.event("serving", "server", "served at start-up")
            registry.put(entry)
        self.apply_retractions()

    @property
    def served_version(self) -> int:
        return int(self.engine.weight_version)

    # ------------------------------------------------------------------ retracts
    def retracted_sessions(self, version: int) -> list[str]:
        return self.journal.retracted_in(version) if self.journal is not None else []

    def refuse_retracted(self, version: int, action: str) -> None:
        """The check every way into service passes (the gated push, promote, rollback, `_serve`)."""
        sessions = self.retracted_sessions(version)
        if sessions:
            err = RetractedVersionError(version, sessions, action)
            raise PromotionError(409, str(err), code=err.code,
                                 param="weight_version" if action in ("serve", "load") else "version")

    def apply_retractions(self) -> list[int]:
        """Mark every registered version a retracted session went into `retracted` and delete its
        kept folder. Runs on every listing, push, promote and rollback, at start, and when a
        retract asks (`POST` of its rollback, `GET /v1/weights`), so no path depends on timing."""
        changed = []
        for v in self.registry.all():
            if v.status == RETRACTED:
                continue
            sessions = self.retracted_sessions(v.version)
            if not sessions:
                continue
            if self.registry.owns(v.path):
                shutil.rmtree(v.path, ignore_errors=True)
            names = ", ".join(f"'{s}'" for s in sessions)
            if v.version == self.served_version:
                log.error("weight version %d holds retracted session(s) %s and is still served: the retract "
                          "did not finish its rollback (GET /v1/retractions; `retract --pending` finishes it)",
                          v.version, names)
            v.status = RETRACTED
            v.event("retracted", "retract", f"trained on retracted session(s) {names}: kept folder deleted, "
                                            "never served again")
            changed.append(v.version)
        if changed:
            self.registry.save()
            log.warning("weight version(s) %s retracted (kept folders deleted)", changed)
        return changed

    async def retract_rollback(self, model_path: str, version: int) -> Outcome:
        """Serve a retract's rollback target: no canary, no refusal by the gate, and no wait for a
        canary check that holds the lock (a check that ends after this re-checks its candidate).
        Only what an unfinished retract names as its target (the journal) is served this way."""
        found = self.journal.rollback_target(model_path, version) if self.journal is not None else None
        if found is None:
            raise PromotionError(409, f"no unfinished retract rolls back to {model_path} as weight version {version}",
                                 code="not_a_retract_rollback", param="model_path")
        session_id, target = found
        self.refuse_retracted(version, "roll back to")
        path = model_path
        if target.get("step") is not None:
            # A trainer checkpoint: kept like a pushed version, so a later retract that deletes the
            # checkpoint leaves the served weights on disk (the canary scores them as the incumbent).
            path = str(await asyncio.to_thread(self.registry.keep_folder, version, model_path))
        entry = self.registry.get(version) or WeightVersion(version, path, CANDIDATE, time.time())
        entry.path = path
        return await self._serve(entry, "retract", f"rolled back for the retract of session '{session_id}'")

    async def submit(self, model_path: str, version: int | None, by: str = "trainer") -> Outcome:
        """A new version from the trainer: keep it, check it (gate on), serve it if it passes."""
        async with self._lock:
            self.reconcile()
            number = version if version is not None else max((v.version for v in self.registry.all()),
                                                              default=self.served_version) + 1
            self.refuse_retracted(number, "serve")
            existing = self.registry.get(number)
            if existing is not None:
                raise PromotionError(
                    409, f"weight version {number} is already registered ({existing.status}, from "
                         f"{existing.path}): a version number names one set of weights for good, so a push under it "
                         "is refused; a trainer that restarted must number its pushes after the highest version "
                         "(the buffer-draining trainers do: openclaw.control.ledger.weight_version_floor)",
                    code="weight_version_exists", param="weight_version")
            kept = await asyncio.to_thread(self.registry.keep_folder, number, model_path)
            entry = WeightVersion(number, str(kept), CANDIDATE, time.time())
            entry.event("submitted", by, f"from {model_path}")
            self.registry.put(entry)
            if not self.gate:
                return await self._serve(entry, by, "gate off: served without a canary check")
            current = self.registry.get(self.served_version)
            incumbent_path = current.path if current is not None else self.engine.model_path
            result = await asyncio.to_thread(self.canary.check, str(kept),
                                             self._incumbent_scores.get(self.served_version), incumbent_path)
            self._incumbent_scores[self.served_version] = result.incumbent
            entry.canary = result.to_dict()
            if not result.passed:
                entry.status = REFUSED
                note = "; ".join(result.reasons)
                entry.event("refused", "canary", note)
                self.registry.put(entry)
                log.warning("weight version %d refused by the canary (%.1fs): %s; still serving version %d",
                            number, result.seconds, note, self.served_version)
                return Outcome(number, REFUSED, self.served_version,
                               f"weight version {number} refused by the canary: {note}; still serving version "
                               f"{self.served_version}", entry.canary)
            log.info("weight version %d passed the canary (%.1fs)", number, result.seconds)
            self._incumbent_scores[number] = result.candidate
            if self.retracted_sessions(number):  # a retract ran while the canary did
                self.apply_retractions()
                self.refuse_retracted(number, "serve")
            return await self._serve(entry, "canary", f"canary passed in {result.seconds:.1f}s")

    async def promote(self, version: int, by: str = "user") -> Outcome:
        async with self._lock:
            self.reconcile()
            self.refuse_retracted(version, "promote")
            entry = self._kept(version)
            if entry.status == SERVING:
                return Outcome(version, SERVING, self.served_version, f"weight version {version} is already served",
                               entry.canary)
            return await self._serve(entry, by, "promoted by the user" + (" over the canary's refusal"
                                                                            if entry.status == REFUSED else ""))

    async def rollback(self, version: int, by: str = "user") -> Outcome:
        async with self._lock:
            self.reconcile()
            self.refuse_retracted(version, "roll back to")
            entry = self._kept(version)
            before = self.served_version
            if version >= before:
                raise PromotionError(409, f"rollback goes to an older version: {version} is not older than the "
                                          f"served version {before} (use promote)")
            later = [v for v in self.registry.all() if v.version > version and v.status in (SERVING, CANDIDATE)]
            out = await self._serve(entry, by, f"rolled back from version {before} "
                                               f"{'by the user' if by == 'user' else 'by ' + by}")
            for v in later:
                v.status = ROLLED_BACK
                v.event("rolled_back", by, f"rolled back to version {version}")
            self.registry.save()
            return out

    def _kept(self, version: int) -> WeightVersion:
        entry = self.registry.get(version)
        if entry is None:
            raise PromotionError(404, f"weight version {version} is not known to this server (GET /v1/weights)")
        if not Path(entry.path).is_dir():
            raise PromotionError(409, f"weight version {version} is no longer on disk ({entry.path})")
        return entry

    async def _serve(self, entry: WeightVersion, by: str, note: str) -> Outcome:
        self.refuse_retracted(entry.version, "serve")
        ok, message = await self.engine.update_weights_from_disk(entry.path, entry.version)
        if not ok:
            entry.status = FAILED
            entry.event("failed", by, message)
            self.registry.put(entry)
            raise PromotionError(400, f"weight version {entry.version} could not be loaded: {message}")
        for v in self.registry.all():
            if v.status == SERVING and v.version != entry.version:
                v.status = RETIRED
                v.event("retired", by, f"version {entry.version} served instead")
        entry.status = SERVING
        entry.event("serving", by, note)
        self.registry.put(entry)
        return Outcome(entry.version, SERVING, self.served_version, f"serving weight version {entry.version}: {note}",
                       entry.canary)

    def reconcile(self) -> None:
        """The engine may have been loaded behind the controller's back (a push with the gate off):
        record what it serves now, so the registry never lies; and apply the retract journal."""
        self._record_served()
        self.apply_retractions()

    def _record_served(self) -> None:
        version = self.served_version
        entry = self.registry.get(version)
        if entry is not None and entry.status == SERVING and entry.path == self.engine.model_path:
            return
        for v in self.registry.all():
            if v.status == SERVING:
                v.status = RETIRED
                v.event("retired", "engine", f"the engine was loaded with version {version} directly")
        entry = WeightVersion(version, self.engine.model_path, SERVING, time.time(),
                              canary=entry.canary if entry is not None and entry.path == self.engine.model_path
                              else None)
        entry.event("serving", "engine", "loaded directly (not through promote/rollback/the gate)")
        self.registry.put(entry)

    def listing(self) -> dict[str, Any]:
        self.reconcile()
        return {"object": "list", "gate": self.gate, "served_version": self.served_version,
                "data": [asdict(v) for v in self.registry.all()]}
