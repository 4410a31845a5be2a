"""Retract and unlearn, and explicit feedback reaching the trained sample,
end to end with real parts: the real server (tiny model, RL intercept) over real HTTP, the CPU judge,
slime's training loop in-process (the bridge + `setup(cfg, where="local")`, as the demo runs it) saving real
checkpoints and pushing each version into the serving engine, the buffer CLI in a child process
killed with SIGKILL in the middle of a retract, and the buffer directory grepped by another process.

Four sessions are trained one per step (versions 1..4, checkpoint-0..3): a benign one (thumbs up),
one with a thumbs-down and a comment (the feedback acceptance), then two that carry a secret phrase.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import httpx
import pytest
from slime.utils.plugins import load_plugin_module

from openclaw.buffer import JUDGED, TrajectoryBuffer
from openclaw.control.ledger import version_sessions
from openclaw.control.retract import served_excludes

# Shared with the other retract end-to-end module (tests run with --import-mode=importlib).
_retract_cli = load_plugin_module(str(Path(__file__).resolve().parent / "retract_cli.py"))
_session_chat = load_plugin_module(str(Path(__file__).resolve().parent / "helpers" / "session_chat.py"))
grep_files, retract_cli_killed_at, served_version = (_retract_cli.grep_files, _retract_cli.retract_cli_killed_at,
                                                     _retract_cli.served_version)

pytestmark = pytest.mark.slow  # four real training steps and two engine reloads (about 2 minutes)

COMMENT = "Too long: answer in one short sentence."
PHRASE_A = "PLUMTREE-AARDVARK-7731"
PHRASE_B = "QUINCE-NARWHAL-4482"
SESSIONS = [  # (session id, question, next user message, rating, comment)
    ("benign", "What is the capital of France?", "Thanks, perfect.", "up", None),
    ("fb", "Describe the sea.", "No, that is far too long.", "down", COMMENT),
    ("secret-a", f"My locker code is {PHRASE_A}. Remember it.", f"Yes, {PHRASE_A} is right.", "down",
     f"Never repeat {PHRASE_A}."),
    ("secret-b", f"My favourite made-up word is {PHRASE_B}.", "Thanks, perfect.", "up", None),
]


_chat = partial(_session_chat.session_chat, max_tokens=6)








@pytest.fixture(scope="module")
def trained(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory):
    from openclaw.demo.presets import method_flags
    from openclaw.demo.trainer import BackgroundTrainer
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.intercept.config import InterceptConfig
    from openclaw.judge.config import JudgeConfig
    from openclaw.judge.worker import JudgeService
    from openclaw.server.app import create_app
    from openclaw.server.config import RLConfig, ServerConfig
    from openclaw.server.runner import serve_in_background

    root = tmp_path_factory.mktemp("retract")
    buf_dir, ckpt, export = root / "rl_buffer", root / "ckpt", root / "export.json"
    engine = HFEngine.load(str(tiny_model_path), dtype="float32", device="cpu", max_batch_size=4)
    config = ServerConfig(rl=RLConfig(enabled=True, intercept=InterceptConfig(buffer_dir=buf_dir,
                                                                              session_idle_timeout=600)))
    server = serve_in_background(create_app(config, engine=engine))
    judge = JudgeService(JudgeConfig(backend="cpu", batch_size=16, poll_interval_s=0.2), buf_dir).start()
    trainer = None
    try:
        with httpx.Client(base_url=server.base_url, timeout=300) as client:
            for sid, question, nxt, rating, comment in SESSIONS:
                q = {"role": "user", "content": question}
                first = _chat(client, sid, [q])
                reply = first["choices"][0]["message"].get("content") or ""
                _chat(client, sid, [q, {"role": "assistant", "content": reply}, {"role": "user", "content": nxt}],
                      done=True)
                r = client.post("/v1/feedback", json={"id": first["id"], "rating": rating, "comment": comment})
                assert r.status_code == 200, r.text
        deadline = time.monotonic() + 300
        with TrajectoryBuffer.open(buf_dir, create=False) as buf:
            while buf.stats()["by_state"]["ready"] or buf.stats()["by_state"]["awaiting_next_state"]:
                assert time.monotonic() < deadline, f"judge did not finish: {buf.stats()['by_state']}"
                time.sleep(0.2)  # polling the judge thread's progress
            for sid, *_ in SESSIONS:  # every rated turn is judged (a trainer drains only judged turns)
                assert buf.session_turns(sid)[0].state == JUDGED, (sid, buf.session_turns(sid))
        judge.stop()
        subprocess.run([sys.executable, "-m", "openclaw.buffer", "--dir", str(buf_dir), "export", "-o", str(export)],
                       check=True, capture_output=True)
        flags = method_flags("combine", model_path=str(tiny_model_path), engine_addr=server.base_url.split("//", 1)[1],
                             buffer_dir=str(buf_dir), batch_size=1, lr=5e-2, lora_rank=8, wait_timeout=30.0,
                             baseline="zero",
                             extra=["--log-dir", str(root / "logs"), "--buffer-consumer-id", "retract-test",
                                    "--save", str(ckpt), "--save-interval", "1", "--no-save-optim"])
        trainer = BackgroundTrainer(flags)
        steps = [trainer.step_once() for _ in SESSIONS]
        yield {"url": server.base_url, "buffer": buf_dir, "ckpt": ckpt, "export": export, "steps": steps,
               "trainer": trainer, "engine": engine, "config": config}
    finally:
        judge.stop()
        if trainer is not None:
            trainer.stop()
        server.stop()
        asyncio.run(engine.shutdown())


def test_training_wrote_the_ledger_and_feedback_reached_the_sample(trained: dict) -> None:
    steps = trained["steps"]
    assert all(s is not None and s.samples == 1 for s in steps)
    assert [s.samples_data[0].session_id for s in steps] == [s[0] for s in SESSIONS]
    assert [s.weight_version for s in steps] == [1, 2, 3, 4]
    fb = steps[1].samples_data[0]  # thumbs down + comment: the reward and the OPD hint
    assert fb.reward == -1.0 and fb.metadata["score_source"] == "feedback"
    assert fb.metadata["hint"] == COMMENT and fb.metadata["hint_source"] == "feedback"
    assert fb.teacher_log_probs is not None and fb.teacher_log_probs != fb.rollout_log_probs  # scored under the hint
    assert steps[0].samples_data[0].reward == 1.0
    with TrajectoryBuffer.open(trained["buffer"], create=False) as buf:
        rows = buf.ledger()
        assert [(r["session_id"], r["step"], r["weight_version"]) for r in rows] == \
            [(s[0], i, i + 1) for i, s in enumerate(SESSIONS)]
        assert all(r["consumer_id"] == "retract-test" and r["save_dir"] == str(trained["ckpt"]) for r in rows)
    assert served_version(trained["url"]) == 4
    assert grep_files(PHRASE_A, trained["buffer"]) and grep_files(PHRASE_B, trained["export"])


def test_kill9_after_purge_then_cli_pending_rolls_back_over_http(trained: dict) -> None:
    """Runs after the test above (file order): the ledger and checkpoints are in place."""
    buf_dir, url = trained["buffer"], trained["url"]
    retract_cli_killed_at("purged", buf_dir, "secret-b", url)
    # The buffer side is all-or-nothing (one transaction): everything of the session is gone...
    assert grep_files(PHRASE_B, buf_dir) == [] and grep_files(PHRASE_B, trained["export"]) == []
    with TrajectoryBuffer.open(buf_dir, create=False) as buf:
        assert buf.session_turns("secret-b") == [] and buf.session_feedback("secret-b") == []
        assert buf.retraction("secret-b")["state"] == "purged"
    assert served_version(url) == 4  # ...and the rollback is still owed: the journal says so
    r = subprocess.run([sys.executable, "-m", "openclaw.control", "retract", "--dir", str(buf_dir), "--pending",
                        "--engine-url", url], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)  # the engine was loaded over HTTP (/update_weights_from_disk)
    assert res["served_version_before"] == 4 and res["served_version"] == 3 == served_version(url)
    assert res["rolled_back_to"]["path"].endswith("checkpoint-2") and res["affected_versions"] == [4]
    with TrajectoryBuffer.open(buf_dir, create=False) as buf:
        assert buf.retraction("secret-b")["state"] == "done"
        assert served_excludes(buf, "secret-b", 3) and "secret-b" not in version_sessions(buf, 3)
    assert not (trained["ckpt"] / "checkpoint-3").exists()
    assert os.path.realpath(trained["ckpt"] / "checkpoint-latest").endswith("checkpoint-2")


def test_kill9_before_purge_leaves_the_old_state_and_the_next_start_finishes(trained: dict) -> None:
    """Runs after secret-b's retract (file order): the served version is 3, secret-a's."""
    from openclaw.server.app import create_app
    from openclaw.server.runner import serve_in_background

    buf_dir, url = trained["buffer"], trained["url"]
    with TrajectoryBuffer.open(buf_dir, create=False) as buf:
        n_turns = len(buf.session_turns("secret-a"))
    retract_cli_killed_at("planned", buf_dir, "secret-a", url)
    with TrajectoryBuffer.open(buf_dir, create=False) as buf:  # the old state, whole
        assert len(buf.session_turns("secret-a")) == n_turns == 2
        assert len(buf.session_feedback("secret-a")) == 1
        assert buf.retraction("secret-a")["state"] == "planned"
    assert grep_files(PHRASE_A, buf_dir) and grep_files(PHRASE_A, trained["export"]) and served_version(url) == 3
    # The trainer trained on it: policy "stop" ends it at its next rollout, naming the checkpoint.
    with pytest.raises(Exception, match="retracted"):
        trained["trainer"].step_once()
    # The next start of a server on this buffer finishes the retract before it answers.
    again = serve_in_background(create_app(trained["config"], engine=trained["engine"]))
    try:
        assert httpx.get(again.base_url + "/health", timeout=30).status_code == 200
        assert served_version(url) == 2
        journal = {j["session_id"]: j for j in httpx.get(again.base_url + "/v1/retractions", timeout=30).json()["data"]}
    finally:
        again.stop()
    res = journal["secret-a"]["result"]
    print(f"retract of a trained, served session: {res['seconds']:.2f} s (purge + engine reload)")
    assert journal["secret-a"]["state"] == "done" and res["affected_versions"] == [3]
    assert "resumed a retract interrupted in state 'planned'" in res["actions"]
    assert res["served_version_before"] == 3 and res["served_version"] == 2
    assert res["rolled_back_to"]["path"].endswith("checkpoint-1") and res["stopped_consumers"] == ["retract-test"]
    # (a) no stored byte holds either phrase: buffer dir (db, WAL, shm) and the export we wrote
    for phrase in (PHRASE_A, PHRASE_B):
        assert grep_files(phrase, buf_dir, trained["export"]) == []
    assert json.loads(trained["export"].read_text())[0]["session_id"] == "benign"  # others stay exported
    # (b) the served version's ledger excludes both sessions
    with TrajectoryBuffer.open(buf_dir, create=False) as buf:
        assert version_sessions(buf, 2) == {"benign", "fb"}
        assert buf.retractions(unfinished=True) == [] and buf.verify() == []
    ledger = httpx.get(f"{url}/v1/ledger", params={"version": 2}, timeout=30).json()
    assert {row["session_id"] for row in ledger["data"]} == {"benign", "fb"} and ledger["served_version"] == 2
    assert sorted(p.name for p in trained["ckpt"].glob("checkpoint-[0-9]*")) == ["checkpoint-0", "checkpoint-1"]
    # over HTTP: idempotent (the recorded result); unknown sessions are 404 in OpenAI's shape
    r = httpx.post(f"{url}/v1/sessions/secret-a/retract", json={}, timeout=60)
    assert r.status_code == 200 and r.json()["served_version"] == 2
    r = httpx.post(f"{url}/v1/sessions/nobody/retract", json={}, timeout=60)
    assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"


def test_http_retract_of_a_trained_session_rolls_back(trained: dict) -> None:
    """The route itself, on a session the served version (2) was trained on: back to checkpoint-0."""
    url = trained["url"]
    r = httpx.post(f"{url}/v1/sessions/fb/retract", json={"policy": "requeue"}, timeout=300)
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["object"] == "session.retraction" and res["affected_versions"] == [2]
    assert (res["served_version_before"], res["served_version"]) == (2, 1) and served_version(url) == 1
    assert res["rolled_back_to"]["path"].endswith("checkpoint-0") and res["removed"]["feedback"] == 1
    assert grep_files(COMMENT, trained["buffer"], trained["export"]) == []  # the comment went with it
    with TrajectoryBuffer.open(trained["buffer"], create=False) as buf:
        assert version_sessions(buf, 1) == {"benign"} and "fb" in version_sessions(buf, 2)
    # Gate off too, version 2 (and every later one) holds a retracted session: loading it is a 409.
    for version in (2, 4):
        r = httpx.post(f"{url}/update_weights_from_disk", timeout=60,
                       json={"model_path": str(trained["ckpt"] / "checkpoint-0"), "weight_version": str(version)})
        assert r.status_code == 409 and r.json()["error"]["code"] == "weight_version_retracted", r.text
        r = httpx.post(f"{url}/v1/weights/{version}/promote", json={}, timeout=60)
        assert r.status_code == 409 and r.json()["error"]["code"] == "weight_version_retracted", r.text
    assert served_version(url) == 1
