"""Explicit feedback with real parts: the real server (tiny model, RL intercept)
over real HTTP, the real SQLite buffer read back from a separate process, the bridge turning the
rated turn into a trainer Sample and OPD's teacher scoring it under the comment as its hint."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from functools import partial
from pathlib import Path

import httpx
import pytest
from slime.utils.plugins import load_plugin_module

from openclaw.buffer import DB_NAME, TrajectoryBuffer
from openclaw.buffer.schema import SCHEMA_VERSION
from openclaw.control.feedback import FeedbackError, effective_signal, rating_score

_session_chat = load_plugin_module(str(Path(__file__).resolve().parent / "helpers" / "session_chat.py"))

COMMENT = "Too long: answer in one short sentence."


@pytest.fixture(scope="module")
def server(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory):
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.intercept.config import InterceptConfig
    from openclaw.server.app import create_app
    from openclaw.server.config import RLConfig, ServerConfig
    from openclaw.server.runner import serve_in_background

    buf_dir = tmp_path_factory.mktemp("feedback") / "rl_buffer"
    engine = HFEngine.load(str(tiny_model_path), dtype="float32", device="cpu", max_batch_size=4)
    app = create_app(ServerConfig(rl=RLConfig(enabled=True, intercept=InterceptConfig(buffer_dir=buf_dir,
                                                                                      session_idle_timeout=600))),
                     engine=engine)
    srv = serve_in_background(app)
    try:
        yield {"url": srv.base_url, "buffer": buf_dir, "engine": engine}
    finally:
        srv.stop()
        asyncio.run(engine.shutdown())


_chat = partial(_session_chat.session_chat, max_tokens=4)


def _read_feedback(buf_dir: Path) -> list[tuple]:
    """The feedback table as another process sees it (never open the file in this process:
    POSIX locks are per process, see the buffer README)."""
    code = ("import json, sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
            "print(json.dumps(c.execute('SELECT turn_id, rating, score, comment, changes FROM feedback "
            "ORDER BY turn_id').fetchall()))")
    out = subprocess.run([sys.executable, "-c", code, str(buf_dir / DB_NAME)], capture_output=True, text=True,
                         check=True)
    return [tuple(r) for r in json.loads(out.stdout)]


def test_rating_rule() -> None:
    assert rating_score("up") == ("up", 1.0) and rating_score("DOWN") == ("down", -1.0)
    assert [rating_score(i)[1] for i in range(1, 6)] == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert rating_score("4") == ("4", 0.5)
    for bad in (0, 6, "meh", True, 2.5, None):
        with pytest.raises(FeedbackError):
            rating_score(bad)
    # explicit wins over the judge; the comment replaces the judge's hint, no comment keeps it
    s = effective_signal(1.0, "judge hint", {"score": -1.0, "comment": COMMENT})
    assert (s.score, s.hint, s.score_source, s.hint_source) == (-1.0, COMMENT, "feedback", "feedback")
    s = effective_signal(-1.0, "judge hint", {"score": 0.5, "comment": None})
    assert (s.score, s.hint, s.hint_source) == (0.5, "judge hint", "judge")
    assert effective_signal(1.0, None, None).score_source == "judge"


def test_feedback_by_completion_id_is_durable_and_last_wins(server: dict) -> None:
    with httpx.Client(base_url=server["url"], timeout=120) as client:
        q = {"role": "user", "content": "Name a colour."}
        done = _chat(client, "fb-1", [q])
        cid = done["id"]
        r = client.post("/v1/feedback", json={"id": cid, "rating": "down", "comment": COMMENT})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["object"] == "feedback" and body["rating"] == "down" and body["score"] == -1.0
        assert body["session_id"] == "fb-1" and body["turn_index"] == 0 and body["changes"] == 0
        turn_id = body["turn_id"]
        # durable before the 2xx: another process sees it right after the reply
        assert _read_feedback(server["buffer"]) == [(turn_id, "down", -1.0, COMMENT, 0)]
        r = client.post("/v1/feedback", json={"session_id": "fb-1", "turn_index": 0, "rating": 4})
        assert r.status_code == 200, r.text
        assert (r.json()["rating"], r.json()["score"], r.json()["comment"], r.json()["changes"]) == ("4", 0.5, None, 1)
        r = client.post("/v1/feedback", json={"id": cid, "rating": "down", "comment": COMMENT})
        assert r.json()["changes"] == 2
        assert _read_feedback(server["buffer"]) == [(turn_id, "down", -1.0, COMMENT, 2)]
        listed = client.get("/v1/sessions/fb-1/feedback").json()["data"]
        assert [(f["turn_index"], f["rating"]) for f in listed] == [(0, "down")]


def test_feedback_errors_are_openai_shaped(server: dict) -> None:
    with httpx.Client(base_url=server["url"], timeout=60) as client:
        r = client.post("/v1/feedback", json={"id": "chatcmpl-nope", "rating": "up"})
        assert r.status_code == 404
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"}
        assert err["type"] == "not_found_error" and err["code"] == "turn_not_found" and err["param"] == "id"
        r = client.post("/v1/feedback", json={"session_id": "no-such-session", "turn_index": 3, "rating": 5})
        assert r.status_code == 404 and r.json()["error"]["param"] == "session_id"
        for body, param in (({"id": "x"}, "rating"), ({"id": "x", "rating": 9}, "rating"),
                            ({"rating": "up"}, "id"), ({"session_id": "s", "turn_index": -1, "rating": 1}, "turn_index")):
            r = client.post("/v1/feedback", json=body)
            assert r.status_code == 400, (body, r.text)
            assert r.json()["error"]["param"] == param, (body, r.json())
        # a session the buffer does not know (never stored, purged, retracted): 404, not an empty list
        r = client.get("/v1/sessions/no-such-session/feedback")
        assert r.status_code == 404, r.text
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"} and err["type"] == "not_found_error"
        assert err["code"] == "session_not_found" and err["param"] == "session_id" and "no-such-session" in err["message"]
        _chat(client, "fb-unrated", [{"role": "user", "content": "Hello."}])
        r = client.get("/v1/sessions/fb-unrated/feedback")  # known, nothing rated: an empty list
        assert r.status_code == 200 and r.json() == {"object": "list", "data": []}


def test_thumbs_down_reaches_the_sample_reward_and_opd_hint(server: dict, tiny_model_path: Path) -> None:
    """The rated turn, drained by the bridge as a trainer would: reward = the rating (the judge's
    score, here +1, is outranked), hint = the comment, and OPD's teacher is scored under it."""
    from types import SimpleNamespace

    from openclaw.bridge import BufferDataSource, turn_to_sample
    from openclaw.bridge.teacher import add_teacher
    from openclaw.bridge.turns import turn_signal

    with httpx.Client(base_url=server["url"], timeout=120) as client:
        q = {"role": "user", "content": "What is two plus two?"}
        first = _chat(client, "fb-2", [q])
        reply = first["choices"][0]["message"]["content"] or ""
        _chat(client, "fb-2", [q, {"role": "assistant", "content": reply}, {"role": "user", "content": "Thanks!"}],
              done=True)
        assert client.post("/v1/feedback", json={"id": first["id"], "rating": "down", "comment": COMMENT}).status_code == 200
    with TrajectoryBuffer.open(server["buffer"], create=False) as buf:
        turn = buf.find_turn(request_id=first["id"])
        assert turn is not None
        assert buf.write_judgement(turn[0], {"score": 1.0, "hint": None, "votes": [1]})  # the judge liked it
    args = SimpleNamespace(rl_buffer_dir=str(server["buffer"]), rollout_batch_size=1, n_samples_per_prompt=1,
                           buffer_wait_timeout=5.0, buffer_consumer_id="fb-test", hf_checkpoint=str(tiny_model_path),
                           rollout_external_engine_addrs=[server["url"].split("//", 1)[1]], opd_topk=0,
                           rollout_backend="external", opd_teacher_concurrency=1)
    ds = BufferDataSource(args, method="opd")
    try:
        got = ds.take(1)
        assert [r.turn_id for r in got.records] == [turn[0]]
        rec = got.records[0]
        signal = turn_signal(rec)
        sample = turn_to_sample(rec, signal.score)
        assert sample.reward == -1.0 and sample.metadata["score_source"] == "feedback"
        assert sample.metadata["hint"] == COMMENT and sample.metadata["hint_source"] == "feedback"
        metrics = asyncio.run(add_teacher(args, [sample], copy_without_hint=False))
        assert sample.teacher_log_probs is not None and len(sample.teacher_log_probs) == sample.response_length
        assert metrics
    finally:
        ds.close()


def test_v2_buffer_is_upgraded_in_place(tmp_path: Path) -> None:
    """A buffer written before the feedback tables existed opens, keeps its rows, and gains them."""
    from openclaw.buffer import TurnRecord

    d = tmp_path / "old"
    with TrajectoryBuffer.open(d) as buf:
        buf.append_turn(TurnRecord(session_id="s", turn_index=None, turn_type="main",
                                   messages=[{"role": "user", "content": "hi"}], prompt_ids=[1, 2],
                                   response_ids=[3], response_logprobs=[-0.5], request_id="chatcmpl-old"))
    # make it a version-2 file, in a child process (this one must not open the file outside SQLite)
    code = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
            "[c.execute(f'DROP TABLE {t}') for t in ('feedback', 'ledger', 'exports', 'retractions')]; "
            "c.execute('PRAGMA user_version=2'); c.commit(); c.close()")
    subprocess.run([sys.executable, "-c", code, str(d / DB_NAME)], check=True)
    with TrajectoryBuffer.open(d, create=False) as buf:
        assert buf._q1("PRAGMA user_version")[0] == SCHEMA_VERSION
        turn = buf.find_turn(request_id="chatcmpl-old")
        assert turn is not None and buf.put_feedback(turn, "up", 1.0, None)["changes"] == 0
        assert buf.session_turns("s")[0].feedback["rating"] == "up"
        assert buf.verify() == []


def test_dropped_turn_takes_its_feedback(tmp_path: Path) -> None:
    """TTL/eviction/purge delete a turn's feedback with it (a comment is the user's text)."""
    from openclaw.buffer import TurnRecord

    with TrajectoryBuffer.open(tmp_path / "b") as buf:
        tid = buf.append_turn(TurnRecord(session_id="s", turn_index=None, turn_type="main",
                                         messages=[{"role": "user", "content": "hi"}], prompt_ids=[1],
                                         response_ids=[2], response_logprobs=[-0.1], request_id="r1"))
        buf.put_feedback((tid, "s", 0), "down", -1.0, "secret comment")
        assert buf.purge_session("s") == 1
        assert buf.feedback_for([tid]) == {} and buf.verify() == []
