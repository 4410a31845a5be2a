"""`POST /v1/chat/completions`: request -> plan (prompt ids + sampling) -> engine -> OpenAI JSON or SSE.

The RL observer (if any) is awaited after generation and before the client sees the reply
(non-streaming: before the body; streaming: before the final chunk and `[DONE]`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.responses import Response

from openclaw.engines.base import GenerationRequest, GenerationResult, SamplingParams, TokenEvent
from openclaw.engines.textcheck import lone_surrogate_path
from openclaw.httpapi.identity import scope_identity
from openclaw.server.context_fit import fit_to_context
from openclaw.server.errors import OpenAIError, validation_error
from openclaw.server.hooks import CompletedTurn, RLControl
from openclaw.server.multimodal import check_image_parts, messages_with_image_parts, takes_images, with_images
from openclaw.server.prompting import (
    PromptTooLong,
    RenderedPrompt,
    ToolMode,
    normalize_messages,
    render_prompt,
    tool_mode,
)
from openclaw.server.protocol import ChatCompletionRequest
from openclaw.server.reasoning import (
    REASONING_PARSERS,
    ReasoningSplit,
    ReasoningSplitter,
    prompt_opens_think,
    reasoning_token_end,
    split_reasoning,
)
from openclaw.server.rl_control import extract_rl_control
from openclaw.server.sse import ClosingStreamingResponse, sse_event
from openclaw.server.state import ServerState
from openclaw.server.toolcalls import (
    ParsedToolCall,
    ToolCallStreamFilter,
    parse_forced_call,
    parse_tool_calls,
)

log = logging.getLogger("openclaw.server")


@dataclass(frozen=True)
class ChatPlan:
    req: ChatCompletionRequest
    control: RLControl
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    mode: ToolMode
    prompt: RenderedPrompt
    gen: GenerationRequest
    completion_id: str
    created: int
    context_fit: dict[str, Any] | None = None  # what was trimmed to fit the context (None: nothing)
    # --reasoning-parser: whether generation starts inside the think block; None: no splitting
    # (no parser, or a prefilled tool call, which the output continues and cannot be reasoning).
    reasoning_inside: bool | None = None


def parse_json_object(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        raise OpenAIError(400, "The request body is empty; expected a JSON object.", code="invalid_json")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise OpenAIError(400, f"We could not parse the JSON body of your request ({exc}). The OpenAI API "
                               "expects a JSON payload.", code="invalid_json") from None
    except RecursionError:
        raise OpenAIError(400, "The JSON body is nested too deeply.", code="invalid_json") from None
    if not isinstance(body, dict):
        raise OpenAIError(400, f"The JSON body must be an object, not {type(body).__name__}.", code="invalid_json")
    where = lone_surrogate_path(body)
    if where is not None:  # found here, it fails this request alone (later it fails a shared batch/commit)
        raise OpenAIError(400, f"Invalid value for '{where}': it contains a lone UTF-16 surrogate, which is not "
                               "valid Unicode text.", param=where, code="invalid_value")
    return body


def parse_request(body: dict[str, Any]) -> ChatCompletionRequest:
    if "messages" not in body:
        raise OpenAIError(400, "Missing required parameter: 'messages'.", param="messages", code="missing_required_parameter")
    if isinstance(body["messages"], list) and not body["messages"]:
        raise OpenAIError(400, "'messages' must contain at least one message.", param="messages", code="empty_array")
    try:
        return ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        raise validation_error(exc) from None


def plan_chat(state: ServerState, req: ChatCompletionRequest, control: RLControl) -> ChatPlan:
    cfg = state.config
    # Images: decoded for models that take them, a 400 for text-only ones (multimodal.py).
    images = check_image_parts(req.messages, takes_images(state.engine), state.served_model_name)
    messages = normalize_messages(req.messages)
    # The template sees image parts (it renders the model's placeholders); the record keeps `messages`.
    chat_messages = messages_with_image_parts(req.messages, messages) if images else messages
    try:
        tools = [t.model_dump(exclude_none=True) for t in req.tools] if req.tools else None
    except RecursionError:
        raise OpenAIError(400, "'tools' is nested too deeply.", param="tools", code="invalid_value") from None
    mode = tool_mode(req)
    ctx = state.engine.max_context_len
    try:
        prompt = render_prompt(state.tokenizer, chat_messages, tools, mode,
                               allow_control_tokens=cfg.allow_control_tokens, token_budget=ctx - 1)
    except PromptTooLong as exc:
        raise OpenAIError(400, f"This model's maximum context length is {ctx} tokens. However, your messages "
                               f"resulted in at least {exc.at_least} tokens. Please reduce the length of the "
                               "messages.", param="messages", code="context_length_exceeded") from None
    except Exception as exc:  # a template that rejects this conversation (e.g. role order) is a client error
        raise OpenAIError(400, f"The chat template could not render these messages: {exc}", param="messages",
                          code="invalid_messages") from None
    requested = req.requested_max_tokens()
    # Over the window: drop oldest history / tool schemas / system middle, or 400 (context_fit.py).
    fit = fit_to_context(lambda m, t: render_prompt(state.tokenizer, m, t, mode, allow_control_tokens=cfg.allow_control_tokens),
                         chat_messages, tools, mode, prompt, context_len=ctx, requested=requested,
                         default_max_tokens=cfg.default_max_tokens)
    prompt = fit.prompt
    n_prompt = len(prompt.input_ids)
    if n_prompt >= ctx:
        raise OpenAIError(400, f"This model's maximum context length is {ctx} tokens. However, your messages "
                               f"resulted in {n_prompt} tokens. Please reduce the length of the messages.",
                          param="messages", code="context_length_exceeded")
    if requested is not None and n_prompt + requested > ctx:
        raise OpenAIError(400, f"This model's maximum context length is {ctx} tokens. However, you requested "
                               f"{n_prompt + requested} tokens ({n_prompt} in the messages, {requested} in the "
                               "completion). Please reduce the length of the messages or completion.",
                          param="max_tokens", code="context_length_exceeded")
    max_new = requested if requested is not None else min(cfg.default_max_tokens, ctx - n_prompt)
    params = SamplingParams(
        max_new_tokens=max_new,
        temperature=1.0 if req.temperature is None else req.temperature,
        top_p=1.0 if req.top_p is None else req.top_p,
        top_k=-1 if req.top_k in (None, 0) else req.top_k,
        # A forced call is one block: stop at its end rather than let the model ramble on.
        stop=req.stop_list() + (("</tool_call>",) if mode.forced_name else ()),
        seed=req.seed,
    )
    want_lp = req.logprobs or state.observer is not None
    completion_id = "chatcmpl-" + uuid.uuid4().hex
    # A user with an adapter of their own (loaded under their id: /load_lora_adapter) is served by it;
    # everyone else by the served model.
    own_adapter = control.user_id if control.user_id in state.engine.lora_adapters else None
    gen = GenerationRequest(input_ids=tuple(prompt.input_ids), params=params, return_logprob=want_lp,
                            top_logprobs_num=(req.top_logprobs or 0) if req.logprobs else 0,
                            request_id=completion_id, lora_name=own_adapter)
    if images:  # to the engine with the rendered text and the images (multimodal.py)
        gen = with_images(gen, prompt, images, str(state.engine.model_path), trimmed=fit.report is not None)
    validate = getattr(state.engine, "validate", None)  # optional engine hook: reject before streaming starts
    if validate is not None:
        try:
            validate(gen)
        except ValueError as exc:
            raise OpenAIError(400, str(exc)) from None
    parser = cfg.engine.reasoning_parser
    inside = None
    if parser is not None and not mode.prefill:
        inside = REASONING_PARSERS[parser] or prompt_opens_think(prompt.text)
    return ChatPlan(req=req, control=control, messages=messages, tools=tools, mode=mode, prompt=prompt, gen=gen,
                    completion_id=completion_id, created=int(time.time()), context_fit=fit.report,
                    reasoning_inside=inside)


# ---- shaping the output -----------------------------------------------------------------------
def split_output(plan: ChatPlan, text: str) -> tuple[str | None, list[ParsedToolCall]]:
    full = plan.prompt.prefill + text
    if not plan.mode.parse:
        return text, []
    if plan.mode.forced_name:
        return parse_forced_call(full, plan.mode.forced_name)
    return parse_tool_calls(full)


def shape_output(plan: ChatPlan, text: str) -> tuple[ReasoningSplit | None, str | None, list[ParsedToolCall]]:
    """(think block, answer content, tool calls): calls are parsed from the answer only, so a
    `<tool_call>` the model wrote while thinking is never made."""
    think = split_reasoning(text, plan.reasoning_inside) if plan.reasoning_inside is not None else None
    content, calls = split_output(plan, think.content if think is not None else text)
    return think, content, calls


def openai_finish_reason(result: GenerationResult, calls: list[ParsedToolCall]) -> str:
    if result.finish_reason.type == "length":
        return "length"
    return "tool_calls" if calls else "stop"


def logprob_entry(tokenizer: Any, token_id: int, logprob: float, tops: tuple[tuple[int, float], ...]) -> dict[str, Any]:
    def one(tid: int, lp: float) -> dict[str, Any]:
        tok = tokenizer.decode([tid], skip_special_tokens=False)
        return {"token": tok, "logprob": lp, "bytes": list(tok.encode("utf-8"))}

    entry = one(token_id, logprob)
    entry["top_logprobs"] = [one(t, lp) for t, lp in tops]
    return entry


def _ends_with_stop_token(result: GenerationResult) -> bool:
    return result.finish_reason.type == "stop" and isinstance(result.finish_reason.matched, int)


def result_logprobs(state: ServerState, plan: ChatPlan, result: GenerationResult) -> dict[str, Any] | None:
    if not plan.req.logprobs:
        return None
    n = len(result.output_ids) - (1 if _ends_with_stop_token(result) else 0)  # the EOS token is not content
    tops = result.output_top_logprobs or ((),) * len(result.output_ids)
    return {"content": [logprob_entry(state.tokenizer, result.output_ids[i], result.output_logprobs[i], tops[i])
                        for i in range(n)], "refusal": None}


def usage(result: GenerationResult) -> dict[str, int]:
    p, c = len(result.prompt_ids), len(result.output_ids)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def fingerprint(result_or_version: GenerationResult | int) -> str:
    v = result_or_version if isinstance(result_or_version, int) else result_or_version.weight_version
    return f"openclaw-wv{v}"


def reasoning_span(state: ServerState, plan: ChatPlan, result: GenerationResult,
                   think: ReasoningSplit | None) -> tuple[int, int] | None:
    """The think block's output-token range, for the intercept's loss mask."""
    if think is None or think.block_chars is None or state.observer is None:
        return None
    end = reasoning_token_end(state.tokenizer, result.output_ids, result.text, think.block_chars,
                              skip_special_tokens=plan.gen.params.skip_special_tokens)
    if end is None:
        log.warning("request %s: the think block could not be placed on the generated tokens",
                    plan.completion_id)
        return None
    return (0, end)


def completed_turn(state: ServerState, plan: ChatPlan, result: GenerationResult, content: str | None,
                   calls: list[ParsedToolCall], finish: str, think: ReasoningSplit | None = None) -> CompletedTurn:
    return CompletedTurn(
        request_id=plan.completion_id, control=plan.control, messages=plan.messages, tools=plan.tools,
        served_model=state.served_model_name, prompt_ids=list(result.prompt_ids),
        output_ids=list(result.output_ids), output_logprobs=list(result.output_logprobs), text=result.text,
        content=content, tool_calls=[c.to_openai() for c in calls] or None, finish_reason=finish,
        weight_version=result.weight_version, created_at=float(plan.created), finished_at=time.time(),
        metadata={"context_fit": plan.context_fit} if plan.context_fit else {},
        reasoning_content=think.reasoning if think is not None else None,
        reasoning_span=reasoning_span(state, plan, result, think),
    )


async def notify_observer(state: ServerState, turn: CompletedTurn) -> None:
    if state.observer is None:
        return
    try:
        await state.observer.on_turn(turn)
    except Exception as exc:  # noqa: BLE001 - the reply must not be delivered without its record
        raise OpenAIError(503, f"The RL intercept could not store this turn, so the reply was withheld: {exc}",
                          code="rl_intercept_unavailable") from exc


def _check_abort(result: GenerationResult) -> None:
    if result.finish_reason.type == "abort":
        raise OpenAIError(503, "The generation was aborted by the engine (paused with abort, or shutting down). "
                               "Retry the request.", code="generation_aborted")


# ---- non-streaming ------------------------------------------------------------------------------
async def _wait_for_disconnect(request: Request) -> None:
    """Returns when the client goes away. The body has been read, so the next ASGI message
    the server delivers is `http.disconnect`."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def _collect(state: ServerState, gen: GenerationRequest) -> GenerationResult:
    async with contextlib.aclosing(state.engine.stream(gen)) as events:
        async for ev in events:
            if isinstance(ev, GenerationResult):
                return ev
    raise RuntimeError("engine stream ended without a result")


async def generate_unless_disconnected(request: Request, state: ServerState,
                                       gen: GenerationRequest) -> GenerationResult | None:
    """Runs the generation; if the client goes away first, cancels it (freeing the batch slot)."""
    work = asyncio.ensure_future(_collect(state, gen))
    watch = asyncio.ensure_future(_wait_for_disconnect(request))
    try:
        await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not work.done():
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work
    if work.cancelled():
        return None
    return work.result()  # re-raises the engine's exception, if any


async def complete_json(request: Request, state: ServerState, plan: ChatPlan) -> Response:
    try:
        result = await generate_unless_disconnected(request, state, plan.gen)
    except ValueError as exc:  # the engine's own request validation
        raise OpenAIError(400, str(exc)) from None
    if result is None:
        return Response(status_code=499)  # client closed the connection; nobody reads this
    _check_abort(result)
    think, content, calls = shape_output(plan, result.text)
    finish = openai_finish_reason(result, calls)
    await notify_observer(state, completed_turn(state, plan, result, content, calls, finish, think))
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if plan.reasoning_inside is not None:  # as SGLang: the key is there (null without a block)
        message["reasoning_content"] = think.reasoning if think is not None else None
    if calls:
        message["tool_calls"] = [c.to_openai() for c in calls]
    body = {
        "id": plan.completion_id, "object": "chat.completion", "created": plan.created,
        "model": state.served_model_name, "system_fingerprint": fingerprint(result),
        "choices": [{"index": 0, "message": message, "logprobs": result_logprobs(state, plan, result),
                     "finish_reason": finish}],
        "usage": usage(result),
    }
    return JSONResponse(body, headers={"x-weight-version": str(result.weight_version)})


# ---- streaming ----------------------------------------------------------------------------------
class _ChunkMaker:
    def __init__(self, state: ServerState, plan: ChatPlan) -> None:
        self.base = {"id": plan.completion_id, "object": "chat.completion.chunk", "created": plan.created,
                     "model": state.served_model_name}
        self.include_usage = bool(plan.req.stream_options and plan.req.stream_options.include_usage)

    def __call__(self, delta: dict[str, Any], finish: str | None = None, logprobs: Any = None,
                 version: int | None = None) -> str:
        chunk = dict(self.base)
        if version is not None:
            chunk["system_fingerprint"] = fingerprint(version)
        chunk["choices"] = [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]
        if self.include_usage:
            chunk["usage"] = None
        return sse_event(chunk)

    def usage_chunk(self, result: GenerationResult) -> str:
        chunk = dict(self.base, system_fingerprint=fingerprint(result), choices=[], usage=usage(result))
        return sse_event(chunk)


async def stream_chat(state: ServerState, plan: ChatPlan) -> AsyncIterator[str]:
    make = _ChunkMaker(state, plan)
    want_lp = plan.req.logprobs
    filt = ToolCallStreamFilter() if plan.mode.parse else None
    splitter = ReasoningSplitter(plan.reasoning_inside) if plan.reasoning_inside is not None else None
    pending_lp: list[dict[str, Any]] = []
    result: GenerationResult | None = None
    version = state.engine.weight_version

    def lp_payload() -> dict[str, Any] | None:
        if not want_lp:
            return None
        out = {"content": list(pending_lp), "refusal": None}
        pending_lp.clear()
        return out

    yield make({"role": "assistant", "content": ""}, version=version)
    if filt is not None and plan.prompt.prefill:
        filt.feed(plan.prompt.prefill)
    try:
        async with contextlib.aclosing(state.engine.stream(plan.gen)) as events:
            async for ev in events:
                if isinstance(ev, TokenEvent):
                    if want_lp and ev.logprob is not None:
                        pending_lp.append(logprob_entry(state.tokenizer, ev.token_id, ev.logprob, ev.top_logprobs))
                    text = ev.text_delta
                    if splitter is not None:
                        thought, text = splitter.feed(text)
                        if thought:
                            yield make({"reasoning_content": thought}, logprobs=lp_payload(), version=version)
                    text = filt.feed(text) if filt is not None and text else text
                    if text:
                        yield make({"content": text}, logprobs=lp_payload(), version=version)
                else:
                    result = ev
    except ValueError as exc:  # the engine rejected the request before generating anything
        yield sse_event(OpenAIError(400, str(exc)).body())
        return
    except Exception as exc:  # noqa: BLE001 - headers are sent: report in-band, as OpenAI does
        log.exception("engine failed during a streamed completion")
        yield sse_event(OpenAIError(500, f"Internal server error: {type(exc).__name__}: {exc}").body())
        return
    if result is None:
        yield sse_event(OpenAIError(500, "engine stream ended without a result").body())
        return
    if result.finish_reason.type == "abort":
        yield sse_event(OpenAIError(503, "The generation was aborted by the engine. Retry the request.",
                                    code="generation_aborted").body())
        return
    if want_lp and _ends_with_stop_token(result) and pending_lp:
        pending_lp.pop()  # the EOS token is not content
    if splitter is not None:
        thought, text = splitter.finish()
        if thought:
            yield make({"reasoning_content": thought}, logprobs=lp_payload(), version=result.weight_version)
        text = filt.feed(text) if filt is not None and text else text
        if text:
            yield make({"content": text}, logprobs=lp_payload(), version=result.weight_version)
    calls: list[ParsedToolCall] = []
    if filt is not None:
        tail, calls = filt.finish()
        if plan.mode.forced_name and not calls:
            _, calls = parse_forced_call(plan.prompt.prefill + result.text, plan.mode.forced_name)
            tail = ""
        if tail:
            yield make({"content": tail}, logprobs=lp_payload(), version=result.weight_version)
        if calls:
            delta = {"tool_calls": [dict(c.to_openai(), index=i) for i, c in enumerate(calls)]}
            yield make(delta, logprobs=lp_payload(), version=result.weight_version)
    think, content, _ = shape_output(plan, result.text)
    finish = openai_finish_reason(result, calls)
    try:
        await notify_observer(state, completed_turn(state, plan, result, content, calls, finish, think))
    except OpenAIError as err:
        yield sse_event(err.body())
        return
    yield make({}, finish=finish, logprobs=lp_payload(), version=result.weight_version)
    if make.include_usage:
        yield make.usage_chunk(result)
    yield "data: [DONE]\n\n"


# ---- the route ----------------------------------------------------------------------------------
def prepare_chat(state: ServerState, headers: Mapping[str, str], raw: bytes, user_id: str) -> ChatPlan:
    """Everything between the bytes and the engine: parse, validate, render, tokenise. The turn
    belongs to `user_id` (the request's identity)."""
    body = parse_json_object(raw)
    control, body = extract_rl_control(headers, body, user_id)
    req = parse_request(body)
    return plan_chat(state, req, control)


async def chat_completions(request: Request) -> Response:
    state: ServerState = request.app.state.openclaw
    raw = await request.body()
    # Parsing and tokenising a large body takes seconds of CPU: in a worker thread, so the event
    # loop keeps answering other clients (and /health) meanwhile.
    user_id = scope_identity(request.scope).user_id
    plan = await asyncio.to_thread(prepare_chat, state, request.headers, raw, user_id)
    if plan.req.stream:
        return ClosingStreamingResponse(stream_chat(state, plan), media_type="text/event-stream",
                                        headers={"cache-control": "no-cache", "x-accel-buffering": "no"})
    return await complete_json(request, state, plan)
