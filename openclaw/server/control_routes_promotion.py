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
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.routing import APIRoute
from slime.utils.weight_sync import check_adapter_name

from openclaw.control.canary import Canary, rated_turns_from_buffer
from openclaw.control.dashboard import snapshot
from openclaw.control.promotion import (
    AdapterSlot,
    LineJournal,
    PromotionController,
    PromotionError,
    VersionRegistry,
)
from openclaw.control.retract import JournalView, RetractedVersionError, format_ranges
from openclaw.control.settings import ControlSettings
from openclaw.control.viewer import Viewer
from openclaw.httpapi.identity import scope_identity, valid_user_id
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


def _engine_handler(engine: Any, path: str) -> Any:
    """The engine's own SGLang route at `path` (the guard below answers it first), or None."""
    try:
        from openclaw.engines.sglang_api import sglang_router
    except ImportError:  # no SGLang API on this server (app.py logs it): no push route to guard
        return None
    for route in sglang_router(engine).routes:
        if isinstance(route, APIRoute) and route.path == path:
            return route.endpoint
    return None


def adapter_load_fields(body: Any) -> tuple[str, str, int | None]:
    """(name, folder, version) of a gated adapter load, or a 400 naming the field."""
    if not isinstance(body, dict):
        raise OpenAIError(400, "the body must be a JSON object with 'lora_name' and 'lora_path'", param="lora_name")
    name, path, version = body.get("lora_name"), body.get("lora_path"), body.get("weight_version")
    problem = check_adapter_name(name)
    if problem:
        raise OpenAIError(400, f"lora_name {problem}", param="lora_name")
    if not isinstance(path, str) or not Path(path).is_dir():
        raise OpenAIError(400, "'lora_path' must be a PEFT adapter folder this server can read", param="lora_path")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise OpenAIError(400, "'weight_version' must be an integer", param="weight_version")
    return name, path, version


def refuse_retracted_adapter(journal: JournalView, body: Any) -> None:
    """A LoRA adapter load (`POST /load_lora_adapter`: a per-user trainer's push, or an admin's
    load) of a version of that adapter that holds a retracted session is refused (409), as a push
    of such a version of the served weights is. Once any version of the adapter is retracted, a
    load must name its `weight_version`: the number is what the check reads. A malformed body is
    the engine's route's to refuse."""
    if not isinstance(body, dict) or not isinstance(body.get("lora_name"), str):
        return
    name, version = body["lora_name"], body.get("weight_version")
    if version is None:
        ranges = journal.retracted_ranges(name)
        if ranges:
            raise OpenAIError(409, f"LoRA adapter {name!r} has retracted versions ({format_ranges(ranges)}): a load "
                                   "must name its 'weight_version' so it can be checked", param="weight_version",
                              code="weight_version_required")
        return
    if isinstance(version, int) and not isinstance(version, bool):
        sessions = journal.retracted_in(version, name)
        if sessions:
            err = RetractedVersionError(version, sessions, "load", adapter=name)
            raise OpenAIError(409, str(err), param="weight_version", code=err.code)


def promotion_router(state: ServerState, settings: ControlSettings | None = None) -> APIRouter:
    settings = settings or ControlSettings.from_env()
    engine = state.engine
    if hasattr(type(engine), "weight_swap"):
        engine.weight_swap = "live"
    buffer = _BufferHandle(state)

    def make_canary(user_id: str | None) -> Canary | None:
        """The gate's canary; for a user's adapter it replays that user's rated turns only."""
        if not settings.gate:
            return None
        return Canary(settings.canary, engine.tokenizer, getattr(engine, "dtype", "float32"),
                      str(getattr(engine, "device", "cpu")), engine.base_model_path,
                      prompt_ids=functools.partial(user_prompt_ids, engine.tokenizer),
                      rated_turns=lambda: rated_turns_from_buffer(buffer.get(), settings.canary.session_turns, user_id)
                      if buffer.get() is not None else [])

    journal = JournalView(buffer.get)
    controller = PromotionController(engine, VersionRegistry(settings.control_dir), make_canary(None), settings.gate,
                                     journal=journal)
    adapter_controllers: dict[str, PromotionController] = {}

    def adapter_controller(name: str) -> PromotionController:
        """The weight line of the LoRA adapter served under `name` (made on first use)."""
        problem = check_adapter_name(name)
        if problem:
            raise OpenAIError(400, f"adapter {problem}", param="adapter")
        if name not in adapter_controllers:
            # Quoted and prefixed, so no name ("..", "a/b") reaches outside the adapters folder.
            folder = settings.control_dir / "adapters" / ("a-" + quote(name, safe="")) \
                if settings.control_dir is not None else None
            adapter_controllers[name] = PromotionController(
                AdapterSlot(engine, name), VersionRegistry(folder), make_canary(name if valid_user_id(name) else None),
                settings.gate, journal=LineJournal(journal, name))
        return adapter_controllers[name]

    def line(request: Request, adapter: str | None) -> PromotionController:
        """The served weights' controller, or `adapter`'s; a plain user may ask only for their own
        adapter (another's answers like one never served: no existence leak)."""
        if adapter is None:
            return controller
        identity = scope_identity(request.scope)
        if not identity.is_admin and identity.user_id != adapter:
            raise OpenAIError(404, f"No LoRA adapter {adapter!r} on this server.", param="adapter",
                              code="adapter_not_found")
        return adapter_controller(adapter)
    state_holder: Any = state
    state_holder.promotion = controller  # the dashboard and tests reach it through app.state.openclaw
    log.info("weight versions: promotion gate %s, registry %s", "ON" if settings.gate else "off",
             settings.control_dir or "in memory (set OPENCLAW_CONTROL_DIR to keep it across restarts)")
    router = APIRouter()

    def _answer(action: str):
        async def run(version: int, request: Request, adapter: str | None = None) -> JSONResponse:
            chosen = line(request, adapter)
            try:
                outcome = await getattr(chosen, action)(version)
            except PromotionError as exc:
                raise OpenAIError(exc.status, str(exc), param=exc.param, code=exc.code) from None
            return JSONResponse({**outcome.to_dict(), **({"adapter": adapter} if adapter is not None else {})})
        return run

    @router.get("/v1/weights")
    async def list_weights(request: Request, adapter: str | None = None) -> dict[str, Any]:
        listing = line(request, adapter).listing()
        return {**listing, **({"adapter": adapter} if adapter is not None else {})}

    router.add_api_route("/v1/weights/{version}/promote", _answer("promote"), methods=["POST"])
    router.add_api_route("/v1/weights/{version}/rollback", _answer("rollback"), methods=["POST"])

    # With the gate off a push that passes the retract check is the engine's own route's business:
    # its handler (the same code over the same engine as the mounted one) answers it unchanged.
    engine_push = _engine_handler(engine, "/update_weights_from_disk")

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

    engine_load_adapter = _engine_handler(engine, "/load_lora_adapter")

    async def adapter_load(request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            body = None
        refuse_retracted_adapter(journal, body)
        if not settings.gate:
            return await engine_load_adapter(request)
        name, path, version = adapter_load_fields(body)
        chosen = adapter_controller(name)
        try:
            if version is not None and chosen.journal.rollback_target(path, version) is not None:
                # A retract's rollback (the CLI's, over HTTP): served at once, no canary, no refusal.
                outcome = await chosen.retract_rollback(path, version)
            else:
                outcome = await chosen.submit(path, version)
        except PromotionError as exc:
            if exc.status == 409:
                raise OpenAIError(exc.status, str(exc), param=exc.param, code=exc.code) from None
            return JSONResponse({"success": False, "message": str(exc)}, status_code=400)
        # As a push of the served weights: kept (and reported) even when the canary refused it.
        return JSONResponse({"success": True, "message": outcome.message, "loaded_adapters": engine.lora_adapters,
                             "promotion": outcome.to_dict()})

    if engine_load_adapter is not None:
        router.add_api_route("/load_lora_adapter", adapter_load, methods=["POST"])

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
