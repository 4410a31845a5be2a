"""SGLang's native HTTP API served by the embedded engine (`sglang_router(engine)`).

The trainer, the RL intercept and the server's sglang backend talk to SGLang and to this engine
through the same client (`openclaw.engines.sglang_client`). Shapes follow SGLang's
`http_server.py`: `/generate` returns `{"text", "output_ids", "meta_info"}` (a list for batch
input), `stream: true` sends SSE chunks with the cumulative text and ends with `data: [DONE]`.
Errors use OpenAI's body shape `{"error": {"message", "type", "param", "code"}}`.

Differences from SGLang, on purpose: `/pause_generation` defaults to `mode="in_place"` (keep
in-flight requests, resume them on `/continue_generation`); pass `{"mode": "abort"}` for SGLang's
abort behaviour. A request's `lora_path` names an adapter loaded by `/load_lora_adapter` (SGLang
also takes names only there); behind per-user keys a plain user may name only their own (the one
named after them), and another user's answers like a missing one. `weight_version` is a decimal string of an integer that starts at 0 and
increments on every `/update_weights_from_disk`. Every route that changes state is POST only
(`/flush_cache` too, which SGLang also answers on GET); GET answers 405.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from openclaw.engines.base import GenerationRequest, GenerationResult, TokenEvent
from openclaw.engines.sglang_protocol import ProtocolError, meta_info, parse_sampling_params, result_to_sglang
from openclaw.engines.textcheck import lone_surrogate_path
from openclaw.engines.tokenizer_lock import tokenizer_lock
from openclaw.httpapi.disconnect import unless_disconnected
from openclaw.httpapi.identity import scope_identity

_GENERATE_KEYS = {"text", "input_ids", "sampling_params", "rid", "return_logprob", "logprob_start_len",
                  "top_logprobs_num", "return_text_in_logprobs", "stream", "prompt",
                  "lora_path",
                  # accepted and ignored
                  "custom_logit_processor", "bootstrap_host", "bootstrap_port", "bootstrap_room",
                  "data_parallel_rank", "log_metrics", "return_hidden_states", "modalities",
                  # refused unless empty (_refuse_media): the embedded engine's models read text only
                  "image_data", "video_data", "audio_data",
                  "token_ids_logprob", "session_params", "priority", "routed_dp_rank", "return_routed_experts"}


def _error(status: int, message: str, param: str | None = None, code: str | None = None) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    if status == 503:
        kind = "service_unavailable_error"
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": code}}, status_code=status)


async def _json_body(request: Request, allow_empty: bool = True) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        if allow_empty:
            return {}
        raise ProtocolError("request body is empty; expected a JSON object")
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"malformed JSON body: {exc}") from None
    if not isinstance(body, dict):
        raise ProtocolError("request body must be a JSON object")
    where = lone_surrogate_path(body)
    if where is not None:
        raise ProtocolError(f"'{where}' contains a lone UTF-16 surrogate, which is not valid Unicode text", where)
    return body


def _required_text(body: dict[str, Any], key: str, what: str = "") -> str:
    """`body[key]`, a non-empty string, or a 400 naming the field (`what`: how to say what it is)."""
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise ProtocolError(f"'{key}'{what} is required", key)
    return value


def _per_item(value: Any, n: int, name: str, batched: bool) -> list[Any]:
    if batched and isinstance(value, list) and (name != "sampling_params" or all(isinstance(v, dict) for v in value)):
        if len(value) != n:
            raise ProtocolError(f"{name} has {len(value)} entries but the batch has {n}", name)
        return value
    return [value] * n


def _refuse_media(engine, body: dict[str, Any]) -> None:
    """Images (or video, audio) sent to a text-only model are an error, never silently dropped:
    the caller would get an answer to a prompt without the picture it asked about."""
    for key in ("image_data", "video_data", "audio_data"):
        value = body.get(key)
        if value not in (None, [], "") and not (isinstance(value, list) and all(v in (None, []) for v in value)):
            raise ProtocolError(f"'{key}' is not supported: the model this engine serves ({engine.model_path}) "
                                "reads text only; send text, or serve a vision-language model on SGLang", key)


def _adapter_names(body: dict[str, Any], n: int, batched: bool, loaded: dict[str, int],
                   caller: str | None) -> list[str | None]:
    """Each prompt's `lora_path`. `caller`: the plain user making the request (None: anyone may name
    any adapter); another user's adapter is refused exactly as one that is not loaded."""
    names = _per_item(body.get("lora_path"), n, "lora_path", batched)
    for name in names:
        if name is not None and not isinstance(name, str):
            raise ProtocolError("'lora_path' must be the name of a loaded LoRA adapter (or a list of names)",
                                "lora_path")
        if name is not None and ((caller is not None and name != caller) or name not in loaded):
            raise ProtocolError(f"LoRA adapter {name!r} is not loaded on this server", "lora_path")
    return names


def _build_requests(engine, body: dict[str, Any],
                    caller: str | None = None) -> tuple[list[GenerationRequest], bool, list[dict[str, Any]]]:
    unknown = set(body) - _GENERATE_KEYS
    if unknown:
        raise ProtocolError(f"unknown fields: {sorted(unknown)}", sorted(unknown)[0])
    _refuse_media(engine, body)
    text = body.get("text", body.get("prompt"))
    input_ids = body.get("input_ids")
    if (text is None) == (input_ids is None):
        raise ProtocolError("provide exactly one of 'text' or 'input_ids'", "text")
    if text is not None:
        batched = isinstance(text, list)
        texts = text if batched else [text]
        if not texts or not all(isinstance(t, str) for t in texts):
            raise ProtocolError("'text' must be a string or a non-empty list of strings", "text")
        # SGLang semantics: `text` is the rendered prompt, its control tokens are meant as tokens.
        with tokenizer_lock(engine.tokenizer):
            prompts = [engine.tokenizer.encode(t) for t in texts]
    else:
        if not isinstance(input_ids, list) or not input_ids:
            raise ProtocolError("'input_ids' must be a non-empty list of integers (or a list of such lists)", "input_ids")
        batched = isinstance(input_ids[0], list)
        prompts = input_ids if batched else [input_ids]
        for p in prompts:
            if not isinstance(p, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in p):
                raise ProtocolError("'input_ids' must contain only integers", "input_ids")
    n = len(prompts)
    sps = _per_item(body.get("sampling_params"), n, "sampling_params", batched)
    rlps = _per_item(body.get("return_logprob", False), n, "return_logprob", batched)
    starts = _per_item(body.get("logprob_start_len", -1), n, "logprob_start_len", batched)
    tops = _per_item(body.get("top_logprobs_num", 0), n, "top_logprobs_num", batched)
    rids = _per_item(body.get("rid"), n, "rid", batched)
    adapters = _adapter_names(body, n, batched, engine.lora_adapters, caller)
    with_text = bool(body.get("return_text_in_logprobs", False))
    reqs, opts = [], []
    for i in range(n):
        start = -1 if starts[i] is None else starts[i]
        top_n = tops[i] or 0
        if not isinstance(start, int) or not isinstance(top_n, int):
            raise ProtocolError("logprob_start_len and top_logprobs_num must be integers", "logprob_start_len")
        req = GenerationRequest(input_ids=tuple(prompts[i]), params=parse_sampling_params(sps[i]),
                                return_logprob=bool(rlps[i]), top_logprobs_num=top_n,
                                logprob_start_len=start if rlps[i] else -1,
                                request_id=rids[i] if isinstance(rids[i], str) and rids[i] else uuid.uuid4().hex,
                                lora_name=adapters[i])
        try:
            validate = getattr(engine, "validate", None)
            if validate is not None:
                validate(req)
        except ValueError as exc:
            raise ProtocolError(str(exc), "input_ids") from None
        reqs.append(req)
        opts.append({"tokenizer": engine.tokenizer, "return_logprob": req.return_logprob,
                     "return_text_in_logprobs": with_text, "top_logprobs_num": top_n})
    return reqs, batched, opts


async def _maybe_await(value: Any) -> Any:
    """HFEngine answers control calls synchronously; remote engines (SGLangEngine) are async."""
    if hasattr(value, "__await__"):
        return await value
    return value


def sglang_router(engine, per_user: bool = False) -> APIRouter:
    """FastAPI router with SGLang's native endpoints over `engine` (an `HFEngine`). `per_user`: the app
    resolves each request's identity (IdentityMiddleware), and a plain user's `lora_path` may name
    only their own adapter."""
    router = APIRouter()

    def caller(request: Request) -> str | None:
        if not per_user:
            return None
        identity = scope_identity(request.scope)
        return None if identity.is_admin else identity.user_id

    @router.post("/generate")
    async def generate(request: Request):
        try:
            body = await _json_body(request, allow_empty=False)
            # Tokenising long `text` prompts takes CPU time: off the event loop.
            reqs, batched, opts = await asyncio.to_thread(_build_requests, engine, body, caller(request))
        except ProtocolError as exc:
            return _error(400, str(exc), exc.param)
        if body.get("stream"):
            if batched:
                return _error(400, "stream=true is supported for a single prompt only", "stream")
            return StreamingResponse(_sse(engine, reqs[0], opts[0]), media_type="text/event-stream")
        t0 = time.perf_counter()

        async def run_all() -> list[GenerationResult]:
            return await asyncio.gather(*(engine.generate(r) for r in reqs))

        try:
            completed, results = await unless_disconnected(request, run_all())
        except ValueError as exc:
            return _error(400, str(exc), "input_ids")
        if not completed:
            return Response(status_code=499)
        latency = time.perf_counter() - t0
        out = [result_to_sglang(r, e2e_latency=latency, **o) for r, o in zip(results, opts, strict=True)]
        return JSONResponse(out if batched else out[0])

    async def _sse(engine_, req: GenerationRequest, opts: dict[str, Any]) -> AsyncIterator[bytes]:
        t0 = time.perf_counter()
        agen = engine_.stream(req)
        ids: list[int] = []
        lps: list[float] = []
        tops: list = []
        text = ""
        try:
            async for item in agen:
                if isinstance(item, TokenEvent):
                    ids.append(item.token_id)
                    text += item.text_delta
                    if item.logprob is not None:
                        lps.append(item.logprob)
                        tops.append(item.top_logprobs)
                    partial = GenerationResult(
                        request_id=req.request_id or "", prompt_ids=req.input_ids, output_ids=tuple(ids), text=text,
                        output_logprobs=tuple(lps), output_top_logprobs=tuple(tops), input_logprobs=(),
                        finish_reason=None, weight_version=engine_.weight_version)  # type: ignore[arg-type]
                    chunk = {"text": text, "output_ids": ids,
                             "meta_info": meta_info(partial, finished=False, **opts)}
                else:
                    chunk = result_to_sglang(item, e2e_latency=time.perf_counter() - t0, **opts)
                yield f"data: {json.dumps(chunk)}\n\n".encode()
        except ValueError as exc:
            yield f"data: {json.dumps({'error': {'message': str(exc), 'type': 'invalid_request_error', 'param': None, 'code': None}})}\n\n".encode()
        finally:
            await agen.aclose()
        yield b"data: [DONE]\n\n"

    @router.post("/update_weights_from_disk")
    async def update_weights_from_disk(request: Request):
        try:
            body = await _json_body(request, allow_empty=False)
            path = _required_text(body, "model_path", " (a folder)")
            version = body.get("weight_version")
            if version is not None:
                try:
                    version = int(version)
                except (TypeError, ValueError):
                    raise ProtocolError("'weight_version' must be an integer (or its decimal string)",
                                        "weight_version") from None
        except ProtocolError as exc:
            return _error(400, str(exc), exc.param)
        if body.get("abort_all_requests"):
            await _maybe_await(engine.abort(abort_all=True))
        ok, message = await engine.update_weights_from_disk(path, version)
        payload = {"success": ok, "message": message, "num_paused_requests": 0}
        return JSONResponse(payload, status_code=200 if ok else 400)

    @router.post("/load_lora_adapter")
    async def load_lora_adapter(request: Request):
        try:
            body = await _json_body(request, allow_empty=False)
            name = _required_text(body, "lora_name", " (the name requests will use)")
            path = _required_text(body, "lora_path", " (a PEFT adapter folder)")
            version = body.get("weight_version")
            if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
                raise ProtocolError("'weight_version' must be an integer", "weight_version")
        except ProtocolError as exc:
            return _error(400, str(exc), exc.param)
        ok, message = await engine.load_lora_adapter(name, path, version)
        return JSONResponse({"success": ok, "message": message, "loaded_adapters": engine.lora_adapters},
                            status_code=200 if ok else 400)

    @router.post("/unload_lora_adapter")
    async def unload_lora_adapter(request: Request):
        try:
            body = await _json_body(request, allow_empty=False)
            name = _required_text(body, "lora_name")
        except ProtocolError as exc:
            return _error(400, str(exc), exc.param)
        ok, message = await engine.unload_lora_adapter(name)
        return JSONResponse({"success": ok, "message": message, "loaded_adapters": engine.lora_adapters},
                            status_code=200 if ok else 400)

    # POST only, unlike SGLang (which answers both): a page can make a browser GET any URL with no
    # Origin header (`<img src>`), and a flush changes state. SGLang accepts the POST our clients send.
    @router.post("/flush_cache")
    async def flush_cache():
        if await _maybe_await(engine.flush_cache()):
            return Response("Cache flushed.\n", status_code=200)
        return Response(f"Cache not flushed: {engine.num_pending()} request(s) pending; retry later.\n",
                        status_code=400)

    @router.post("/pause_generation")
    async def pause_generation(request: Request):
        try:
            body = await _json_body(request)
            mode = body.get("mode", "in_place")
            if mode not in ("abort", "in_place", "retract"):
                raise ProtocolError("'mode' must be one of abort, in_place, retract", "mode")
        except ProtocolError as exc:
            return _error(400, str(exc), exc.param)
        await engine.pause_generation(abort=(mode == "abort"))
        return JSONResponse({"message": "Generation paused successfully.", "status": "ok"})

    @router.post("/continue_generation")
    async def continue_generation(request: Request):
        await engine.continue_generation()
        return JSONResponse({"message": "Generation continued successfully.", "status": "ok"})

    @router.post("/abort_request")
    async def abort_request(request: Request):
        try:
            body = await _json_body(request)
        except ProtocolError as exc:
            return _error(400, str(exc), exc.param)
        n = await _maybe_await(engine.abort(rid=body.get("rid"), abort_all=bool(body.get("abort_all", False))))
        return JSONResponse({"success": True, "num_aborted": n})

    @router.get("/get_weight_version")
    async def get_weight_version():
        return JSONResponse({"weight_version": str(engine.weight_version)})

    @router.get("/get_model_info")
    async def get_model_info():
        return JSONResponse({
            "model_path": engine.model_path, "tokenizer_path": engine.model_path, "is_generation": True,
            "preferred_sampling_params": None, "weight_version": str(engine.weight_version),
            "served_model_name": getattr(engine, "served_model_name", engine.model_path),
            "max_context_length": engine.max_context_len, "has_image_understanding": False,
            "has_audio_understanding": False})

    @router.get("/get_server_info")
    async def get_server_info():
        return JSONResponse({
            "model_path": engine.model_path, "context_length": engine.max_context_len,
            "max_running_requests": getattr(engine, "max_batch_size", None), "weight_version": str(engine.weight_version),
            "num_pending": engine.num_pending(), "paused": getattr(engine, "is_paused", False), "backend": engine.backend,
            # "live": weights swap between two decode steps, callers need not pause (weight_sync.py)
            "weight_swap": getattr(engine, "weight_swap", "pause"),
            # lookups, hits, prompt tokens whose forward was skipped (None: no prefix cache)
            "prefix_cache": getattr(engine, "prefix_cache_stats", None),
            # per-request LoRA adapters: name -> version (/load_lora_adapter)
            "lora_adapters": engine.lora_adapters})

    @router.get("/health")
    async def health():
        return Response(status_code=200)

    @router.get("/health_generate")
    async def health_generate():
        if getattr(engine, "is_paused", False):
            return Response(status_code=200)  # paused on purpose (weight sync): alive, not generating
        tok = engine.tokenizer
        with tokenizer_lock(tok):
            ids = tok.encode("ping") or [tok.eos_token_id or 0]
        req = GenerationRequest(input_ids=tuple(ids), params=parse_sampling_params({"max_new_tokens": 1, "temperature": 0}))
        try:
            await asyncio.wait_for(engine.generate(req), timeout=60)
        except Exception as exc:  # noqa: BLE001 - health reports, never raises
            return _error(503, f"generation failed: {exc}")
        return Response(status_code=200)

    return router
