"""LLM judge over real HTTP: against our own server with the tiny model (verdicts may be
garbage and are then recorded as invalid), against an endpoint that accepts and never answers
(failures recorded within the timeout, workers go on), and launched from --prm-model-path."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

from openclaw.buffer import JUDGE_FAILED, JUDGED, TrajectoryBuffer, TurnRecord
from openclaw.judge.config import JudgeConfig
from openclaw.judge.llm_client import ChatClient, JudgeCallError, normalize_base_url
from openclaw.judge.llm_judge import LLMJudge
from openclaw.judge.schema import JudgeFailure, JudgeInput, JudgeResult
from openclaw.judge.worker import JudgeService

_tcp = load_plugin_module(str(Path(__file__).resolve().parent / "helpers" / "tcp_listener.py"))


@pytest.fixture
def hanging():
    """An endpoint that accepts TCP connections and never answers."""
    srv = _tcp.TcpListener()
    yield srv
    srv.close()


def add_turn(buf: TrajectoryBuffer, sid: str, next_state: str) -> int:
    tid = buf.append_turn(TurnRecord(session_id=sid, turn_index=None, turn_type="main",
                                     messages=[{"role": "user", "content": "hi"}], prompt_ids=[1],
                                     response_ids=[2], response_text="hello", content="hello"))
    buf.attach_next_state(sid, {"role": "user", "content": next_state})
    return tid


def test_normalize_base_url() -> None:
    assert normalize_base_url("http://127.0.0.1:9") == "http://127.0.0.1:9/v1"
    assert normalize_base_url("https://api.example.com/v1/") == "https://api.example.com/v1"
    with pytest.raises(ValueError):
        normalize_base_url("127.0.0.1:9")


def test_client_times_out_with_bounded_retries(hanging: _tcp.TcpListener) -> None:
    client = ChatClient(hanging.url, "sk-secret-value", timeout_s=0.5, retries=1, model="judge")
    t0 = time.monotonic()
    with pytest.raises(JudgeCallError) as exc:
        client.chat([{"role": "user", "content": "x"}], 0.0, 8)
    elapsed = time.monotonic() - t0
    client.close()
    assert 0.45 <= elapsed < 2.0  # one deadline for the whole call, retries included; never a hang
    assert "timeout" in str(exc.value) and "sk-secret-value" not in str(exc.value)
    assert hanging.accepted >= 1


def test_hanging_judge_endpoint_never_stalls_workers(tmp_path: Path, hanging: _tcp.TcpListener) -> None:
    buf = TrajectoryBuffer.open(tmp_path / "buf", max_judge_attempts=2)
    ids = [add_turn(buf, f"s{k}", "thanks!") for k in range(3)]
    cfg = JudgeConfig(backend="llm", judge_url=hanging.url, judge_model="judge", m=2, timeout_s=0.5, retries=0,
                      extract_hints=False, num_workers=2, batch_size=2, poll_interval_s=0.05)
    t0 = time.monotonic()
    svc = JudgeService(cfg, tmp_path / "buf", buffer=buf).start()
    deadline = time.monotonic() + 30
    while any(buf.get_turn(t).state != JUDGE_FAILED for t in ids):
        assert time.monotonic() < deadline, [buf.get_turn(t).state for t in ids]
        time.sleep(0.05)
    svc.stop(timeout=10)
    assert time.monotonic() - t0 < 30 and svc.alive == 0
    assert svc.stats.snapshot()["failed"] == 6  # 3 turns x 2 attempts, each recorded
    assert all("timeout" in buf.get_turn(t).judge_error for t in ids)
    # serving-side work (another buffer write from this thread) was never blocked
    assert add_turn(buf, "after", "ok") > max(ids)
    buf.close()


@pytest.fixture(scope="module")
def tiny_server(tiny_model_path):
    from openclaw.server import EngineConfig, ServerConfig, create_app, serve_in_background

    cfg = ServerConfig(engine=EngineConfig(model_path=str(tiny_model_path)))
    with serve_in_background(create_app(cfg)) as srv:
        yield srv


def test_llm_judge_end_to_end_on_our_server(tiny_server) -> None:
    cfg = JudgeConfig(backend="llm", judge_url=tiny_server.base_url, m=3, max_tokens=12, timeout_s=60,
                      temperature=1.0, hint_m=3)
    judge = LLMJudge(cfg)
    try:
        items = [JudgeInput("Here is the code.", "Thanks, it works!", "user"),
                 JudgeInput("Running.", "Traceback (most recent call last):\nKeyError: 'x'", "tool")]
        results = judge.judge_batch(items)
    finally:
        judge.close()
    assert len(results) == 2
    for r in results:
        if isinstance(r, JudgeFailure):  # the tiny random model wrote no \boxed{} verdict at all
            assert "no parseable verdict in 3 judge completion(s)" in r.error and r.invalid_votes == 3
            continue
        assert isinstance(r, JudgeResult), r
        assert len(r.votes) == 3 and all(v in (1, 0, -1, None) for v in r.votes)
        assert r.reward in (1.0, 0.0, -1.0) and r.backend == "llm"
        assert r.all_invalid == all(v is None for v in r.votes)
        assert isinstance(r.rationale, str)  # the tiny random model's text, stored as is
        assert len(r.hint_votes) == 3 and r.hint_reason in ("accepted", "no_majority", "too_short")
        assert r.timings["total_s"] > 0


def test_llm_judge_records_failure_per_turn_when_endpoint_is_down() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens here
    cfg = JudgeConfig(backend="llm", judge_url=f"http://127.0.0.1:{port}", judge_model="x", m=2, timeout_s=1,
                      retries=1, extract_hints=False)
    judge = LLMJudge(cfg)
    try:
        out = judge.judge_batch([JudgeInput("a", "b", "user")])
    finally:
        judge.close()
    assert isinstance(out[0], JudgeFailure) and "ConnectError" in out[0].error


@pytest.mark.slow
def test_llm_judge_launched_from_model_path(tmp_path: Path, tiny_model_path) -> None:
    import os

    buf = TrajectoryBuffer.open(tmp_path / "buf")
    tid = add_turn(buf, "s", "Thanks a lot!")
    cfg = JudgeConfig(backend="llm", prm_model_path=str(tiny_model_path), m=1, max_tokens=8, extract_hints=False,
                      poll_interval_s=0.05)
    svc = JudgeService(cfg, tmp_path / "buf", buffer=buf).start()
    pid = svc.judge._server.pid
    try:
        deadline = time.monotonic() + 120
        while buf.get_turn(tid).state not in (JUDGED, JUDGE_FAILED):
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        svc.stop()
    turn = buf.get_turn(tid)
    if turn.state == JUDGE_FAILED:
        # The tiny random model answered (the launched server works) but wrote no \boxed{} verdict:
        # recorded as a failure, never scored 0.
        assert "no parseable verdict in 1 judge completion(s)" in (turn.judge_error or ""), turn.judge_error
    else:
        assert len(turn.judgement["votes"]) == 1
    with pytest.raises(ProcessLookupError):  # the judge server we launched is gone
        os.kill(pid, 0)
    buf.close()
