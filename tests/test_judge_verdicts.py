"""An unparseable judge score is never a silent 0 (the judge's part).

A real loopback OpenAI-compatible endpoint answers with scripted completions: when none holds a
verdict the turn is a recorded judge failure (retried, then `judge_failed`), when some do the
turn is scored from the others and every unparseable vote is a counted, logged warning. A
custom reward plugin returning text or NaN is a recorded failure too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

from openclaw.buffer import JUDGE_FAILED, JUDGED, TrajectoryBuffer, TurnRecord
from openclaw.judge.config import JudgeConfig
from openclaw.judge.custom_judge import CustomJudge
from openclaw.judge.llm_judge import LLMJudge
from openclaw.judge.worker import JudgeStats, judge_once

_json_http = load_plugin_module(str(Path(__file__).resolve().parent / "helpers" / "json_http.py"))


def scripted_judge(completions: list[str]) -> type[_json_http.JsonHandler]:
    """A handler answering /v1/chat/completions with `completions` in turn (cycling)."""
    lock = threading.Lock()
    calls = [0]

    class Handler(_json_http.JsonHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.read_body()
            with lock:
                text = completions[calls[0] % len(completions)]
                calls[0] += 1
            self.send_json({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})

    return Handler


def add_turn(buf: TrajectoryBuffer, sid: str, next_state: str = "Thanks, that works!") -> int:
    tid = buf.append_turn(TurnRecord(session_id=sid, turn_index=None, turn_type="main",
                                     messages=[{"role": "user", "content": "hi"}], prompt_ids=[1],
                                     response_ids=[2], response_text="hello", content="hello"))
    buf.attach_next_state(sid, {"role": "user", "content": next_state})
    return tid


def judge_one(tmp_path: Path, judge_url: str, m: int) -> tuple[object, JudgeStats]:
    buf = TrajectoryBuffer.open(tmp_path / "buf", max_judge_attempts=1)
    tid = add_turn(buf, "s")
    cfg = JudgeConfig(backend="llm", judge_url=judge_url, judge_model="judge", m=m, extract_hints=False, timeout_s=30)
    judge, stats = LLMJudge(cfg), JudgeStats()
    try:
        assert judge_once(buf, judge, cfg, "w0", stats) == 1
    finally:
        judge.close()
    turn = buf.get_turn(tid)
    buf.close()
    return turn, stats


def test_no_parseable_verdict_is_a_recorded_failure_not_zero(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                            http_server: Callable[[type], str]) -> None:
    url = http_server(scripted_judge(["I think it is fine.", "\\boxed{2}", "score: good"])) + "/v1"
    with caplog.at_level(logging.WARNING, logger="openclaw.judge"):
        turn, stats = judge_one(tmp_path, url, m=3)
    assert turn.state == JUDGE_FAILED and turn.judgement is None
    assert "no parseable verdict in 3 judge completion(s)" in turn.judge_error
    snap = stats.snapshot()
    assert (snap["failed"], snap["judged"], snap["invalid_votes"]) == (1, 0, 3)
    assert any("no parseable verdict" in r.getMessage() and "3 unparseable so far" in r.getMessage()
               for r in caplog.records)


def test_some_unparseable_votes_are_counted_and_warned(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                      http_server: Callable[[type], str]) -> None:
    url = http_server(scripted_judge(["Helpful. \\boxed{1}", "Helpful. \\boxed{1}", "no verdict here"])) + "/v1"
    with caplog.at_level(logging.WARNING, logger="openclaw.judge"):
        turn, stats = judge_one(tmp_path, url, m=3)
    assert turn.state == JUDGED and turn.judgement["score"] == 1.0
    assert sorted(turn.judgement["votes"], key=str) == [1, 1, None]
    assert stats.snapshot()["invalid_votes"] == 1
    assert any("scored from the other votes" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("ret,why", [('"great"', "expected a float"), ('float("nan")', "finite"),
                                     ("None", "expected a float"), ('{"reward": "high"}', "could not convert"),
                                     ('{"reward": float("inf")}', "finite")])
def test_custom_plugin_score_that_is_not_a_number_is_a_failure(tmp_path: Path, ret: str, why: str) -> None:
    plugin = tmp_path / "bad_rm.py"
    plugin.write_text(f"async def reward_func(args, sample):\n    return {ret}\n")
    buf = TrajectoryBuffer.open(tmp_path / "buf", max_judge_attempts=1)
    tid = add_turn(buf, "s")
    cfg = JudgeConfig(backend="custom", custom_rm_path=f"{plugin}:reward_func", extract_hints=False)
    judge = CustomJudge(cfg)
    try:
        assert judge_once(buf, judge, cfg, "w0", JudgeStats()) == 1
    finally:
        judge.close()
    turn = buf.get_turn(tid)
    buf.close()
    assert turn.state == JUDGE_FAILED and why in turn.judge_error
