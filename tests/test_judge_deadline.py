"""`--judge-timeout` is a deadline for the WHOLE judge call, retries included.

A real loopback endpoint that drips one byte per second never trips a per-read timeout; the
judge must still give up at its deadline and record the turn as a failure, never stall.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

from openclaw.buffer import JUDGE_FAILED, JUDGED, TrajectoryBuffer, TurnRecord
from openclaw.judge.llm_client import ChatClient, JudgeCallError
from openclaw.judge.llm_judge import LLMJudge
from openclaw.judge.worker import JudgeStats, judge_once
from openclaw.server.config import parse_config

_tcp = load_plugin_module(str(Path(__file__).resolve().parent / "helpers" / "tcp_listener.py"))

DEADLINE_S = 3.0
SLACK_S = 1.5  # thread hand-off, connection teardown and a loaded 2-core machine


class DripServer(_tcp.TcpListener):
    """A loopback HTTP endpoint that sends its reply `chunk` bytes at a time, one chunk every
    `interval` seconds (a slow or malicious judge endpoint)."""

    def __init__(self, reply: bytes, interval: float, chunk: int = 1) -> None:
        self.reply, self.interval, self.chunk = reply, interval, chunk
        super().__init__(self._drip)

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                conn.recv(65536)  # the request (small: one read)
                for i in range(0, len(self.reply), self.chunk):
                    conn.sendall(self.reply[i:i + self.chunk])
                    if self.closed.wait(self.interval):  # the endpoint's pace, not test synchronisation
                        return
            except OSError:
                return  # the client gave up and closed the connection


def http_reply(content: str) -> bytes:
    body = json.dumps({"id": "x", "object": "chat.completion", "model": "judge",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                    "finish_reason": "stop"}]}).encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    return head + body


@pytest.fixture
def dripping():
    srv = DripServer(http_reply("Good answer. \\boxed{1}" + " " * 4000), interval=1.0)  # ~70 min to finish
    yield srv
    srv.close()


def test_client_deadline_covers_every_attempt(dripping: DripServer) -> None:
    client = ChatClient(dripping.url, "sk-do-not-log-me", timeout_s=DEADLINE_S, retries=1, model="judge")
    t0 = time.monotonic()
    try:
        with pytest.raises(JudgeCallError) as exc:
            client.chat([{"role": "user", "content": "judge this"}], 0.0, 8)
    finally:
        client.close()
    elapsed = time.monotonic() - t0
    assert DEADLINE_S - 0.1 <= elapsed < DEADLINE_S + SLACK_S, elapsed
    assert "deadline" in str(exc.value) and "sk-do-not-log-me" not in str(exc.value)


def test_dripping_endpoint_is_a_recorded_failure_within_the_deadline(dripping: DripServer, tmp_path: Path) -> None:
    """The deployed setup: the server's in-process judge, configured by its flags."""
    cfg = parse_config(["--enable-rl-intercept", "--rl-buffer-dir", str(tmp_path / "buf"), "--judge-workers", "1",
                        "--judge-backend", "llm", "--judge-url", dripping.url, "--judge-model", "judge",
                        "--judge-timeout", str(DEADLINE_S), "--judge-retries", "1", "--majority-vote-n", "2",
                        "--no-judge-hints"], env={}).rl.judge
    assert cfg is not None and (cfg.timeout_s, cfg.retries) == (DEADLINE_S, 1)
    buf = TrajectoryBuffer.open(tmp_path / "buf", max_judge_attempts=1)
    tid = buf.append_turn(TurnRecord(session_id="s", turn_index=None, turn_type="main",
                                     messages=[{"role": "user", "content": "hi"}], prompt_ids=[1],
                                     response_ids=[2], response_text="hello", content="hello"))
    buf.attach_next_state("s", {"role": "user", "content": "thanks!"})
    judge, stats = LLMJudge(cfg), JudgeStats()
    try:
        t0 = time.monotonic()
        assert judge_once(buf, judge, cfg, "w0", stats) == 1
        elapsed = time.monotonic() - t0
    finally:
        judge.close()
    turn = buf.get_turn(tid)
    buf.close()
    assert elapsed < DEADLINE_S + SLACK_S, elapsed  # two votes in parallel, each within the deadline
    assert turn.state == JUDGE_FAILED and "deadline" in (turn.judge_error or "")
    assert stats.snapshot()["failed"] == 1


def test_slow_but_complete_answer_within_the_deadline_is_judged(tmp_path: Path) -> None:
    """The deadline bounds the call; it does not cut off an answer that arrives in time."""
    srv = DripServer(http_reply("Clearly helpful. \\boxed{1}"), interval=0.05, chunk=16)  # ~1 s in total
    try:
        cfg = parse_config(["--enable-rl-intercept", "--rl-buffer-dir", str(tmp_path / "buf"), "--judge-workers", "1",
                            "--judge-url", srv.url, "--judge-model", "judge", "--judge-timeout", str(DEADLINE_S),
                            "--majority-vote-n", "1", "--no-judge-hints"], env={}).rl.judge
        assert cfg is not None and cfg.backend == "llm"
        buf = TrajectoryBuffer.open(tmp_path / "buf", max_judge_attempts=1)
        tid = buf.append_turn(TurnRecord(session_id="s", turn_index=None, turn_type="main",
                                         messages=[{"role": "user", "content": "hi"}], prompt_ids=[1],
                                         response_ids=[2], response_text="hello", content="hello"))
        buf.attach_next_state("s", {"role": "user", "content": "thanks!"})
        judge = LLMJudge(cfg)
        try:
            judge_once(buf, judge, cfg, "w0", JudgeStats())
        finally:
            judge.close()
        turn = buf.get_turn(tid)
        buf.close()
    finally:
        srv.close()
    assert turn.state == JUDGED and turn.judgement["score"] == 1.0
