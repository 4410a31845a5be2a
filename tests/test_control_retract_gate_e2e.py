"""Retract with the promotion gate on, end to end with real parts: the real server (tiny model, RL
intercept, `OPENCLAW_PROMOTION_GATE=1` with its canary and control dir) over real HTTP, the CPU
judge, slime's training loop in-process (the bridge + `setup(cfg, where="local")`, as the demo runs it) saving
checkpoints and rollout debug dumps and pushing every version through the gate, the buffer CLI in
a child process killed with SIGKILL between the purge and the WAL truncation, and grep from another
process over every file the system wrote.

Four sessions are trained one per step (versions 1..4, checkpoint-0..3): a benign one, then three
that each carry a secret phrase. They are retracted newest first: over HTTP, with the CLI killed in
the middle and finished by `retract --pending`, and with the plain CLI. A trainer started afresh
afterwards continues the version numbering.
"""

from __future__ import annotations

import asyncio
import logging
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

pytestmark = pytest.mark.slow  # five real training steps, four canary checks, three engine rollbacks

PHRASES = {"sec-b": "BRAMBLE-OCELOT-5120", "sec-c": "CINDER-PANGOLIN-8841", "sec-d": "DAMSON-QUOKKA-2267"}
SESSIONS = [("benign", "What is the capital of France?"),
            *((sid, f"My favourite made-up word is {phrase}.") for sid, phrase in PHRASES.items())]
GATE_ENV = {"OPENCLAW_PROMOTION_GATE": "1", "OPENCLAW_CANARY_PROBE_LIMIT": "2",
            # random tiny models: the probe is 0% either way; the sessions score moves with every LoRA
            # step, so its limit is lifted: every push passes and is served (what is tested is the retract)
            "OPENCLAW_CANARY_MAX_SESSIONS_DROP": "1000"}


_chat = partial(_session_chat.session_chat, max_tokens=6)


def _session(client: httpx.Client, sid: str, question: str) -> None:
    q = {"role": "user", "content": question}
    first = _chat(client, sid, [q])
    reply = first["choices"][0]["message"].get("content") or ""
    _chat(client, sid, [q, {"role": "assistant", "content": reply}, {"role": "user", "content": "Thanks, perfect."}],
          done=True)
    r = client.post("/v1/feedback", json={"id": first["id"], "rating": "up"})
    assert r.status_code == 200, r.text


def _wait_judged(buf_dir: Path, sids: list[str]) -> None:
    deadline = time.monotonic() + 300
    with TrajectoryBuffer.open(buf_dir, create=False) as buf:
        while not all(buf.session_turns(s) and buf.session_turns(s)[0].state == JUDGED for s in sids):
            assert time.monotonic() < deadline, f"judge did not finish: {buf.stats()['by_state']}"
            time.sleep(0.2)  # polling the judge thread's progress






def _weights(url: str) -> dict[int, dict]:
    return {v["version"]: v for v in httpx.get(url + "/v1/weights", timeout=30).json()["data"]}


def _retract_cli(buf_dir: Path, url: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "openclaw.control", "retract", "--dir", str(buf_dir), *args,
                           "--engine-url", url], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def _assert_retracted_refusal(r: httpx.Response, session_id: str) -> None:
    assert r.status_code == 409, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["code"] == "weight_version_retracted" and f"'{session_id}'" in err["message"], err


@pytest.fixture(scope="module")
def gated(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory):
    from openclaw.demo.presets import method_flags
    from openclaw.demo.trainer import BackgroundTrainer
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.intercept.config import InterceptConfig
    from openclaw.judge.config import JudgeConfig
    from openclaw.judge.worker import JudgeService
    from openclaw.server.app import create_app
    from openclaw.server.config import RLConfig, ServerConfig
    from openclaw.server.runner import serve_in_background

    root = tmp_path_factory.mktemp("retract-gate")
    paths = {"buffer": root / "rl_buffer", "ckpt": root / "ckpt", "control": root / "control",
             "dumps": root / "debug_rollouts", "export": root / "export.json", "logs": root / "logs"}
    saved = {k: os.environ.get(k) for k in [*GATE_ENV, "OPENCLAW_CONTROL_DIR"]}
    os.environ.update(GATE_ENV, OPENCLAW_CONTROL_DIR=str(paths["control"]))
    # Everything the server, judge and trainer log at INFO and above, into a file the test greps.
    server_log = logging.FileHandler(root / "server.log")
    server_log.setLevel(logging.INFO)
    root_logger, root_level = logging.getLogger(), logging.getLogger().level
    root_logger.addHandler(server_log)
    root_logger.setLevel(logging.INFO)
    engine = HFEngine.load(str(tiny_model_path), dtype="float32", device="cpu", max_batch_size=4)
    config = ServerConfig(rl=RLConfig(enabled=True, intercept=InterceptConfig(buffer_dir=paths["buffer"],
                                                                              session_idle_timeout=600)))
    server = serve_in_background(create_app(config, engine=engine))
    judge = JudgeService(JudgeConfig(backend="cpu", batch_size=16, poll_interval_s=0.2), paths["buffer"]).start()
    trainers: list = []
    try:
        with httpx.Client(base_url=server.base_url, timeout=300) as client:
            for sid, question in SESSIONS:
                _session(client, sid, question)
        _wait_judged(paths["buffer"], [s for s, _ in SESSIONS])
        subprocess.run([sys.executable, "-m", "openclaw.buffer", "--dir", str(paths["buffer"]), "export", "-o",
                        str(paths["export"])], check=True, capture_output=True)
        flags = method_flags("combine", model_path=str(tiny_model_path), engine_addr=server.base_url.split("//", 1)[1],
                             buffer_dir=str(paths["buffer"]), batch_size=1, lr=5e-2, lora_rank=8, wait_timeout=30.0,
                             baseline="zero",
                             extra=["--log-dir", str(paths["logs"]), "--buffer-consumer-id", "gate-test",
                                    "--save", str(paths["ckpt"]), "--save-interval", "1", "--no-save-optim",
                                    "--save-debug-rollout-data", str(paths["dumps"])])

        def new_trainer() -> BackgroundTrainer:
            trainers.append(BackgroundTrainer(flags))
            return trainers[-1]

        trainer = new_trainer()
        steps = [trainer.step_once() for _ in SESSIONS]
        yield {"url": server.base_url, **paths, "steps": steps, "trainer": trainer, "new_trainer": new_trainer,
               "judge": judge, "server_log": root / "server.log"}
    finally:
        judge.stop()
        for t in trainers:
            t.stop()
        server.stop()
        asyncio.run(engine.shutdown())
        root_logger.removeHandler(server_log)
        root_logger.setLevel(root_level)
        server_log.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_every_version_went_through_the_gate(gated: dict) -> None:
    steps, url = gated["steps"], gated["url"]
    assert [s.weight_version for s in steps] == [1, 2, 3, 4]
    assert [s.samples_data[0].session_id for s in steps] == [s for s, _ in SESSIONS]
    weights = _weights(url)
    assert weights[4]["status"] == "serving" and served_version(url) == 4
    assert all(weights[v]["canary"]["passed"] and Path(weights[v]["path"]).is_dir() for v in (1, 2, 3, 4))
    dumps = sorted(p.name for p in gated["dumps"].iterdir())
    assert dumps == [f"rollout_{i}.jsonl" for i in range(4)]
    for sid, phrase in PHRASES.items():
        assert grep_files(phrase, gated["buffer"]) and grep_files(phrase, gated["export"]) and grep_files(phrase, gated["dumps"]), sid


def test_http_retract_leaves_no_way_back_to_the_retracted_version(gated: dict) -> None:
    """Retract sec-d (version 4, served) over HTTP: served 3; version 4 is listed `retracted`, its kept
    folder and debug dump are deleted, and promote, rollback-to and load-from-disk of it are 409s
    naming the session, from the API and from `python -m openclaw.control`."""
    url, control = gated["url"], gated["control"]
    r = httpx.post(f"{url}/v1/sessions/sec-d/retract", json={}, timeout=300)
    assert r.status_code == 200, r.text
    res = r.json()
    assert (res["served_version_before"], res["served_version"]) == (4, 3) and served_version(url) == 3
    v4 = _weights(url)[4]
    assert v4["status"] == "retracted" and not (control / "v4").exists() and not Path(v4["path"]).exists()
    assert any("sec-d" in h["note"] for h in v4["history"] if h["event"] == "retracted")
    _assert_retracted_refusal(httpx.post(f"{url}/v1/weights/4/promote", json={}, timeout=60), "sec-d")
    # load-from-disk under the retracted version's number, from a folder that exists (checkpoint-0)
    r = httpx.post(f"{url}/update_weights_from_disk", timeout=60,
                   json={"model_path": str(gated["ckpt"] / "checkpoint-0"), "weight_version": "4"})
    _assert_retracted_refusal(r, "sec-d")
    cli = subprocess.run([sys.executable, "-m", "openclaw.control", "--url", url, "promote", "4"],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 1 and "sec-d" in cli.stderr, cli.stdout + cli.stderr
    assert served_version(url) == 3
    with TrajectoryBuffer.open(gated["buffer"], create=False) as buf:
        assert not served_excludes(buf, "sec-d", 4) and "sec-d" in version_sessions(buf, 4)
        assert served_excludes(buf, "sec-d", 3)
    assert not (gated["dumps"] / "rollout_3.jsonl").exists()  # the step that trained on sec-d
    assert grep_files(PHRASES["sec-d"], gated["buffer"], gated["export"], gated["dumps"], control) == []
    assert res["removed_debug_dumps"] == [str(gated["dumps"] / "rollout_3.jsonl")]


def test_the_stopped_trainer_pushes_nothing(gated: dict) -> None:
    """The trainer that trained on sec-d refuses its own next push (it would hold retracted data)."""
    from openclaw.bridge.source import RetractedTrainingError

    with pytest.raises(RetractedTrainingError, match="sec-d"):
        gated["trainer"].run.rollout.update_weights(str(gated["ckpt"] / "checkpoint-0"), 99)
    assert served_version(gated["url"]) == 3 and 99 not in _weights(gated["url"])




def test_cli_retract_killed_before_the_wal_is_clean_then_pending_with_the_gate_on(gated: dict) -> None:
    """sec-c (version 3, served from the rollback checkpoint the HTTP retract loaded): killed -9
    between the purge commit and the WAL truncation; `retract --pending` finishes it through the
    gated server (no canary, no refusal), and then no byte of the phrase is in any file."""
    buf_dir, url = gated["buffer"], gated["url"]
    def text_still_on_disk() -> None:
        # The window: the rows are deleted and committed, the WAL is not truncated yet. The text is
        # still in the buffer's files (the WAL's old frames, or pages not yet checkpointed).
        assert grep_files(PHRASES["sec-c"], buf_dir), "the purge window left nothing to find: the test tests nothing"

    retract_cli_killed_at("deleted", buf_dir, "sec-c", url, in_window=text_still_on_disk)
    with TrajectoryBuffer.open(buf_dir, create=False) as buf:
        assert buf.retraction("sec-c")["state"] == "deleted" and buf.session_turns("sec-c") == []
    assert served_version(url) == 3
    r = _retract_cli(buf_dir, url, "--pending")
    assert r.returncode == 0, r.stderr
    with TrajectoryBuffer.open(buf_dir, create=False) as buf:
        assert buf.retraction("sec-c")["state"] == "done"
        assert served_excludes(buf, "sec-c", 2) and not served_excludes(buf, "sec-c", 3)
    assert served_version(url) == 2 and _weights(url)[3]["status"] == "retracted"
    assert grep_files(PHRASES["sec-c"], buf_dir, gated["export"], gated["dumps"], gated["control"], gated["ckpt"]) == []
    _assert_retracted_refusal(httpx.post(f"{url}/v1/weights/3/promote", json={}, timeout=60), "sec-c")


def test_cli_retract_with_the_gate_on(gated: dict) -> None:
    """sec-b (version 2, served): the plain CLI retract rolls back to checkpoint-0 through the gated
    server; the trainer is no longer listed at a checkpoint the retracts deleted."""
    buf_dir, url = gated["buffer"], gated["url"]
    r = _retract_cli(buf_dir, url, "--session", "sec-b")
    assert r.returncode == 0, r.stderr
    assert served_version(url) == 1 and _weights(url)[2]["status"] == "retracted"
    assert not (gated["control"] / "v2").exists()
    for sid, phrase in PHRASES.items():
        assert grep_files(phrase, buf_dir, gated["export"], gated["dumps"], gated["control"], gated["ckpt"]) == [], sid
        # the logs hold ids and counts, never the text (they are not rewritten by a retract)
        assert grep_files(phrase, gated["logs"], gated["server_log"]) == [], sid
    assert gated["server_log"].stat().st_size > 0 and "retracted session 'sec-d'" in gated["server_log"].read_text()
    assert sorted(p.name for p in gated["dumps"].iterdir()) == ["rollout_0.jsonl"]
    state = httpx.get(f"{url}/dashboard/state", timeout=60).json()
    consumer = next(c for c in state["buffer"]["consumers"] if c["consumer_id"] == "gate-test")
    tag = consumer["checkpoint_tag"]
    assert tag is None or (gated["ckpt"] / tag).is_dir(), consumer


def test_a_restarted_trainer_continues_the_version_numbering(gated: dict) -> None:
    """A fresh trainer (its own counter starts at 0) pushes version 5, not 1: the numbers stay unique,
    the ledger does not mix runs, and rolling back to a retracted older version is refused."""
    url = gated["url"]
    gated["trainer"].stop()
    with httpx.Client(base_url=url, timeout=300) as client:
        _session(client, "after", "Name a colour.")
    _wait_judged(gated["buffer"], ["after"])
    gated["restarted"] = gated["new_trainer"]()
    step = gated["restarted"].step_once()
    assert step is not None and step.samples_data[0].session_id == "after"
    assert step.weight_version == 5 and served_version(url) == 5
    weights = _weights(url)
    assert weights[5]["status"] == "serving" and weights[1]["status"] != "retracted"
    with TrajectoryBuffer.open(gated["buffer"], create=False) as buf:
        rows = buf.ledger(max_version=5)
        assert [r["session_id"] for r in rows if r["weight_version"] == 5] == ["after"]
    state = httpx.get(f"{url}/dashboard/state", timeout=60).json()
    assert state["ledger"]["5"]["invalidated"] is False
    _assert_retracted_refusal(httpx.post(f"{url}/v1/weights/3/rollback", json={}, timeout=60), "sec-c")
    assert httpx.post(f"{url}/v1/weights/1/rollback", json={}, timeout=300).status_code == 200
    assert served_version(url) == 1


def test_a_retract_during_a_step_stops_that_steps_push(gated: dict) -> None:
    """The trainer took a turn of `late` for its rollout before the retract was planned (no ledger row
    yet, so the retract sees an untrained session): the weights of that step are never pushed."""
    from slime.ray.driver import collect_rollout, finish_step
    from slime.utils.metrics import StepTimer

    from openclaw.bridge.source import RetractedTrainingError

    url, phrase = gated["url"], "ELDER-TAPIR-3390"
    with httpx.Client(base_url=url, timeout=300) as client:
        _session(client, "late", f"My favourite made-up word is {phrase}.")
    _wait_judged(gated["buffer"], ["late"])
    trainer = gated["restarted"]
    run, rollout_id = trainer.run, trainer.run.start_rollout_id + len(trainer.state.steps)
    samples, metrics = collect_rollout(run, rollout_id)
    assert [s.session_id for s in samples] == ["late"] and grep_files(phrase, gated["dumps"])
    r = httpx.post(f"{url}/v1/sessions/late/retract", json={}, timeout=300)
    assert r.status_code == 200 and r.json()["affected_versions"] == [], r.text  # nothing in the ledger yet
    metrics.update(run.train_on(rollout_id, samples))
    with pytest.raises(RetractedTrainingError, match="late"):
        finish_step(run, rollout_id, metrics, StepTimer())
    assert served_version(url) == 1 and max(_weights(url)) == 5  # nothing pushed
    assert grep_files(phrase, gated["buffer"], gated["export"], gated["dumps"], gated["control"], gated["ckpt"]) == []
