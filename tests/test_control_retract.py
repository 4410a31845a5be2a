"""Retract without a model (fast): the real buffer, the real CLI in child processes (killed with
SIGKILL at a journaled point), real checkpoint folders for the rollback plan, grep from another
process. The full story with training and the serving engine is tests/test_control_retract_e2e.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from openclaw.buffer import TrajectoryBuffer, TurnRecord
from openclaw.control.retract import PAUSE_ENV, RetractError, plan_retract

PHRASE = "MARMALADE-OKAPI-9034"


def _turn(sid: str, text: str, request_id: str) -> TurnRecord:
    return TurnRecord(session_id=sid, turn_index=None, turn_type="main",
                      messages=[{"role": "user", "content": text}], prompt_ids=[5, 6, 7], response_ids=[8, 9],
                      response_logprobs=[-0.5, -0.25], response_text=f"reply to {text}", request_id=request_id,
                      next_state={"role": "user", "content": f"next after {text}"})


def _cli(buf_dir: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m openclaw.buffer CMD` on the buffer; `retract` is the control CLI's."""
    cli = ["openclaw.control", args[0], "--dir", str(buf_dir)] if args[0] == "retract" else ["openclaw.buffer", "--dir", str(buf_dir), args[0]]
    return subprocess.run([sys.executable, "-m", *cli, *args[1:]],
                          capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=120)


def _grep(phrase: str, *paths: Path) -> list[str]:
    out = subprocess.run(["grep", "-rla", "--", phrase, *map(str, paths)], capture_output=True, text=True)
    assert out.returncode in (0, 1), out.stderr
    return out.stdout.split()


@pytest.fixture()
def buffer_with_secret(tmp_path: Path) -> dict:
    buf_dir, export = tmp_path / "rl_buffer", tmp_path / "out" / "export.jsonl"
    export.parent.mkdir()
    with TrajectoryBuffer.open(buf_dir) as buf:
        keep = buf.append_turn(_turn("keep", "hello there", "chatcmpl-keep"))
        secret = buf.append_turn(_turn("secret", f"my code is {PHRASE}", "chatcmpl-secret"))
        buf.write_judgement(keep, {"score": 1.0})
        buf.write_judgement(secret, {"score": -1.0, "hint": f"do not say {PHRASE}"})
        buf.put_feedback((secret, "secret", 0), "down", -1.0, f"never repeat {PHRASE}")
    r = _cli(buf_dir, "export", "--format", "jsonl", "-o", str(export))
    assert r.returncode == 0, r.stderr
    topk = buf_dir / "opd_topk"
    topk.mkdir()
    from openclaw.bridge.teacher import tokens_key

    (topk / f"{tokens_key([5, 6, 7, 8, 9])}.json").write_text("{}")
    assert _grep(PHRASE, buf_dir) and _grep(PHRASE, export)
    return {"dir": buf_dir, "export": export, "topk": topk}


def test_cli_retract_of_an_untrained_session_removes_every_copy(buffer_with_secret: dict) -> None:
    d, export = buffer_with_secret["dir"], buffer_with_secret["export"]
    r = _cli(d, "retract", "--session", "secret")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["state"] == "done" and res["removed"] == {"turns": 1, "feedback": 1, "export_records": 1}
    assert res["affected_versions"] == [] and res["rolled_back_to"] is None
    assert res["rewritten_exports"] == [str(export.resolve())]
    assert _grep(PHRASE, d, export) == []  # db, WAL, shm, the export: no byte left
    assert [json.loads(line)["session_id"] for line in export.read_text().splitlines()] == ["keep"]
    assert list(buffer_with_secret["topk"].iterdir()) == []  # the OPD top-k file of its tokens
    with TrajectoryBuffer.open(d, create=False) as buf:
        assert [t.session_id for t in buf.iter_turns()] == ["keep"] and buf.verify() == []
        assert buf.retraction("secret")["state"] == "done" and buf.counters()["retracted_sessions"] == 1
    again = _cli(d, "retract", "--session", "secret")  # idempotent: the recorded result
    assert again.returncode == 0 and json.loads(again.stdout)["removed"]["turns"] == 1
    assert _cli(d, "retract", "--session", "nobody").returncode == 1


def test_kill9_at_planned_keeps_the_old_state_and_pending_finishes(buffer_with_secret: dict) -> None:
    d = buffer_with_secret["dir"]
    proc = subprocess.Popen([sys.executable, "-m", "openclaw.control", "retract", "--dir", str(d), "--session", "secret"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            env={**os.environ, PAUSE_ENV: "planned"})
    try:
        for line in proc.stderr:  # blocks until the child reaches the journaled pause point
            if "paused at planned" in line:
                break
        os.kill(proc.pid, signal.SIGKILL)  # by PID: the child this test started
    finally:
        proc.wait(timeout=60)
    with TrajectoryBuffer.open(d, create=False) as buf:
        assert len(buf.session_turns("secret")) == 1 and len(buf.session_feedback("secret")) == 1
        assert buf.retraction("secret")["state"] == "planned"
    assert _grep(PHRASE, d) and _grep(PHRASE, buffer_with_secret["export"])  # the old state, whole
    r = _cli(d, "retract", "--pending")
    assert r.returncode == 0, r.stderr
    assert "resumed a retract interrupted in state 'planned'" in r.stdout
    assert _grep(PHRASE, d, buffer_with_secret["export"]) == []


def test_a_trained_session_needs_the_engine_and_nothing_is_touched_without_it(buffer_with_secret: dict) -> None:
    d = buffer_with_secret["dir"]
    with TrajectoryBuffer.open(d, create=False) as buf:
        tid = buf.find_turn(request_id="chatcmpl-secret")[0]
        assert buf.record_trained("c", [tid], 0, 1, save_dir=None, base_model="/base") == 1
    r = _cli(d, "retract", "--session", "secret")
    assert r.returncode == 1 and "--engine-url" in r.stderr
    with TrajectoryBuffer.open(d, create=False) as buf:
        assert len(buf.session_turns("secret")) == 1 and buf.retraction("secret") is None


def test_plan_rolls_back_to_the_newest_checkpoint_before_the_first_trained_step(tmp_path: Path) -> None:
    from slime.utils.checkpoint import CheckpointMeta, begin_checkpoint, commit_checkpoint

    save = tmp_path / "ckpt"
    for step in range(4):  # checkpoint-k holds steps <= k, weight version k + 1
        commit_checkpoint(save, step, begin_checkpoint(save, step), CheckpointMeta(rollout_id=step, weight_version=step + 1))
    with TrajectoryBuffer.open(tmp_path / "b") as buf:
        ids = [buf.append_turn(_turn(f"s{i}", f"q{i}", f"r{i}")) for i in range(4)]
        for step, tid in enumerate(ids):
            buf.record_trained("c", [tid], step, step + 1, save_dir=str(save), base_model="/base")
        plan = plan_retract(buf, "s2", served_version=4)
        assert plan.first_version == 3 and plan.needs_rollback and plan.consumers == ["c"]
        assert plan.rollback_to == {"path": str(save / "checkpoint-1"), "weight_version": 2, "step": 1}
        assert plan.remove_checkpoints == [str(save / "checkpoint-2"), str(save / "checkpoint-3")]
        assert plan.affected_versions == [3, 4]
        first = plan_retract(buf, "s0", served_version=4)  # nothing predates step 0: the base model
        assert first.rollback_to == {"path": "/base", "weight_version": 0, "step": None}
        assert not plan_retract(buf, "s3", served_version=2).needs_rollback  # not served yet
        with pytest.raises(RetractError, match="policy"):
            plan_retract(buf, "s1", served_version=4, policy="reapply")
        with pytest.raises(RetractError) as e:
            plan_retract(buf, "nobody", served_version=4)
        assert e.value.status == 404


def test_requeue_gives_the_later_trained_turns_back_to_the_trainer(tmp_path: Path) -> None:
    """Policy "requeue": turns of other sessions trained into the invalidated versions become
    unconsumed for that trainer (a restart from the rollback checkpoint trains on them again);
    "stop" leaves them consumed. Other consumers are untouched."""
    with TrajectoryBuffer.open(tmp_path / "b") as buf:
        ids = [buf.append_turn(_turn(f"s{i}", f"q{i}", f"r{i}")) for i in range(3)]
        for step, tid in enumerate(ids):
            buf.write_judgement(tid, {"score": 1.0})
            buf.record_trained("c", [tid], step, step + 1, save_dir=None, base_model="/base")
        buf.commit_consumed("c", ids, "checkpoint-2")
        buf.commit_consumed("other", ids, None)
        assert buf.fetch_judged("c") == []
        plan = plan_retract(buf, "s1", served_version=3, policy="requeue")
        assert plan.rollback_to["weight_version"] == 0  # no save dir: the base model
        buf.begin_retraction("s1", plan.to_json())
        buf.purge_retracted("s1")
        n = buf.finish_retraction("s1", {"session_id": "s1", "state": "done"}, invalidate_above={"": 1},
                                  requeue_consumers=["c"])
        assert n == 1 and [r.session_id for r in buf.fetch_judged("c")] == ["s2"]  # s1 is gone, s0 predates
        assert buf.fetch_judged("other") == []
        assert {r["session_id"] for r in buf.ledger(max_version=3, valid_only=True)} == {"s0"}
        assert buf.retraction("s1")["result"]["requeued_turns"] == 1


def test_kill9_between_the_purge_and_the_wal_truncation_then_pending_leaves_no_byte(buffer_with_secret: dict) -> None:
    """The window after the purge commit and before the WAL is truncated: the text is still in the
    buffer's files there. Killed -9 at that point, the journal says `deleted` (not `purged`: that
    state is recorded only once the WAL is clean) and `--pending` finishes it."""
    d, export = buffer_with_secret["dir"], buffer_with_secret["export"]
    proc = subprocess.Popen([sys.executable, "-m", "openclaw.control", "retract", "--dir", str(d), "--session", "secret"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            env={**os.environ, PAUSE_ENV: "deleted"})
    try:
        lines = []
        for line in proc.stderr:  # blocks until the child reaches the journaled pause point
            lines.append(line)
            if "paused at deleted" in line:
                break
        else:
            raise AssertionError(f"retract exited before the pause point: {''.join(lines)}")
        assert _grep(PHRASE, d), "nothing left in the window: the test would test nothing"
        os.kill(proc.pid, signal.SIGKILL)  # by PID: the child this test started
    finally:
        proc.wait(timeout=60)
    with TrajectoryBuffer.open(d, create=False) as buf:
        assert buf.retraction("secret")["state"] == "deleted" and buf.session_turns("secret") == []
    r = _cli(d, "retract", "--pending")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["removed"] == {"turns": 1, "feedback": 1, "export_records": 1}  # counted once, at the purge
    assert "resumed a retract interrupted in state 'deleted'" in res["actions"]
    assert _grep(PHRASE, d, export) == []
    with TrajectoryBuffer.open(d, create=False) as buf:
        assert buf.retraction("secret")["state"] == "done" and buf.verify() == []


def test_retract_deletes_the_trainers_rollout_debug_dumps(buffer_with_secret: dict, tmp_path: Path) -> None:
    """`--save-debug-rollout-data` dumps (a folder of rollout_<id>.jsonl, or a {rollout_id} template)
    that hold a sample of the session are deleted; the others stay."""
    from slime.ray.rollout_manager import save_rollout_data
    from slime.utils.types import Sample

    from openclaw.control.ledger import register_trainer_files

    d = buffer_with_secret["dir"]
    folder, template = tmp_path / "dumps", str(tmp_path / "runs" / "r-{rollout_id}.jsonl")

    def sample(sid: str, text: str) -> Sample:
        return Sample(index=1, prompt=[{"role": "user", "content": text}], tokens=[1, 2], response="ok",
                      response_length=1, session_id=sid)

    for where in (str(folder), template):
        save_rollout_data(where, 0, [sample("keep", "hello there")])
        save_rollout_data(where, 1, [sample("keep", "hello there"), sample("secret", f"my code is {PHRASE}")])
    with TrajectoryBuffer.open(d, create=False) as buf:
        register_trainer_files(buf, "trainer-a", debug_rollout_data=str(folder))
        register_trainer_files(buf, "trainer-b", debug_rollout_data=template)
    assert len(_grep(PHRASE, folder, tmp_path / "runs")) == 2
    r = _cli(d, "retract", "--session", "secret")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert sorted(res["removed_debug_dumps"]) == sorted([str(folder / "rollout_1.jsonl"),
                                                         str(tmp_path / "runs" / "r-1.jsonl")])
    assert sorted(p.name for p in folder.iterdir()) == ["rollout_0.jsonl"]
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["r-0.jsonl"]
    assert _grep(PHRASE, d, folder, tmp_path / "runs") == []


def test_the_buffer_cli_names_where_retract_is(tmp_path: Path) -> None:
    r = _cli_buffer_retract(tmp_path)
    assert r.returncode == 2 and "python -m openclaw.control retract" in r.stderr


def _cli_buffer_retract(buf_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "openclaw.buffer", "--dir", str(buf_dir), "retract", "--session", "x"],
                          capture_output=True, text=True, timeout=120)
