"""Judge workers on a real SQLite trajectory buffer: CPU judge, custom reward plugins (both
contracts), the standalone CLI, and failures that are recorded instead of hanging."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from openclaw.buffer import JUDGE_FAILED, JUDGED, READY, TrajectoryBuffer, TurnRecord
from openclaw.judge.config import JudgeConfig
from openclaw.judge.worker import JudgeService

REPO = Path(__file__).resolve().parents[1]


def add_turn(buf: TrajectoryBuffer, sid: str, response: str, next_state: dict | None) -> int:
    tid = buf.append_turn(TurnRecord(
        session_id=sid, turn_index=None, turn_type="main",
        messages=[{"role": "user", "content": "please help"}], prompt_ids=[1, 2, 3],
        response_ids=[5, 6], response_logprobs=[-0.1, -0.2], response_text=response, content=response,
    ))
    if next_state is None:
        buf.finalize_session(sid)
    else:
        assert buf.attach_next_state(sid, next_state) == tid
    return tid


def wait_for(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def states(buf: TrajectoryBuffer, ids: list[int]) -> list[str]:
    return [buf.get_turn(t).state for t in ids]


@pytest.fixture(scope="module")
def cpu_judge():
    from openclaw.judge.cpu_judge import CpuJudge

    return CpuJudge()


def test_service_judges_buffer_turns_with_cpu_judge(tmp_path: Path, cpu_judge) -> None:
    buf = TrajectoryBuffer.open(tmp_path / "buf")
    ids = [
        add_turn(buf, "a", "Here is the function.", {"role": "user", "content": "Thanks, that works perfectly!"}),
        add_turn(buf, "b", "Here is the function.", {"role": "user", "content": "No, I meant in TypeScript, not JavaScript."}),
        add_turn(buf, "c", "Running tests.", {"role": "tool", "content": "Traceback (most recent call last):\nValueError: bad"}),
        add_turn(buf, "d", "Here is the answer.", None),  # session ended: no next state
    ]
    cfg = JudgeConfig(num_workers=2, batch_size=2, poll_interval_s=0.05)
    with JudgeService(cfg, tmp_path / "buf", judge=cpu_judge, buffer=buf).start() as svc:
        wait_for(lambda: states(buf, ids) == [JUDGED] * 4, 120, "all turns judged")
    assert svc.stats.snapshot()["judged"] == 4  # after stop(): workers joined, counters final
    j = [buf.get_turn(t).judgement for t in ids]
    assert [x["score"] for x in j] == [1.0, -1.0, -1.0, 0.0]
    assert j[1]["hint"].endswith("No, I meant in TypeScript, not JavaScript.")
    assert j[0]["hint"] is None and j[3]["vote_reason"] == "no_next_state"
    assert {x["worker_id"] for x in j} <= set(svc.worker_ids)
    assert j[0]["backend"] == "cpu" and j[0]["votes"] == [1] and j[0]["rationale"]
    buf.close()


RM_REFERENCE = '''
class KeywordPRM:
    def __init__(self, threshold):
        self.threshold = threshold
    def score(self, prompt, response, next_state):
        return 1.0 if "thanks" in next_state.lower() else -1.0

def get_reward_model(config):
    assert config["majority_vote_threshold"] == 0.6
    return KeywordPRM(config["majority_vote_threshold"])
'''

RM_SLIME = '''
async def reward_func(args, sample):
    return {"score": 0.5 if sample.metadata["next_state"] else -0.5, "len": len(sample.response)}
'''

RM_HANGS = '''
import threading
def score_forever(args, sample):
    threading.Event().wait()
'''


@pytest.mark.parametrize("source,spec_suffix,expected", [
    (RM_REFERENCE, "", [1.0, -1.0]),
    (RM_SLIME, ":reward_func", [0.5, 0.5]),
])
def test_custom_rm_plugin_replaces_scorer(tmp_path: Path, source: str, spec_suffix: str, expected) -> None:
    plugin = tmp_path / "my_rm.py"
    plugin.write_text(source)
    buf = TrajectoryBuffer.open(tmp_path / "buf")
    ids = [add_turn(buf, "a", "ok", {"role": "user", "content": "Thanks!"}),
           add_turn(buf, "b", "ok", {"role": "user", "content": "No, I meant the other file, please fix it."})]
    cfg = JudgeConfig(backend="custom", custom_rm_path=str(plugin) + spec_suffix, poll_interval_s=0.05)
    with JudgeService(cfg, tmp_path / "buf", buffer=buf).start():
        wait_for(lambda: states(buf, ids) == [JUDGED] * 2, 60, "custom rm judged")
    j = [buf.get_turn(t).judgement for t in ids]
    assert [x["score"] for x in j] == expected and j[0]["backend"] == "custom"
    assert j[1]["hint"] and "the other file" in j[1]["hint"]
    buf.close()


def test_hanging_custom_rm_is_recorded_as_failure(tmp_path: Path) -> None:
    plugin = tmp_path / "hang_rm.py"
    plugin.write_text(RM_HANGS)
    buf = TrajectoryBuffer.open(tmp_path / "buf", max_judge_attempts=2)
    tid = add_turn(buf, "a", "ok", {"role": "user", "content": "Thanks!"})
    cfg = JudgeConfig(backend="custom", custom_rm_path=f"{plugin}:score_forever", timeout_s=0.5, poll_interval_s=0.05)
    t0 = time.monotonic()
    with JudgeService(cfg, tmp_path / "buf", buffer=buf).start() as svc:
        wait_for(lambda: buf.get_turn(tid).state == JUDGE_FAILED, 30, "turn marked judge_failed")
    assert svc.stats.snapshot()["failed"] == 2  # after stop(): workers joined, counters final
    assert time.monotonic() - t0 < 30
    assert "timed out" in buf.get_turn(tid).judge_error
    buf.close()


def test_standalone_cli_drains_buffer(tmp_path: Path) -> None:
    d = tmp_path / "buf"
    with TrajectoryBuffer.open(d) as buf:
        ids = [add_turn(buf, f"s{k}", "Here you go.", {"role": "user", "content": c})
               for k, c in enumerate(["Great, thank you!", "That's wrong, try again.", "What's the capital of Peru?"])]
    r = subprocess.run([sys.executable, "-m", "openclaw.judge", "--rl-buffer-dir", str(d), "--num-judge-workers", "2",
                        "--until-idle", "0.5", "--log-level", "warning"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "3 judged, 0 failures" in r.stdout
    with TrajectoryBuffer.open(d) as buf:
        assert [buf.get_turn(t).judgement["score"] for t in ids] == [1.0, -1.0, 0.0]
        assert buf.stats()["by_state"][READY] == 0
