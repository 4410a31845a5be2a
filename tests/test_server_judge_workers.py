"""`--judge-workers N` on the server: judge workers run in the server process on its buffer,
off the request path, and judged turns carry the judge's verdict."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from openclaw.buffer import TrajectoryBuffer
from openclaw.server import ConfigError
from openclaw.server.app import create_app
from openclaw.server.config import parse_config
from openclaw.server.runner import serve_in_background


@pytest.fixture(scope="module")
def engine(tiny_model_path: Path):
    from openclaw.engines.hf_engine import HFEngine

    eng = HFEngine.load(str(tiny_model_path), dtype="float32", device="cpu", max_batch_size=4)
    yield eng
    asyncio.run(eng.shutdown())


def _judged(buffer_dir: Path, session_id: str, deadline_s: float) -> list:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        with TrajectoryBuffer.open(buffer_dir) as buf:
            turns = buf.session_turns(session_id)
        if turns and all(t.state == "judged" for t in turns):
            return turns
        time.sleep(0.2)  # poll the buffer until judged or the deadline passes
    raise AssertionError(f"turns of {session_id} not judged within {deadline_s}s")


def test_judge_workers_need_the_intercept() -> None:
    with pytest.raises(ConfigError, match="--enable-rl-intercept"):
        create_app(parse_config(["--judge-workers", "1"], env={}), engine=object())


def test_server_judges_turns_in_process(engine, tmp_path: Path) -> None:
    buffer_dir = tmp_path / "buf"
    cfg = parse_config(["--enable-rl-intercept", "--rl-buffer-dir", str(buffer_dir),
                        "--judge-workers", "1", "--majority-vote-threshold", "0.6"], env={})
    app = create_app(cfg, engine=engine)
    with serve_in_background(app) as srv, httpx.Client(base_url=srv.base_url, timeout=60) as client:
        history = [{"role": "user", "content": "What is the capital of France? Answer briefly."}]
        headers = {"X-Session-Id": "judge-s1"}
        first = client.post("/v1/chat/completions", headers=headers,
                            json={"model": "m", "messages": history, "max_tokens": 4, "temperature": 0})
        assert first.status_code == 200, first.text
        history += [{"role": "assistant", "content": first.json()["choices"][0]["message"]["content"] or ""},
                    {"role": "user", "content": "Thanks, perfect, that's exactly what I needed!"}]
        second = client.post("/v1/chat/completions", headers={**headers, "X-Session-Done": "1"},
                             json={"model": "m", "messages": history, "max_tokens": 4, "temperature": 0})
        assert second.status_code == 200, second.text
        turns = _judged(buffer_dir, "judge-s1", deadline_s=120)
    first_turn, last_turn = turns
    assert first_turn.judgement["score"] == 1  # thanks -> good
    assert last_turn.judgement["score"] == 0  # session ended with no next state
