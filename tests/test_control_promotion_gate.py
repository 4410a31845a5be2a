"""The promotion gate's test: a deliberately harmful update (SmolLM2 trained to answer every
question with "OK") pushed by the trainer's own code is refused by the canary, kept on disk and
reported, and the served version stays the previous one; chat is answered throughout. A benign
update passes and is served; the user can still promote the refused one and roll back.

Real parts: the embedded SmolLM2, the real server over HTTP with the RL intercept and its
buffer, a rated turn from the user's own session, slime's weight push."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import httpx
import pytest
from slime.utils.plugins import load_plugin_module
from slime.utils.weight_sync import push_to_engines

from openclaw.server import create_app, serve_in_background
from openclaw.server.config import parse_config

# A helper file beside this test (tests/ is no package: pytest imports in "importlib" mode).
_harmful = load_plugin_module(str(Path(__file__).resolve().parent / "control_harmful.py"))
ONE_WORD, train_one_word_model = _harmful.ONE_WORD, _harmful.train_one_word_model

pytestmark = pytest.mark.slow  # SmolLM2 trained a few steps + four canary scorings on CPU


@pytest.fixture(scope="module")
def one_word_model(embedded_model_path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("harmful") / "one-word"
    stats = train_one_word_model(embedded_model_path, out)
    print(f"harmful update trained in {stats['seconds']:.1f}s (loss {stats['loss']:.3f}): {out}")
    return out


def chat(client: httpx.Client, text: str, **extra) -> httpx.Response:
    return client.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": text}],
                                                     "max_tokens": 12, "temperature": 0, **extra})


def test_harmful_update_is_refused_and_serving_stays(embedded_model_path, one_word_model, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENCLAW_PROMOTION_GATE", "1")
    monkeypatch.setenv("OPENCLAW_CONTROL_DIR", str(tmp_path / "control"))
    monkeypatch.setenv("OPENCLAW_CANARY_PROBE_LIMIT", "6")  # the first six probe questions: a cheap canary
    cfg = parse_config(["--model-path", str(embedded_model_path), "--enable-rl-intercept",
                        "--rl-buffer-dir", str(tmp_path / "buffer")], env={})
    app = create_app(cfg)
    with serve_in_background(app) as srv, httpx.Client(base_url=srv.base_url, timeout=600) as client:
        # The user's own session: a good answer, rated up (the judge's place taken by explicit feedback).
        r = chat(client, "What is the capital of France?", session_id="user-1")
        assert r.status_code == 200
        good_reply = r.json()["choices"][0]["message"]["content"]
        assert "paris" in good_reply.lower()
        from openclaw.buffer import TrajectoryBuffer

        buf = TrajectoryBuffer.open(tmp_path / "buffer", create=False)
        from openclaw.control.feedback import FeedbackTarget, submit_feedback

        submit_feedback(buf, FeedbackTarget(completion_id=r.json()["id"]), "up")
        buf.close()

        # The trainer's push of the harmful version, with a chat load running meanwhile.
        answered: list[int] = []
        stop = threading.Event()

        def users() -> None:
            while not stop.is_set():
                answered.append(chat(client, "Name a fruit.").status_code)

        load = threading.Thread(target=users)
        load.start()
        sync = tmp_path / "sync" / "v1"
        shutil.copytree(one_word_model, sync)
        try:
            push_to_engines([srv.base_url], sync, 1)
        finally:
            stop.set()
            load.join(600)
        shutil.rmtree(sync)  # the trainer drops its sync folder; the refused version is kept anyway
        assert answered and set(answered) == {200}, answered

        listing = client.get("/v1/weights").json()
        v1 = next(v for v in listing["data"] if v["version"] == 1)
        assert listing["served_version"] == 0 and client.get("/health").json()["weight_version"] == 0
        assert v1["status"] == "refused" and Path(v1["path"]).is_dir()
        canary = v1["canary"]
        assert not canary["passed"] and any("capability probe" in r for r in canary["reasons"]), canary
        assert all(a.strip().startswith(ONE_WORD) for a in canary["candidate"]["probe_answers"]), canary
        assert canary["candidate"]["rated_turns"] >= 1  # the user's rated turn was replayed
        print(f"canary cost: {canary['seconds']:.1f}s, candidate {canary['candidate']['seconds']:.1f}s / "
              f"{canary['candidate']['tokens']} tokens; reasons: {canary['reasons']}")
        reply = chat(client, "What is the capital of France?").json()["choices"][0]["message"]["content"]
        assert reply == good_reply  # still the previous weights

        # A benign update (the same weights again) passes and is served.
        push_to_engines([srv.base_url], embedded_model_path, 2)
        assert client.get("/health").json()["weight_version"] == 2
        v2 = next(v for v in client.get("/v1/weights").json()["data"] if v["version"] == 2)
        assert v2["status"] == "serving" and v2["canary"]["passed"]

        # The user overrides the canary, sees the damage, and rolls back.
        assert client.post("/v1/weights/1/promote", json={}).json()["served_version"] == 1
        assert chat(client, "What is the capital of France?").json()["choices"][0]["message"]["content"] \
            .strip().startswith(ONE_WORD)
        assert client.post("/v1/weights/0/rollback", json={}).json()["served_version"] == 0
        assert chat(client, "What is the capital of France?").json()["choices"][0]["message"]["content"] == good_reply
