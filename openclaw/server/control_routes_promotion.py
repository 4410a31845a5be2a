"""Weight versions (`GET /v1/weights`, `POST /v1/weights/{version}/promote|rollback`), the gated
weight push, and the dashboard (`/dashboard`, `/dashboard/state`).

Mounted before the engine's SGLang routes, this router answers `POST /update_weights_from_disk`
(the trainer's push): a version a retracted session went into is refused (409), a retract's own
rollback is served at once (no canary), and then, with `OPENCLAW_PROMOTION_GATE=1`, the push goes
through the promotion controller (the gate sits between "checkpoint written" and "engine
updated"; the trainer keeps its protocol), or, with the gate off, to the engine's own route.
The chat server also marks its engine `weight_swap = "live"`: the trainer's push then does not
pause generation (slime.utils.weight_sync), since users are waiting on this engine.
All routes sit behind the server's API-key middleware like every other route.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.routing import APIRoute

from openclaw.control.canary import Canary, rated_turns_from_buffer
from openclaw.control.dashboard import snapshot
from openclaw.control.promotion import PromotionController, PromotionError, VersionRegistry
from openclaw.control.retract import JournalView
from openclaw.control.settings import ControlSettings
from openclaw.control.viewer import Viewer
from openclaw.httpapi.identity import scope_identity
from openclaw.server.errors import OpenAIError
from openclaw.server.prompting import user_prompt_ids
from openclaw.server.state import ServerState

log = logging.getLogger("openclaw.server")
DASHBOARD_HTML = Path(__file__).resolve().parent.parent / "control" / "static" / "dashboard.html"


class _BufferHandle:
    """The trajectory buffer, opened on first use (the intercept creates it at start-up)."""

    def __init__(self, state: ServerState) -> None:
        self._dir = state.config.rl.buffer_dir if state.config.rl.enabled else None
        self._buffer = None

    def get(self) -> Any | None:
        if self._dir is None:
            return None
        if self._buffer is None:
            from openclaw.buffer import TrajectoryBuffer

            self._buffer = TrajectoryBuffer.open(self._dir, create=False)
        return self._buffer


def _engine_push_handler(engine: Any) -> Any:
    try:
        from openclaw.engines.sglang_api import sglang_router
    except ImportError:  # no SGLang API on this server (app.py logs it): no push route to guard
        return None
    for route in sglang_router(engine).routes:
        if isinstance(route, APIRoute) and route.path == "/update_weights_from_disk":
            return route.endpoint
    return None


def promotion_router(state: ServerState, settings: ControlSettings | None = None) -> APIRouter:
    settings = settings or ControlSettings.from_env()
    engine = state.engine
    if hasattr(type(engine), "weight_swap"):
        engine.weight_swap = "live"
    buffer = _BufferHandle(state)
    canary = None
    if settings.gate:
        canary = Canary(settings.canary, engine.tokenizer, getattr(engine, "dtype", "float32"),
                        str(getattr(engine, "device", "cpu")), engine.base_model_path,
                        prompt_ids=functools.partial(user_prompt_ids, engine.tokenizer),
                        rated_turns=lambda: rated_turns_from_buffer(buffer.get(), settings.canary.session_turns)
                        if buffer.get() is not None else [])
    controller = PromotionController(engine, VersionRegistry(settings.control_dir), canary, settings.gate,
                                     journal=JournalView(buffer.get))
    state_holder: Any = state
    state_holder.promotion = controller  # the dashboard and tests reach it through app.state.openclaw
    log.info("weight versions: promotion gate %s, registry %s", "ON" if settings.gate else "off",
             settings.control_dir or "in memory (set OPENCLAW_CONTROL_DIR to keep it across restarts)")
    router = APIRouter()

    def _answer(outcome_fn):
        async def run(version: int) -> JSONResponse:
            try:
                outcome = await outcome_fn(version)
            except PromotionError as exc:
                raise OpenAIError(exc.status, str(exc), param=exc.param, code=exc.code) from None
            return JSONResponse(outcome.to_dict())
        return run

    @router.get("/v1/weights")
    async def list_weights() -> dict[str, Any]:
        return controller.listing()

    router.add_api_route("/v1/weights/{version}/promote", _answer(controller.promote), methods=["POST"])
    router.add_api_route("/v1/weights/{version}/rollback", _answer(controller.rollback), methods=["POST"])

    # With the gate off a push that passes the retract check is the engine's own route's business:
    # its handler (the same code over the same engine as the mounted one) answers it unchanged.
    engine_push = _engine_push_handler(engine)

    def push_fields(body: Any) -> tuple[str, int | None]:
        path = body.get("model_path") if isinstance(body, dict) else None
        if not isinstance(path, str) or not path:
            raise OpenAIError(400, "'model_path' (a folder) is required", param="model_path")
        try:
            version = None if body.get("weight_version") is None else int(body["weight_version"])
        except (TypeError, ValueError):
            raise OpenAIError(400, "'weight_version' must be an integer", param="weight_version") from None
        return path, version

    async def weight_push(request: Request) -> Response:
        try:
            path, version = push_fields(await request.json())
        except (ValueError, OpenAIError) as exc:
            if not settings.gate:  # the engine's route says what is wrong with it, as it always did
                return await engine_push(request)
            raise exc if isinstance(exc, OpenAIError) else OpenAIError(400, "malformed JSON body",
                                                                        param="model_path") from None
        try:
            if version is not None and controller.journal.rollback_target(path, version) is not None:
                outcome = await controller.retract_rollback(path, version)
                return JSONResponse({"success": True, "message": outcome.message, "num_paused_requests": 0,
                                     "weight_version": str(outcome.served_version), "promotion": outcome.to_dict()})
            # Without a number the engine counts on from what it serves (an engine with no integer
            # version numbers nothing a retract could name).
            served = str(engine.weight_version)
            number = version if version is not None else int(served) + 1 if served.lstrip("-").isdigit() else None
            if number is not None:
                controller.refuse_retracted(number, "load")
        except PromotionError as exc:
            raise OpenAIError(exc.status, str(exc), param=exc.param, code=exc.code) from None
        if not settings.gate:
            # The body was read above; Starlette keeps it on the request for the engine's route.
            return await engine_push(request)
        if not Path(path).is_dir():
            raise OpenAIError(400, "'model_path' must be a folder this server can read", param="model_path")
        try:
            outcome = await controller.submit(path, version)
        except PromotionError as exc:
            if exc.status == 409:  # a retracted or already registered number: the push is refused
                raise OpenAIError(exc.status, str(exc), param=exc.param, code=exc.code) from None
            return JSONResponse({"success": False, "message": str(exc)}, status_code=400)
        # The push succeeded (the version is kept) even when the canary refused to serve it:
        # the trainer goes on; what is served is in `weight_version` and GET /v1/weights.
        return JSONResponse({"success": True, "message": outcome.message, "num_paused_requests": 0,
                             "weight_version": str(outcome.served_version), "promotion": outcome.to_dict()})

    if settings.gate or engine_push is not None:
        router.add_api_route("/update_weights_from_disk", weight_push, methods=["POST"])

    @router.get("/dashboard")
    async def dashboard_page() -> FileResponse:
        return FileResponse(DASHBOARD_HTML, media_type="text/html",
                            headers={"Cache-Control": "no-store", "Content-Security-Policy":
                                     "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'"})

    @router.get("/dashboard/state")
    async def dashboard_state(request: Request) -> dict[str, Any]:
        # One user's view per key (an admin's: everything).
        return await asyncio.to_thread(snapshot, buffer.get(), controller, settings.train_log_dir,
                                       state.served_model_name, Viewer(scope_identity(request.scope)))

    return router
