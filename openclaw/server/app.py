"""The FastAPI application: OpenAI-compatible routes + SGLang's native routes on one port."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from openclaw import __version__
from openclaw.engines.base import Engine
from openclaw.server.chat import chat_completions
from openclaw.server.config import ConfigError, ServerConfig, default_served_model_name
from openclaw.server.control_routes_feedback import control_router
from openclaw.server.control_routes_promotion import promotion_router
from openclaw.server.engine_loader import load_engine
from openclaw.server.errors import OpenAIError, install_error_handlers
from openclaw.server.hooks import TurnObserver
from openclaw.server.judge_loader import judge_config, start_judge
from openclaw.server.middleware import BodyLimitMiddleware, CrossSiteGuard, IdentityMiddleware, weight_route
from openclaw.server.observer_loader import build_observer
from openclaw.server.state import ServerState

log = logging.getLogger("openclaw.server")


def _served_name(config: ServerConfig, engine: Engine) -> str:
    return config.served_model_name or default_served_model_name(engine.model_path)


def _mount_sglang_routes(app: FastAPI, engine: Engine) -> None:
    """SGLang's native API (/generate, /update_weights_from_disk, ...) from the engine package."""
    try:
        from openclaw.engines.sglang_api import sglang_router
    except ImportError:
        log.warning("openclaw.engines.sglang_api is not available: SGLang native endpoints are not served")
        return
    app.include_router(sglang_router(engine, per_user=True))


def create_app(config: ServerConfig, engine: Engine | None = None, observer: TurnObserver | None = None) -> FastAPI:
    """Build the app. Without `engine`, the configured one is loaded now (and shut down with the
    app); without `observer`, one is built from openclaw.intercept when `config.rl.enabled`."""
    if config.api_key is not None and (not config.api_key.strip() or config.api_key != config.api_key.strip()):
        raise ConfigError("the API key is blank or starts/ends with whitespace: no client could ever match it")
    keys = config.key_table()
    owns_engine = engine is None
    if engine is None:
        engine = load_engine(config.engine, served_model_name=config.served_model_name)
    owns_observer = observer is None
    if observer is None:
        observer = build_observer(config, engine)
    judge_cfg = judge_config(config)
    state = ServerState(config=config, engine=engine, served_model_name=_served_name(config, engine),
                        observer=observer)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        start = getattr(observer, "start", None)
        if owns_observer and start is not None:
            result = start()
            if hasattr(result, "__await__"):
                await result
        # Judge workers start after the observer so the buffer exists; they run in threads and
        # never sit on the request path.
        judge = start_judge(config, judge_cfg) if judge_cfg is not None else None
        try:
            yield
        finally:
            if judge is not None:
                await asyncio.to_thread(judge.stop)
            if owns_observer and observer is not None:
                await observer.aclose()
            if owns_engine:
                await engine.shutdown()
            log.info("OpenClaw-RL server stopped (engine %s)", "shut down" if owns_engine else "left to its owner")

    app = FastAPI(title="OpenClaw-RL server", version=__version__, lifespan=lifespan,
                  docs_url=None, redoc_url=None, openapi_url=None)
    app.state.openclaw = state
    install_error_handlers(app)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": state.served_model_name, "weight_version": engine.weight_version}

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [_model_card(state)]}

    @app.get("/v1/models/{model_id:path}")
    async def get_model(model_id: str) -> dict[str, Any]:
        if model_id != state.served_model_name:
            raise OpenAIError(404, f"The model '{model_id}' does not exist; this server serves "
                                   f"'{state.served_model_name}'.", param="model", code="model_not_found")
        return _model_card(state)

    app.add_api_route("/v1/chat/completions", chat_completions, methods=["POST"])

    # Before the SGLang routes: with the promotion gate on it answers the trainer's weight push.
    app.include_router(promotion_router(state))
    app.include_router(control_router(state))  # feedback, retract, ledger (openclaw/control/README.md)
    _mount_sglang_routes(app, engine)
    # The last added runs first: the cross-site guard, auth and identity, then the body limit (a
    # client without a key gets 401 whatever it sends).
    app.add_middleware(BodyLimitMiddleware, limit=config.max_body_bytes, body_timeout=config.body_timeout)
    app.add_middleware(IdentityMiddleware, keys=keys, admin_only=weight_route)
    # Without a key the Host check is what stops DNS rebinding; with one, the key does (and the
    # server may be reached under any name), unless the operator lists its names.
    app.add_middleware(CrossSiteGuard, bind_host=config.host, allowed_hosts=config.allowed_hosts,
                       allowed_origins=config.allowed_origins,
                       check_host=not config.has_keys or bool(config.allowed_hosts))
    return app


def _model_card(state: ServerState) -> dict[str, Any]:
    return {"id": state.served_model_name, "object": "model", "created": int(state.started_at),
            "owned_by": "openclaw", "root": state.engine.model_path,
            "max_model_len": state.engine.max_context_len, "weight_version": state.engine.weight_version}
