"""HTTP routes of explicit feedback, retract and the provenance ledger.

    POST /v1/feedback                     {"id": "chatcmpl-..."} or {"session_id", "turn_index"},
                                          "rating": "up"|"down"|1..5, "comment"?  -> the stored rating
    GET  /v1/sessions/{id}/feedback       the session's ratings
    POST /v1/sessions/{id}/retract        {"policy": "stop"|"requeue"}?  -> what was removed, versions affected,
                                          what was served before and after
    GET  /v1/retractions                  the retract journal
    GET  /v1/ledger[?version=N|session_id=ID]   ledger rows (+ per-version summary)
    GET  /v1/sessions                     the caller's sessions (id, turns, times)
    GET  /v1/sessions/{id}                one session in the export format (`python -m openclaw.buffer export`)

Every route acts as the request's identity (`openclaw.control.viewer.Viewer`): a user's key
reads and changes only that user's sessions, named by the ids the user chose; another user's
session or turn gets the same 404 as one that does not exist. An admin sees every session by
its stored id.

Each request reads top to bottom: parse -> act on the buffer (in a worker thread: SQLite and
fsync never block the event loop) -> respond. The rules live in `openclaw.control`; errors are
OpenAI-shaped (`openclaw.server.errors`). At start, retracts a crash interrupted are finished
before the server answers (the router's lifespan runs after the app's: the buffer exists).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, FastAPI, Request

from openclaw.buffer import TrajectoryBuffer
from openclaw.buffer.exchange import export_sessions
from openclaw.buffer.provenance import SERVED_WEIGHTS
from openclaw.control.feedback import FeedbackError, FeedbackTarget, submit_feedback
from openclaw.control.ledger import ledger_summary
from openclaw.control.retract import RetractError, complete_pending, missing_session_message, retract_session
from openclaw.control.viewer import Viewer
from openclaw.engines.base import Engine
from openclaw.httpapi.identity import scope_identity
from openclaw.server.chat import parse_json_object
from openclaw.server.errors import OpenAIError
from openclaw.server.hooks import redact_attached_text
from openclaw.server.state import ServerState

log = logging.getLogger("openclaw.server.control")


class ServedEngine:
    """The server's own engine as a retract's `WeightTarget`: a retract runs in a worker thread,
    the engine's loads run on the server's event loop, through the weight registry
    (`state.promotion`) so it records the rollback and the versions the retract took back."""

    def __init__(self, engine: Engine, loop: asyncio.AbstractEventLoop, controller: Any = None) -> None:
        self.engine = engine
        self.loop = loop
        self.controller = controller

    def served_version(self) -> int:
        try:
            return int(self.engine.weight_version)
        except (TypeError, ValueError):
            raise RetractError(f"the engine reports weight version {self.engine.weight_version!r}, not an integer: "
                               "cannot tell whether it serves retracted training", status=409) from None

    def known_versions(self) -> list[int]:
        return [v.version for v in self.controller.registry.all()] if self.controller is not None else []

    def load(self, model_path: str, version: int) -> None:
        if self.controller is not None:
            from openclaw.control.promotion import PromotionError

            try:
                asyncio.run_coroutine_threadsafe(self.controller.retract_rollback(model_path, version),
                                                 self.loop).result()
            except PromotionError as exc:
                raise RetractError(f"rolling back: {exc}", status=500) from None
            return
        ok, message = asyncio.run_coroutine_threadsafe(
            self.engine.update_weights_from_disk(model_path, version), self.loop).result()
        if not ok:
            raise RetractError(f"rolling back: the engine refused {model_path}: {message}", status=500)

    def sync_registry(self) -> None:
        if self.controller is not None:
            self.controller.apply_retractions()

    def served_adapters(self) -> dict[str, int] | None:
        return dict(self.engine.lora_adapters)

    def load_adapter(self, name: str, path: str, version: int) -> None:
        ok, message = asyncio.run_coroutine_threadsafe(self.engine.load_lora_adapter(name, path, version),
                                                       self.loop).result()
        if not ok:
            raise RetractError(f"rolling back adapter {name!r}: the engine refused {path}: {message}", status=500)

    def unload_adapter(self, name: str) -> None:
        if name in self.engine.lora_adapters:
            ok, message = asyncio.run_coroutine_threadsafe(self.engine.unload_lora_adapter(name), self.loop).result()
            if not ok:
                raise RetractError(f"unloading adapter {name!r}: {message}", status=500)


class _Buffer:
    """One buffer handle for the routes, opened on first use (the intercept creates the buffer)."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.handle: TrajectoryBuffer | None = None

    def get(self) -> TrajectoryBuffer:
        if not self.state.config.rl.enabled:
            raise OpenAIError(400, "Feedback and retract act on the trajectory buffer: start the server with "
                                   "--enable-rl-intercept --rl-buffer-dir DIR.", code="rl_disabled")
        if self.handle is None:
            self.handle = TrajectoryBuffer.open(self.state.config.rl.buffer_dir, create=False)
        return self.handle

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


def _target(body: dict[str, Any]) -> FeedbackTarget:
    cid = body.get("id", body.get("completion_id"))
    if cid is not None:
        if not isinstance(cid, str) or not cid:
            raise OpenAIError(400, "'id' must be a chat completion id (a non-empty string).", param="id",
                              code="invalid_value")
        return FeedbackTarget(completion_id=cid)
    sid, idx = body.get("session_id"), body.get("turn_index", body.get("turn"))
    if sid is None or idx is None:
        raise OpenAIError(400, "Name the turn: 'id' (a chat completion id), or 'session_id' and 'turn_index'.",
                          param="id", code="missing_required_parameter")
    if not isinstance(sid, str) or not sid:
        raise OpenAIError(400, "'session_id' must be a non-empty string.", param="session_id", code="invalid_value")
    if isinstance(idx, bool) or not isinstance(idx, int) or idx < 0:
        raise OpenAIError(400, "'turn_index' must be a non-negative integer.", param="turn_index", code="invalid_value")
    return FeedbackTarget(session_id=sid, turn_index=idx)


def _viewer(request: Request) -> Viewer:
    return Viewer(scope_identity(request.scope))


def _no_session(session_id: str) -> OpenAIError:
    """The one answer for a session that is not there for this caller (missing, purged, another user's)."""
    return OpenAIError(404, f"No session '{session_id}' in the buffer (never stored, opted out, or purged).",
                       param="session_id", code="session_not_found")


def control_router(state: ServerState) -> APIRouter:
    buffers = _Buffer(state)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if state.config.rl.enabled and (state.config.rl.buffer_dir / "buffer.sqlite3").is_file():
            engine = ServedEngine(state.engine, asyncio.get_running_loop(), getattr(state, "promotion", None))
            done = await asyncio.to_thread(complete_pending, buffers.get(), engine)
            for r in done:
                log.warning("finished the retract of session %r a crash interrupted: %s", r.session_id, r.actions)
        try:
            yield
        finally:
            buffers.close()

    router = APIRouter(lifespan=lifespan)

    @router.post("/v1/feedback")
    async def feedback(request: Request) -> dict[str, Any]:
        body = parse_json_object(await request.body())
        target = _target(body)
        if "rating" not in body:
            raise OpenAIError(400, "Missing required parameter: 'rating' ('up', 'down' or 1-5).", param="rating",
                              code="missing_required_parameter")
        try:
            comment = redact_attached_text(state.observer, body.get("comment"))  # it becomes a hint: no secrets
            row = await asyncio.to_thread(submit_feedback, buffers.get(), target, body["rating"], comment,
                                          _viewer(request))
        except FeedbackError as e:
            raise OpenAIError(e.status, str(e), param=e.param, code=e.code) from None
        return {"object": "feedback", **row}

    @router.get("/v1/sessions/{session_id}/feedback")
    async def session_feedback(session_id: str, request: Request) -> dict[str, Any]:
        buf, viewer = buffers.get(), _viewer(request)
        stored = viewer.stored(session_id)
        if not viewer.owns(stored) or not await asyncio.to_thread(buf.has_session, stored):
            raise _no_session(session_id)
        rows = await asyncio.to_thread(buf.session_feedback, stored)
        return {"object": "list", "data": [{"object": "feedback", **r} for r in viewer.rows(rows)]}

    @router.get("/v1/sessions")
    async def sessions(request: Request) -> dict[str, Any]:
        viewer = _viewer(request)
        rows = await asyncio.to_thread(buffers.get().session_rows, user_id=viewer.user_id)
        return {"object": "list", "data": [{"object": "session", **r} for r in viewer.rows(rows)]}

    @router.get("/v1/sessions/{session_id}")
    async def export_session(session_id: str, request: Request) -> dict[str, Any]:
        viewer = _viewer(request)
        stored = viewer.stored(session_id)
        found = await asyncio.to_thread(lambda: list(export_sessions(buffers.get(), [stored], tokens=False,
                                                                     user_id=viewer.user_id)))
        if not found or not viewer.owns(stored):
            raise _no_session(session_id)
        return {"object": "session", **found[0], "session_id": viewer.shown(stored)}

    @router.post("/v1/sessions/{session_id}/retract")
    async def retract(session_id: str, request: Request) -> dict[str, Any]:
        raw = await request.body()
        body = parse_json_object(raw) if raw.strip() else {}
        policy = body.get("policy", "stop")
        viewer = _viewer(request)
        stored = viewer.stored(session_id)
        if not viewer.owns(stored):
            raise OpenAIError(404, missing_session_message(session_id), code="session_not_found")
        engine = ServedEngine(state.engine, asyncio.get_running_loop(), getattr(state, "promotion", None))
        try:
            result = await asyncio.to_thread(retract_session, buffers.get(), stored, engine, policy)
        except RetractError as e:
            # A 404 names the id as the caller named it (a user never sees the stored form).
            message = missing_session_message(session_id) if e.code == "session_not_found" else str(e)
            raise OpenAIError(e.status, message, param="policy" if "policy" in message else None,
                              code=e.code) from None
        return {**result.to_json(), "session_id": viewer.shown(stored)}

    @router.get("/v1/retractions")
    async def retractions(request: Request) -> dict[str, Any]:
        rows = await asyncio.to_thread(buffers.get().retractions)
        return {"object": "list", "data": _viewer(request).rows(rows)}

    @router.get("/v1/ledger")
    async def ledger(request: Request, version: int | None = None, session_id: str | None = None,
                     adapter: str | None = None) -> dict[str, Any]:
        buf, viewer = buffers.get(), _viewer(request)
        # A version number means something only within one weight line: the served weights' unless
        # `adapter` names another.
        line = adapter if adapter is not None else SERVED_WEIGHTS if version is not None else None
        rows = await asyncio.to_thread(buf.ledger, session_id=None if session_id is None else viewer.stored(session_id),
                                       max_version=version, valid_only=version is not None, adapter=line)
        mine = viewer.rows(rows)
        every = None if viewer.identity.is_admin else viewer.rows(await asyncio.to_thread(buf.ledger))
        summary = await asyncio.to_thread(ledger_summary, buf, every)
        return {"object": "list", "data": mine, "versions": summary, "served_version": state.engine.weight_version}

    return router
