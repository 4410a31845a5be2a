"""Weight reload through HTTP on the OpenAI server's port: POST /update_weights_from_disk swaps
the model without a restart, bumps weight_version, and does not break a stream in flight."""

from __future__ import annotations

import json
import threading
import time

import httpx
import openai
import pytest

from openclaw.server import EngineConfig, ServerConfig, create_app, serve_in_background

PROMPT = [{"role": "user", "content": "Tell me a story."}]


@pytest.fixture(scope="module")
def server(tiny_model_path):
    cfg = ServerConfig(engine=EngineConfig(model_path=str(tiny_model_path)))
    with serve_in_background(create_app(cfg)) as srv:
        yield srv


def greedy_text(client) -> tuple[str, str]:
    r = client.chat.completions.create(model="m", messages=PROMPT, temperature=0, max_tokens=10)
    return r.choices[0].message.content, r.system_fingerprint


def test_reload_changes_output_and_keeps_stream_alive(server, tiny_model_path, tiny_model_path_alt):
    url = server.base_url
    client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
    before, fp0 = greedy_text(client)
    assert fp0 == "openclaw-wv0" and httpx.get(url + "/get_weight_version").json()["weight_version"] == "0"

    events: list[dict] = []
    first_chunk = threading.Event()
    finished_at: list[float] = []

    def stream_in_flight() -> None:
        with httpx.stream("POST", url + "/v1/chat/completions", timeout=120,
                          json={"messages": PROMPT, "max_tokens": 150, "temperature": 0, "stream": True,
                                "stream_options": {"include_usage": True}}) as resp:
            for line in resp.iter_lines():
                if line.startswith("data: "):
                    events.append({"done": True} if line == "data: [DONE]" else json.loads(line[6:]))
                    if len(events) >= 3:
                        first_chunk.set()
        finished_at.append(time.monotonic())

    reader = threading.Thread(target=stream_in_flight)
    reader.start()
    assert first_chunk.wait(60), "stream did not start"
    reload_started_at = time.monotonic()
    resp = httpx.post(url + "/update_weights_from_disk", json={"model_path": str(tiny_model_path_alt)}, timeout=120)
    assert resp.status_code == 200 and resp.json()["success"] is True, resp.text
    reader.join(120)
    # The stream that was generating during the swap completes normally.
    assert events[-1] == {"done": True}
    assert events[-2]["usage"]["completion_tokens"] == 150
    assert [e["choices"][0]["finish_reason"] for e in events[:-2] if e["choices"][0]["finish_reason"]] == ["length"]
    assert finished_at[0] > reload_started_at, "the stream must have been in flight when the reload began"

    after, fp1 = greedy_text(client)
    assert fp1 == "openclaw-wv1" and httpx.get(url + "/get_weight_version").json()["weight_version"] == "1"
    assert httpx.get(url + "/health").json()["weight_version"] == 1
    assert after != before, "different weights must change the greedy output"

    # Back to the first checkpoint: the original output returns, the version keeps increasing.
    resp = httpx.post(url + "/update_weights_from_disk", json={"model_path": str(tiny_model_path)}, timeout=120)
    assert resp.json()["success"] is True
    again, fp2 = greedy_text(client)
    assert again == before and fp2 == "openclaw-wv2"


def test_failed_reload_keeps_serving(server, tmp_path):
    url = server.base_url
    version = httpx.get(url + "/get_weight_version").json()["weight_version"]
    resp = httpx.post(url + "/update_weights_from_disk", json={"model_path": str(tmp_path / "missing")}, timeout=60)
    assert resp.status_code == 400 and resp.json()["success"] is False
    bad = httpx.post(url + "/update_weights_from_disk", content=b"{not json",
                     headers={"content-type": "application/json"}, timeout=60)
    assert bad.status_code == 400 and "error" in bad.json()
    assert httpx.get(url + "/get_weight_version").json()["weight_version"] == version
    ok = httpx.post(url + "/v1/chat/completions", json={"messages": PROMPT, "max_tokens": 2}, timeout=60)
    assert ok.status_code == 200
