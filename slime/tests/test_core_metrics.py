"""MetricsLogger writes real files: JSONL, training.log, W&B offline run, TensorBoard events."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from slime.utils.arguments import parse_config
from slime.utils.metrics import (
    MetricsAccumulator,
    MetricsLogger,
    StepTimer,
    is_secret_name,
    redact,
    reward_metrics,
    staleness_metrics,
)


def test_jsonl_and_human_log(tmp_path):
    with MetricsLogger(tmp_path / "logs", total_steps=4, progress_bar=True) as logger:
        for step in (1, 2):
            logger.log({"loss/total": torch.tensor(0.5 / step), "reward/mean": 0.25 * step, "gradient/norm": 1.5}, step=step)
        logging.getLogger("slime.rollout.test").info("hello from a trainer module")
    lines = (tmp_path / "logs" / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["step"] for r in records] == [1, 2]
    assert records[1]["loss/total"] == pytest.approx(0.25) and records[1]["reward/mean"] == 0.5
    human = (tmp_path / "logs" / "training.log").read_text()
    assert "step 2/4 eta" in human and "reward/mean=0.5000" in human
    assert "hello from a trainer module" in human
    # the handler is detached on close: later slime logs do not go to a closed file
    assert all(not isinstance(h, logging.FileHandler) or "training.log" not in h.baseFilename
               for h in logging.getLogger("slime").handlers)


def test_secrets_never_written(tmp_path):
    cfg = parse_config(["--wandb-key", "sk-SECRET123", "--log-dir", str(tmp_path / "logs")], env={})
    with MetricsLogger.from_config(cfg, total_steps=1) as logger:
        logger.log({"loss/total": 1.0, "api_key": "sk-SECRET123"}, step=1)
    everything = "".join(p.read_text() for p in (tmp_path / "logs").iterdir() if p.is_file())
    assert "sk-SECRET123" not in everything
    saved = json.loads((tmp_path / "logs" / "config.json").read_text())
    assert saved["logging"]["wandb_key"] == "***"
    assert saved["data"]["input_key"] == "input"  # a dataset column name is not a credential


def test_secret_names():
    for name in ("wandb_key", "OPENCLAW_API_KEY", "hf_token", "db_password", "client_secret", "TINKER_API_KEY"):
        assert is_secret_name(name), name
    for name in ("input_key", "label_key", "max_tokens_per_gpu", "rollout_stop_token_ids", "tokenizer", "reward_key"):
        assert not is_secret_name(name), name
    assert redact({"a": {"access_token": "x", "n": 1}, "password": None}) == {"a": {"access_token": "***", "n": 1}, "password": None}


def test_wandb_offline_run_dir_created(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    with MetricsLogger(tmp_path, use_wandb=True, wandb_project="slime-test", progress_bar=False,
                       config={"lr": 1e-6, "wandb_key": "sk-nope"}) as logger:
        logger.log({"loss/total": 0.3, "learning_rate": 1e-6}, step=1)
        run_dir = Path(logger.wandb_run_dir)
    offline_runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 1 and run_dir.is_relative_to(offline_runs[0])
    assert list(offline_runs[0].glob("*.wandb")), "no W&B data file written"
    config_yaml = offline_runs[0] / "files" / "config.yaml"
    if config_yaml.exists():
        assert "sk-nope" not in config_yaml.read_text()


def test_tensorboard_events_written_and_readable(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tb = tmp_path / "tb"
    with MetricsLogger(tmp_path / "logs", use_tensorboard=True, tb_dir=str(tb), progress_bar=False) as logger:
        logger.log({"loss/total": 0.75, "reward/std": 0.1}, step=3)
        logger.log({"loss/total": 0.5}, step=4)
    assert list(tb.glob("events.out.tfevents.*"))
    acc = EventAccumulator(str(tb))
    acc.Reload()
    events = acc.Scalars("loss/total")
    assert [(e.step, round(e.value, 4)) for e in events] == [(3, 0.75), (4, 0.5)]


def test_non_zero_rank_writes_nothing(tmp_path):
    with MetricsLogger(tmp_path / "r1", rank=1) as logger:
        logger.log({"loss/total": 1.0}, step=1)
    assert not (tmp_path / "r1").exists()


def test_helper_metrics():
    r = reward_metrics([1.0, 0.0, 1.0, 0.0])
    assert r == {"reward/mean": 0.5, "reward/std": 0.5, "reward/min": 0.0, "reward/max": 1.0}
    assert staleness_metrics([3, 2, 2], current_version=3, dropped=1) == {
        "staleness/dropped": 1.0, "staleness/mean": pytest.approx(2 / 3), "staleness/max": 1.0}
    timer = StepTimer()
    with timer("rollout"):
        sum(range(1000))
    with timer("train"):
        pass
    m = timer.metrics(tokens=100)
    assert set(m) == {"time/rollout", "time/train", "time/step", "perf/tokens_per_s"}
    assert m["time/step"] >= m["time/rollout"] + m["time/train"]
    acc = MetricsAccumulator()
    acc.add({"loss/total": torch.tensor(1.0)}, weight=1)
    acc.add({"loss/total": 4.0}, weight=3)
    assert acc.result() == {"loss/total": pytest.approx(13 / 4)}
