"""The embedded engine's SGLang-native endpoints over real HTTP, driven by the shared client."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from openclaw.engines.hf_engine import HFEngine
from openclaw.engines.serve import create_app, serve_in_thread
from openclaw.engines.sglang_client import SGLangClient, SGLangClientError, SyncSGLangClient


@pytest.fixture(scope="module")
def served(tiny_model_path):
    engine = HFEngine.load(str(tiny_model_path), max_batch_size=8)
    with serve_in_thread(create_app(engine)) as url:
        yield engine, url


@pytest.fixture()
def client(served):
    c = SyncSGLangClient(served[1], timeout=120)
    yield c
    c.close()


def _assert_openai_error(resp: httpx.Response, status: int = 400) -> dict:
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    return err


def test_generate_text_shape_and_logprobs(served, client):
    engine, _ = served
    out = client.generate({"text": "Hello there", "sampling_params": {"max_new_tokens": 5, "temperature": 0,
                                                                      "ignore_eos": True},
                           "return_logprob": True, "return_text_in_logprobs": True, "top_logprobs_num": 2})
    meta = out["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 5}
    assert meta["prompt_tokens"] == len(engine.tokenizer.encode("Hello there")) and meta["completion_tokens"] == 5
    assert len(out["output_ids"]) == 5 and meta["weight_version"] == str(engine.weight_version)
    lps = meta["output_token_logprobs"]
    assert [e[1] for e in lps] == out["output_ids"]
    assert all(isinstance(e[0], float) and e[0] <= 0 and isinstance(e[2], str) for e in lps)
    assert "".join(e[2] for e in lps) == out["text"]
    assert len(meta["output_top_logprobs"]) == 5 and len(meta["output_top_logprobs"][0]) == 2
    assert meta["input_token_logprobs"] == []


def test_generate_input_ids_prompt_logprobs_for_teacher_scoring(served, client):
    out = client.generate({"input_ids": [5, 6, 7, 8, 9], "sampling_params": {"max_new_tokens": 0},
                           "return_logprob": True, "logprob_start_len": 0})
    assert out["output_ids"] == [] and out["text"] == ""
    inp = out["meta_info"]["input_token_logprobs"]
    assert [e[1] for e in inp] == [5, 6, 7, 8, 9]
    assert inp[0][0] is None and all(e[0] < 0 for e in inp[1:]) and inp[0][2] is None


def test_batch_and_client_result_conversion(served, client):
    from openclaw.engines.base import GenerationRequest, SamplingParams

    outs = client.generate({"input_ids": [[1, 2, 3], [4, 5]], "sampling_params": {"max_new_tokens": 3, "temperature": 0,
                                                                                   "ignore_eos": True}})
    assert isinstance(outs, list) and len(outs) == 2 and all(len(o["output_ids"]) == 3 for o in outs)
    req = GenerationRequest((1, 2, 3), SamplingParams(max_new_tokens=3, temperature=0, ignore_eos=True),
                            return_logprob=True)
    res = client.generate_request(req)
    assert list(res.output_ids) == outs[0]["output_ids"] and len(res.output_logprobs) == 3
    assert res.prompt_ids == (1, 2, 3) and res.finish_reason.type == "length"
    direct = asyncio.run(_direct(served[0], req))
    assert res.output_logprobs == pytest.approx(direct.output_logprobs, abs=1e-6)


async def _direct(engine, req):
    return await engine.generate(req)


async def test_stream_sse_is_cumulative_and_matches_non_stream(served):
    _, url = served
    body = {"text": "Once upon a time", "sampling_params": {"max_new_tokens": 6, "temperature": 0, "ignore_eos": True}}
    async with SGLangClient(url) as c:
        chunks = [ch async for ch in c.generate_stream(body)]
        full = await c.generate(body)
    assert len(chunks) >= 6
    assert [len(ch["output_ids"]) for ch in chunks[:6]] == [1, 2, 3, 4, 5, 6]
    assert chunks[0]["meta_info"]["finish_reason"] is None
    assert chunks[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 6}
    assert chunks[-1]["text"] == full["text"] and chunks[-1]["output_ids"] == full["output_ids"]


@pytest.mark.parametrize("body", [
    b"{not json",
    b'{"sampling_params": {}}',
    b'{"text": "a", "input_ids": [1]}',
    b'{"text": "a", "sampling_params": {"temprature": 0.5}}',
    b'{"text": "a", "sampling_params": {"max_new_tokens": "5"}}',
    b'{"input_ids": [1, "x"]}',
    b'{"input_ids": []}',
    b'{"text": "a", "sampling_params": {"top_p": 0}}',
    b'{"text": "a", "bogus": 1}',
])
def test_generate_bad_input_is_400_in_openai_shape(served, body):
    _, url = served
    resp = httpx.post(url + "/generate", content=body, headers={"content-type": "application/json"})
    _assert_openai_error(resp)


def test_prompt_longer_than_context_is_400(served):
    engine, url = served
    resp = httpx.post(url + "/generate", json={"input_ids": [1] * (engine.max_context_len + 1)})
    err = _assert_openai_error(resp)
    assert str(engine.max_context_len) in err["message"]


def test_update_weights_and_version(served, client, tiny_model_path, tiny_model_path_alt):
    engine, _ = served
    body = {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 6, "temperature": 0, "ignore_eos": True}}
    v0 = int(client.get_weight_version())
    before = client.generate(body)
    out = client.update_weights_from_disk(str(tiny_model_path_alt))
    assert out["success"] is True
    assert int(client.get_weight_version()) == v0 + 1
    after = client.generate(body)
    assert after["output_ids"] != before["output_ids"] and after["meta_info"]["weight_version"] == str(v0 + 1)
    client.update_weights_from_disk(str(tiny_model_path), weight_version=v0 + 10)
    assert client.get_weight_version() == str(v0 + 10)
    assert client.get_model_info()["weight_version"] == str(v0 + 10)
    assert client.generate(body)["output_ids"] == before["output_ids"]
    with pytest.raises(SGLangClientError, match="does-not-exist"):
        client.update_weights_from_disk("/tmp/does-not-exist-model")
    resp = httpx.post(served[1] + "/update_weights_from_disk", json={})
    _assert_openai_error(resp)


def test_flush_cache_refuses_while_generating(served, client):
    engine, url = served
    import threading

    result = {}
    c2 = SyncSGLangClient(url, timeout=120)
    t = threading.Thread(target=lambda: result.setdefault("out", c2.generate(
        {"input_ids": [1, 2], "rid": "long-one", "sampling_params": {"max_new_tokens": 5000, "ignore_eos": True}})))
    t.start()
    try:
        deadline = time.monotonic() + 30
        while engine.num_pending() == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        _assert_openai_error(httpx.get(url + "/flush_cache"), 405)  # POST only: a page can send a GET
        assert httpx.post(url + "/flush_cache", json={}).status_code == 400  # a POST must be JSON (cross-site guard)
        with pytest.raises(SGLangClientError, match="flush_cache"):
            client.flush_cache(deadline_s=0.3)
        # Paused in place, nothing runs and no KV is shared across requests: the flush succeeds, so
        # slime's pause -> update_weights -> flush_cache -> continue never stalls behind a request.
        client.pause_generation()
        client.flush_cache(deadline_s=5)
        client.continue_generation()
        client.abort_request("long-one")
    finally:
        t.join(60)
        c2.close()
    assert result["out"]["meta_info"]["finish_reason"]["type"] == "abort"
    client.flush_cache(deadline_s=30)


def test_pause_abort_mode_aborts_in_flight(served, client):
    engine, url = served
    import threading

    result = {}
    c2 = SyncSGLangClient(url, timeout=120)
    t = threading.Thread(target=lambda: result.setdefault("out", c2.generate(
        {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 5000, "ignore_eos": True}})))
    t.start()
    deadline = time.monotonic() + 30
    while engine.num_pending() == 0:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    client.pause_generation("abort")
    client.continue_generation()
    t.join(60)
    c2.close()
    assert result["out"]["meta_info"]["finish_reason"]["type"] == "abort"
    assert _assert_openai_error(httpx.post(url + "/pause_generation", json={"mode": "nope"}))["param"] == "mode"


def test_health_model_info_and_disconnect(served, client):
    engine, url = served
    client.wait_healthy(deadline_s=5)
    assert httpx.get(url + "/health_generate", timeout=60).status_code == 200
    info = client.get_model_info()
    assert info["model_path"] == engine.model_path and info["is_generation"] is True
    # A streaming client that goes away cancels its request.
    with httpx.stream("POST", url + "/generate", json={"input_ids": [1, 2], "stream": True,
                                                       "sampling_params": {"max_new_tokens": 5000, "ignore_eos": True}}) as r:
        for line in r.iter_lines():
            if line.startswith("data:"):
                break
        assert engine.num_pending() == 1
    deadline = time.monotonic() + 30
    while engine.num_pending() != 0:
        assert time.monotonic() < deadline, "disconnect did not free the slot"
        time.sleep(0.01)


def test_client_errors_are_clear():
    c = SyncSGLangClient("http://127.0.0.1:9", retries=1, backoff=0.01, connect_timeout=1)
    try:
        with pytest.raises(SGLangClientError, match="127.0.0.1:9"):
            c.get_model_info()
        with pytest.raises(SGLangClientError, match="not healthy within"):
            c.wait_healthy(deadline_s=0.2)
    finally:
        c.close()
