"""The server <-> RL intercept seam (openclaw.server.hooks): what the observer receives, that it
runs before the reply is delivered, and that its failure withholds the reply (503)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest

from openclaw.server import EngineConfig, ServerConfig, create_app, serve_in_background
from openclaw.server.hooks import CompletedTurn

HI = [{"role": "developer", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}]}]


class JsonlObserver:
    """Appends every turn to a JSONL file (fsync'd) - a minimal durable observer. `gate`, when
    cleared, holds on_turn until the test opens it; `fail` makes on_turn raise."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.fail = False
        self.closed = False

    async def on_turn(self, turn: CompletedTurn) -> None:
        self.entered.set()
        await asyncio.to_thread(self.gate.wait, 60)
        if self.fail:
            raise OSError("disk full")
        line = json.dumps(dataclasses.asdict(turn)) + "\n"
        with self.path.open("a") as f:
            f.write(line)
            f.flush()

    async def aclose(self) -> None:
        self.closed = True

    def turns(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines()]


@pytest.fixture(scope="module")
def observed(tiny_model_path, tmp_path_factory):
    obs = JsonlObserver(tmp_path_factory.mktemp("obs") / "turns.jsonl")
    cfg = ServerConfig(engine=EngineConfig(model_path=str(tiny_model_path)))
    with serve_in_background(create_app(cfg, observer=obs)) as srv:
        yield srv, obs
    assert obs.closed is False  # an observer passed in is owned by the caller, not closed by the app


def test_turn_record_non_streaming(observed):
    srv, obs = observed
    before = len(obs.turns())
    client = openai.OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=0)
    r = client.chat.completions.create(
        model="m", messages=HI, temperature=0, max_tokens=5,
        extra_headers={"X-Session-Id": "sess-1", "X-Turn-Type": "main"},
        extra_body={"session_done": True, "rl_opt_out": False})
    turns = obs.turns()
    assert len(turns) == before + 1
    t = turns[-1]
    assert t["request_id"] == r.id and t["served_model"] == r.model
    assert t["control"] == {"session_id": "sess-1", "turn_type": "main", "session_done": True, "opt_out": False,
                            "source": {"session_id": "header", "turn_type": "header", "session_done": "body",
                                       "rl_opt_out": "body"}, "user_id": "default"}
    assert t["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello\nthere"}]
    assert len(t["prompt_ids"]) == r.usage.prompt_tokens and len(t["output_ids"]) == r.usage.completion_tokens
    # log-probs were computed for the intercept although the client did not ask for them
    assert r.choices[0].logprobs is None
    assert len(t["output_logprobs"]) == len(t["output_ids"]) and all(lp <= 0 for lp in t["output_logprobs"])
    assert t["content"] == r.choices[0].message.content and t["finish_reason"] == r.choices[0].finish_reason
    assert t["weight_version"] == 0 and t["finished_at"] >= t["created_at"]


def test_streaming_turn_is_recorded_before_the_final_chunk(observed):
    srv, obs = observed
    obs.gate.clear()
    obs.entered.clear()
    received: list[dict] = []
    done = threading.Event()

    def read_stream() -> None:
        with httpx.stream("POST", srv.base_url + "/v1/chat/completions", timeout=60,
                          json={"messages": HI, "max_tokens": 6, "temperature": 0, "stream": True,
                                "session_id": "sess-2"}) as resp:
            for line in resp.iter_lines():
                if line.startswith("data: "):
                    received.append({"done": True} if line == "data: [DONE]" else json.loads(line[6:]))
        done.set()

    reader = threading.Thread(target=read_stream)
    reader.start()
    try:
        assert obs.entered.wait(60), "observer was never called"
        # While the observer holds the turn, the client has content but no finish chunk / [DONE].
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline and not done.is_set():
            time.sleep(0.02)
        assert not done.is_set()
        assert not any(r.get("done") or (r.get("choices") and r["choices"][0]["finish_reason"]) for r in received)
    finally:
        obs.gate.set()
    reader.join(60)
    assert received[-1] == {"done": True}
    t = obs.turns()[-1]
    assert t["control"]["session_id"] == "sess-2" and t["control"]["source"] == {"session_id": "body"}
    streamed = "".join(r["choices"][0]["delta"].get("content") or "" for r in received[:-1] if r.get("choices"))
    assert t["content"] == streamed and len(t["output_logprobs"]) == len(t["output_ids"])


def test_observer_failure_withholds_reply(observed):
    srv, obs = observed
    before = len(obs.turns())
    obs.fail = True
    try:
        resp = httpx.post(srv.base_url + "/v1/chat/completions", json={"messages": HI, "max_tokens": 3}, timeout=60)
        assert resp.status_code == 503
        err = resp.json()["error"]
        assert err["code"] == "rl_intercept_unavailable" and "disk full" in err["message"]
        with httpx.stream("POST", srv.base_url + "/v1/chat/completions", timeout=60,
                          json={"messages": HI, "max_tokens": 3, "stream": True}) as sresp:
            lines = [line for line in sresp.iter_lines() if line.startswith("data: ")]
        assert "data: [DONE]" not in lines
        last = json.loads(lines[-1][6:])
        assert last["error"]["code"] == "rl_intercept_unavailable"
        assert not any(json.loads(x[6:]).get("choices", [{}])[0].get("finish_reason") for x in lines[:-1])
    finally:
        obs.fail = False
    assert len(obs.turns()) == before
    ok = httpx.post(srv.base_url + "/v1/chat/completions", json={"messages": HI, "max_tokens": 2}, timeout=60)
    assert ok.status_code == 200 and len(obs.turns()) == before + 1


def test_enable_rl_intercept_without_module_fails_clearly(monkeypatch):
    import sys

    from openclaw.server import ConfigError
    from openclaw.server.config import parse_config
    from openclaw.server.observer_loader import build_observer

    cfg = parse_config(["--enable-rl-intercept"], env={})
    monkeypatch.setitem(sys.modules, "openclaw.intercept", None)  # as if the module were not installed
    with pytest.raises(ConfigError, match="--enable-rl-intercept needs the openclaw.intercept module"):
        build_observer(cfg)
    assert build_observer(parse_config([], env={})) is None  # intercept off: nothing is imported
