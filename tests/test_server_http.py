"""The OpenAI server over real HTTP (uvicorn on 127.0.0.1, a free port) with the tiny model and
the official `openai` SDK: streaming, sampling options, log-probs, errors, auth, disconnects."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import openai
import pytest

from openclaw.server import EngineConfig, ServerConfig, create_app, serve_in_background

MAX_BODY_MB = 0.05  # ~52 KB: small enough to test 413, large enough for the context-length test
HI = [{"role": "user", "content": "Say something."}]


def wait_until(cond, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def server(tiny_model_path):
    cfg = ServerConfig(max_body_mb=MAX_BODY_MB, engine=EngineConfig(model_path=str(tiny_model_path)))
    with serve_in_background(create_app(cfg)) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0)


def greedy(client, **kw):
    args = dict(model="tiny", messages=HI, temperature=0, max_tokens=12)
    args.update(kw)
    return client.chat.completions.create(**args)


def assert_openai_error(resp: httpx.Response, status: int, param: str | None = None, contains: str = "") -> dict:
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    if param is not None:
        assert err["param"] == param, err
    assert contains in err["message"], err["message"]
    return err


# ---- happy paths --------------------------------------------------------------------------------
def test_models_and_health(server, client):
    models = client.models.list()
    assert [m.id for m in models.data] == ["tiny-qwen3-s0"]
    health = httpx.get(server.base_url + "/health").json()
    assert health["status"] == "ok" and health["weight_version"] == 0


def test_sync_completion_shape(client):
    r = greedy(client)
    assert r.id.startswith("chatcmpl-") and r.object == "chat.completion" and r.model == "tiny-qwen3-s0"
    choice = r.choices[0]
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.finish_reason in ("stop", "length") and choice.logprobs is None
    assert r.usage.completion_tokens <= 12 and r.usage.prompt_tokens > 5
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    # max_completion_tokens is honoured the same way
    r2 = greedy(client, max_tokens=None, max_completion_tokens=3)
    assert r2.usage.completion_tokens == 3 and r2.choices[0].finish_reason == "length"


def test_stream_matches_non_stream_token_by_token(client):
    full = greedy(client, max_tokens=16, stream=False)
    chunks = list(greedy(client, max_tokens=16, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert len({c.id for c in chunks}) == 1 and all(c.object == "chat.completion.chunk" for c in chunks)
    content_chunks = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content_chunks) >= 3, "a multi-token reply must stream as several chunks"
    assert "".join(content_chunks) == full.choices[0].message.content
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].choices[0].finish_reason == full.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == full.usage.completion_tokens


def test_raw_sse_ends_with_done(server):
    with httpx.stream("POST", server.base_url + "/v1/chat/completions",
                      json={"messages": HI, "max_tokens": 4, "temperature": 0, "stream": True}) as resp:
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        events = [line for line in resp.iter_lines() if line]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    body = [json.loads(e[6:]) for e in events[:-1]]
    assert all(set(b["choices"][0]) == {"index", "delta", "logprobs", "finish_reason"} for b in body)


async def test_async_client_concurrent(server):
    aclient = openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0)
    prompts = [[{"role": "user", "content": f"Count to {i}."}] for i in range(4)]
    results = await asyncio.gather(*(aclient.chat.completions.create(
        model="tiny", messages=m, temperature=0, max_tokens=8) for m in prompts))
    # Batched together or not, greedy output for a prompt is the same as when it runs alone.
    alone = await aclient.chat.completions.create(model="tiny", messages=prompts[2], temperature=0, max_tokens=8)
    assert results[2].choices[0].message.content == alone.choices[0].message.content
    stream = await aclient.chat.completions.create(model="tiny", messages=prompts[2], temperature=0, max_tokens=8,
                                                   stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == alone.choices[0].message.content
    await aclient.close()


def test_stream_helper(client):
    text = greedy(client, max_tokens=12).choices[0].message.content
    # The helper refuses finish_reason "length", so end the reply with a stop sequence instead.
    stop = text[6:9]
    expected = text[:text.index(stop)]
    with client.chat.completions.stream(model="tiny", messages=HI, temperature=0, max_tokens=12,
                                        stop=stop) as stream:
        deltas = [e.delta for e in stream if e.type == "content.delta"]
        final = stream.get_final_completion()
    assert "".join(deltas) == expected == final.choices[0].message.content
    assert final.choices[0].finish_reason == "stop" and len(deltas) >= 2


def test_logprobs_openai_shape(client):
    r = greedy(client, max_tokens=6, logprobs=True, top_logprobs=3)
    entries = r.choices[0].logprobs.content
    assert len(entries) == r.usage.completion_tokens - (1 if r.choices[0].finish_reason == "stop" else 0)
    for e in entries:
        assert e.logprob <= 0 and len(e.top_logprobs) == 3
        # greedy: the sampled token is the most likely one
        assert e.top_logprobs[0].logprob == pytest.approx(e.logprob, abs=1e-5)
        assert e.bytes == list(e.token.encode())
    assert "".join(e.token for e in entries) == r.choices[0].message.content
    streamed = list(greedy(client, max_tokens=6, logprobs=True, top_logprobs=3, stream=True))
    stream_lps = [x.logprob for c in streamed if c.choices and c.choices[0].logprobs
                  for x in c.choices[0].logprobs.content]
    assert stream_lps == pytest.approx([e.logprob for e in entries], abs=1e-5)


def test_stop_sequences_and_seed(client):
    text = greedy(client, max_tokens=20).choices[0].message.content
    assert len(text) > 6
    stop = text[3:6]
    r = greedy(client, max_tokens=20, stop=[stop, "zzzz-never"])
    assert r.choices[0].finish_reason == "stop" and r.choices[0].message.content == text[:text.index(stop)]
    s = list(greedy(client, max_tokens=20, stop=stop, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in s if c.choices) == text[:text.index(stop)]
    sampled = [client.chat.completions.create(model="tiny", messages=HI, temperature=1.0, top_p=0.9, seed=1234,
                                              max_tokens=12).choices[0].message.content for _ in range(2)]
    assert sampled[0] == sampled[1]


def test_content_parts_and_developer_role_accepted(client):
    # Image parts are refused by this text-only model (tests/test_gui_multimodal.py).
    r = greedy(client, max_tokens=3, messages=[
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What is this?"}]}])
    assert r.usage.completion_tokens == 3


# ---- errors -------------------------------------------------------------------------------------
def _post(server, body=None, content=None, headers=None, path="/v1/chat/completions"):
    return httpx.post(server.base_url + path, json=body, content=content, headers=headers, timeout=60)


BAD_REQUESTS = [
    ("malformed json", dict(content=b'{"messages": [', headers={"content-type": "application/json"}), None),
    ("empty body", dict(content=b"", headers={"content-type": "application/json"}), None),
    ("body is a list", dict(body=[1, 2]), None),
    ("missing messages", dict(body={"model": "x"}), "messages"),
    ("empty messages", dict(body={"messages": []}), "messages"),
    ("messages not a list", dict(body={"messages": "hi"}), "messages"),
    ("bad role", dict(body={"messages": [{"role": "wizard", "content": "hi"}]}), "messages[0].role"),
    ("content wrong type", dict(body={"messages": [{"role": "user", "content": 5}]}), None),
    ("unknown content part", dict(body={"messages": [{"role": "user", "content": [{"type": "video", "v": 1}]}]}),
     None),
    ("user without content", dict(body={"messages": [{"role": "user"}]}), "messages[0]"),
    ("n > 1", dict(body={"messages": HI, "n": 3}), "n"),
    ("temperature type", dict(body={"messages": HI, "temperature": "hot"}), "temperature"),
    ("top_p range", dict(body={"messages": HI, "top_p": 0}), "top_p"),
    ("max_tokens zero", dict(body={"messages": HI, "max_tokens": 0}), "max_tokens"),
    ("top_logprobs without logprobs", dict(body={"messages": HI, "top_logprobs": 2}), None),
    ("tool_choice unknown tool", dict(body={"messages": HI, "tool_choice": {"type": "function", "function": {
        "name": "nope"}}, "tools": [{"type": "function", "function": {"name": "f"}}]}), None),
    ("tool bad type", dict(body={"messages": HI, "tools": [{"type": "retrieval"}]}), None),
    ("bad turn type header", dict(body={"messages": HI}, headers={"X-Turn-Type": "bogus"}), "turn_type"),
    ("bad session id", dict(body={"messages": HI, "session_id": "x" * 5000}), "session_id"),
]


@pytest.mark.parametrize("name,kwargs,param", BAD_REQUESTS, ids=[b[0] for b in BAD_REQUESTS])
def test_bad_requests_get_400(server, name, kwargs, param):
    err = assert_openai_error(_post(server, **kwargs), 400, param)
    assert err["type"] == "invalid_request_error"


def test_hostile_nesting_is_a_400(server):
    assert_openai_error(_post(server, content=b"[" * 20_000 + b"]" * 20_000,
                              headers={"content-type": "application/json"}), 400)
    # A tool schema nested 800 deep: parseable, but too deep to re-serialise (built as text because
    # the client's own JSON encoder would refuse it).
    deep = '{"type": "object", "properties": {"x": ' * 800 + '{"type": "object"}' + "}}" * 800
    body = ('{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, '
            '"tools": [{"type": "function", "function": {"name": "f", "parameters": ' + deep + "}}]}")
    assert_openai_error(_post(server, content=body.encode(), headers={"content-type": "application/json"}), 400)


def test_context_length_errors_name_the_numbers(server):
    long_msg = [{"role": "user", "content": "hello " * 5000}]  # ~5000 tokens > 4096 context, ~30 KB body
    err = assert_openai_error(_post(server, {"messages": long_msg}), 400, "messages",
                              "maximum context length is 4096 tokens")
    assert err["code"] == "context_length_exceeded" and "resulted in 50" in err["message"]
    err = assert_openai_error(_post(server, {"messages": HI, "max_tokens": 4090}), 400, "max_tokens",
                              "maximum context length is 4096 tokens. However, you requested")


def test_body_too_large_413_declared_and_streamed(server):
    big = json.dumps({"messages": [{"role": "user", "content": "x" * 200_000}]}).encode()
    assert_openai_error(_post(server, content=big, headers={"content-type": "application/json"}), 413,
                        contains="too large")

    def chunked():  # no Content-Length: the limit is enforced while reading
        for i in range(0, len(big), 8192):
            yield big[i:i + 8192]

    resp = httpx.post(server.base_url + "/v1/chat/completions", content=chunked(),
                      headers={"content-type": "application/json"})
    assert_openai_error(resp, 413, contains="too large")


def test_unknown_route_and_method(server):
    assert_openai_error(httpx.get(server.base_url + "/v1/nope"), 404, contains="/v1/nope")
    assert_openai_error(httpx.get(server.base_url + "/v1/chat/completions"), 405)
    assert_openai_error(httpx.get(server.base_url + "/v1/models/other-model"), 404, "model")


def test_sdk_raises_typed_errors_and_server_keeps_serving(client):
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(model="tiny", messages=[], max_tokens=2)
    assert exc.value.status_code == 400 and exc.value.param == "messages"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="tiny", messages=HI, max_tokens=2, n=2)
    assert greedy(client, max_tokens=2).usage.completion_tokens == 2


# ---- auth ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def keyed_server(tiny_model_path):
    cfg = ServerConfig(api_key="s3cret-key", engine=EngineConfig(model_path=str(tiny_model_path)))
    with serve_in_background(create_app(cfg)) as srv:
        yield srv


def test_api_key_required(keyed_server):
    url = keyed_server.base_url
    body = {"messages": HI, "max_tokens": 2}
    err = assert_openai_error(httpx.post(url + "/v1/chat/completions", json=body), 401, contains="Missing API key")
    assert err["type"] == "authentication_error"
    assert_openai_error(httpx.post(url + "/v1/chat/completions", json=body,
                                   headers={"Authorization": "Bearer wrong"}), 401, contains="Incorrect")
    assert_openai_error(httpx.get(url + "/v1/models", headers={"x-api-key": "s3cret-keyX"}), 401)
    assert_openai_error(httpx.post(url + "/generate", json={"text": "hi"}), 401)  # SGLang routes too
    ok = httpx.post(url + "/v1/chat/completions", json=body, headers={"x-api-key": "s3cret-key"})
    assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 2
    assert httpx.get(url + "/health").status_code == 200  # liveness stays open
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=url + "/v1", api_key="nope", max_retries=0).models.list()
    good = openai.OpenAI(base_url=url + "/v1", api_key="s3cret-key", max_retries=0)
    assert good.chat.completions.create(model="m", messages=HI, max_tokens=2).usage.completion_tokens == 2


# ---- client disconnect --------------------------------------------------------------------------
def test_disconnect_cancels_generation(server):
    engine = server.app.state.openclaw.engine
    wait_until(lambda: engine.num_pending() == 0, what="idle engine")
    long = {"messages": HI, "max_tokens": 3500, "temperature": 0}
    # Streaming: read a few chunks, then hang up.
    with httpx.stream("POST", server.base_url + "/v1/chat/completions", json={**long, "stream": True}) as resp:
        lines = resp.iter_lines()
        got = [next(lines) for _ in range(6)]
        assert all(line.startswith("data: ") or line == "" for line in got)
        assert engine.num_pending() == 1
    wait_until(lambda: engine.num_pending() == 0, 30, "streaming request to be cancelled")

    # Non-streaming: the client times out while the server is still generating.
    steps_before = engine.steps
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.base_url + "/v1/chat/completions", json=long, timeout=httpx.Timeout(60, read=1.0))
    assert engine.steps > steps_before  # it really was generating
    wait_until(lambda: engine.num_pending() == 0, 30, "non-streaming request to be cancelled")
    assert greedy(openai.OpenAI(base_url=server.base_url + "/v1", api_key="x"), max_tokens=2).usage.completion_tokens == 2


def test_parallel_streams_are_independent(server, client):
    """Two streams at once (continuous batching) each get their own complete, correct reply."""
    expected = {n: greedy(client, max_tokens=n).choices[0].message.content for n in (6, 14)}
    out: dict[int, str] = {}

    def run(n: int) -> None:
        s = greedy(client, max_tokens=n, stream=True)
        out[n] = "".join(c.choices[0].delta.content or "" for c in s if c.choices)

    threads = [threading.Thread(target=run, args=(n,)) for n in expected]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert out == expected


def test_engine_abort_is_a_503_not_a_truncated_reply(server):
    engine = server.app.state.openclaw.engine
    wait_until(lambda: engine.num_pending() == 0, what="idle engine")
    out: dict[str, httpx.Response] = {}

    def call() -> None:
        out["r"] = httpx.post(server.base_url + "/v1/chat/completions", timeout=120,
                              json={"messages": HI, "max_tokens": 3500, "temperature": 0})

    worker = threading.Thread(target=call)
    steps = engine.steps
    worker.start()
    wait_until(lambda: engine.num_pending() == 1 and engine.steps > steps + 2, what="generation to start")
    assert httpx.post(server.base_url + "/pause_generation", json={"mode": "abort"}).status_code == 200
    worker.join(60)
    assert_openai_error(out["r"], 503, contains="aborted")
    assert httpx.post(server.base_url + "/continue_generation", json={}).status_code == 200
    ok = httpx.post(server.base_url + "/v1/chat/completions", json={"messages": HI, "max_tokens": 2}, timeout=60)
    assert ok.status_code == 200
