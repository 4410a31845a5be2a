"""Offline conversation data (DATA_PATH) trains, with every method.

Real parts: the DATA_PATH importer CLI (`python -m openclaw.bridge.offline`) on a directory holding
the public page's session-format example verbatim plus two more sessions; the real server (HTTP,
tiny model) whose engine scores the imported turns' log-probs; the CPU judge; slime's training loop
in-process with each method's plugins (the flags of the launch scripts); weight sync to the engine.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

import openclaw.bridge as base
from openclaw.buffer import JUDGED, TrajectoryBuffer

REPO = Path(__file__).resolve().parents[1]

# openclaw-rl-skill.md, "Data Format -- Conversation Trajectories", verbatim.
PAGE_EXAMPLE = (Path(__file__).parent / "data" / "page_session.json").read_text()
MORE = [  # JSONL, sorted before the page's file: drained first
    {"session_id": "offline_no_feedback", "turns": [
        {"type": "main", "prompt": "Name a prime number.", "response": "Seven."}]},
    {"session_id": "offline_correction", "turns": [
        {"type": "main", "prompt": "What is the capital of France?",
         "response": "The capital of France is Paris, a city with a long and rich history spanning many centuries.",
         "next_state": "No, that's too long. I asked for a short answer: one or two sentences."}]},
]
IMPORTED = {"user_session_abc123", "offline_no_feedback", "offline_correction"}


def _import(buffer: Path, data_path: Path, tokenizer: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "openclaw.bridge.offline", "--rl-buffer-dir", str(buffer),
                           "--tokenizer", str(tokenizer), str(data_path)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def stack(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory):
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.intercept.config import InterceptConfig
    from openclaw.judge.config import JudgeConfig
    from openclaw.judge.worker import JudgeService
    from openclaw.server.app import create_app
    from openclaw.server.config import RLConfig, ServerConfig
    from openclaw.server.runner import serve_in_background

    root = tmp_path_factory.mktemp("offline")
    data = root / "data"
    data.mkdir()
    (data / "page_example.json").write_text(PAGE_EXAMPLE)
    (data / "more.jsonl").write_text("".join(json.dumps(s) + "\n" for s in MORE))
    (data / "notes.txt").write_text("not a session file")  # ignored: only .json / .jsonl
    buf_dir = root / "rl_buffer"
    first = _import(buf_dir, data, tiny_model_path)  # DATA_PATH = a directory
    again = _import(buf_dir, data / "page_example.json", tiny_model_path)  # the same file a second time
    engine = HFEngine.load(str(tiny_model_path), dtype="float32", device="cpu", max_batch_size=8)
    app = create_app(ServerConfig(rl=RLConfig(enabled=True, intercept=InterceptConfig(buffer_dir=buf_dir))), engine=engine)
    server = serve_in_background(app)
    judge = JudgeService(JudgeConfig(backend="cpu", batch_size=16, poll_interval_s=0.2), buf_dir).start()
    try:
        deadline = time.monotonic() + 300
        with TrajectoryBuffer.open(buf_dir) as buf:
            while len(judged := buf.fetch_judged("inspect", limit=100)) < 3:
                assert time.monotonic() < deadline, f"judge did not finish: {buf.stats()['by_state']}"
                time.sleep(0.2)  # polling the judge thread's progress
            assert buf.stats()["by_state"].get(JUDGED, 0) >= 3
        yield {"url": server.base_url, "buffer": buf_dir, "first": first, "again": again,
               "judged": {r.session_id: r for r in judged}}
    finally:
        judge.stop()
        server.stop()
        asyncio.run(engine.shutdown())


def _trainer(method: str, stack: dict, model: Path, tmp_path: Path, batch: int):
    from openclaw.demo.presets import method_flags
    from openclaw.demo.trainer import BackgroundTrainer

    flags = method_flags(method, model_path=str(model), engine_addr=stack["url"].split("//", 1)[1],
                         buffer_dir=str(stack["buffer"]), batch_size=batch, lr=5e-2, lora_rank=8, wait_timeout=20.0,
                         extra=["--log-dir", str(tmp_path / "logs"), "--buffer-consumer-id", f"offline-{method}"],
                         baseline="zero")
    return BackgroundTrainer(flags)


def _trainable(model: Any) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def test_import_reports_every_turn_keeps_ids_and_is_idempotent(stack: dict) -> None:
    first, again = stack["first"], stack["again"]
    assert first.returncode == 0, first.stderr
    assert "turn #1: not trained: side turn" in first.stdout  # the page's side turn, said so
    assert "'offline_no_feedback' turn #0: not trained: no next_state" in first.stdout
    assert "DATA_PATH: 3 session(s), 4 turn(s) from 2 file(s)" in first.stdout
    assert again.returncode == 0, again.stderr
    assert "'user_session_abc123' is already in the buffer: not imported again" in again.stdout
    with TrajectoryBuffer.open(stack["buffer"]) as buf:
        assert set(buf.session_ids()) == IMPORTED  # ids kept, nothing doubled
        assert len(buf.session_turns("user_session_abc123")) == 2
    assert set(stack["judged"]) == IMPORTED


def test_a_missing_data_path_is_an_error_naming_it(tmp_path: Path, tiny_model_path: Path) -> None:
    res = _import(tmp_path / "buf", tmp_path / "nowhere.json", tiny_model_path)
    assert res.returncode == 2 and "nowhere.json' does not exist" in res.stderr
    (tmp_path / "empty").mkdir()
    res = _import(tmp_path / "buf", tmp_path / "empty", tiny_model_path)
    assert res.returncode == 2 and "no .json or .jsonl session files" in res.stderr


# rl in the default suite (the page's example trains, about a minute with the stack); the others are slow.
@pytest.mark.parametrize(("method", "batch", "sessions"), [
    ("rl", 2, {"offline_correction", "user_session_abc123"}),
    pytest.param("opd", 1, {"offline_correction"}, marks=pytest.mark.slow),
    pytest.param("combine", 2, {"offline_correction", "user_session_abc123"}, marks=pytest.mark.slow),
])
def test_each_method_trains_on_the_imported_sessions(stack: dict, tiny_model_path: Path, tmp_path: Path,
                                                     capfd: pytest.CaptureFixture, method: str, batch: int,
                                                     sessions: set[str]) -> None:
    from slime.utils.weight_sync import push_to_engines

    page_turn = stack["judged"]["user_session_abc123"]
    if method != "opd":
        assert base.turn_signal(page_turn).score != 0, base.turn_signal(page_turn)  # the judge scored the page's turn
    trainer = _trainer(method, stack, tiny_model_path, tmp_path, batch)
    try:
        before = _trainable(trainer.model)
        rec = trainer.step_once()
        assert rec is not None and rec.samples == batch
        assert {s.session_id for s in rec.samples_data} == sessions  # imported sessions keep their ids
        for s in rec.samples_data:
            # behaviour log-probs: computed from the current policy (the served weights) before training
            assert s.metadata["behaviour_logprobs"] == "current_policy" and s.metadata["imported"]
            assert len(s.rollout_log_probs) == s.response_length and all(x < 0 for x in s.rollout_log_probs)
        m = rec.metrics
        assert m["rollout/logprobs_recomputed"] == batch
        assert m["train/num_samples"] == batch  # the samples reached the loss
        if method != "combine":  # (combine's own loss does not report it)
            assert m["policy/train_rollout_logprob_abs_diff"] < 1e-3  # first step: on-policy-equivalent
        after = _trainable(trainer.model)
        assert any(not torch.equal(before[k], after[k]) for k in before), "no trainable weight changed"
        err = capfd.readouterr().err
        assert re.search(rf"skipped 1 turn \({method}\): no_next_state: .*: turn \d+ of session 'offline_no_feedback'",
                         err)  # said, not only counted
        assert m["rollout/buffer_skipped/no_next_state"] == 1
        if method == "opd":  # the page's turn has praise, no hint: OPD's rule skips it, and says so
            with pytest.raises(TimeoutError):
                base.drain(trainer.args, trainer.data_source, "opd")
            assert re.search(r"skipped 1 turn \(opd\): no_hint: .*: turn \d+ of session 'user_session_abc123'",
                             capfd.readouterr().err)
    finally:
        trainer.stop()
        push_to_engines([stack["url"]], str(tiny_model_path), 0)
