"""swe-rl through the real trainer: a short CI run (tiny model, 2 steps, 2 instances: python
slime/train.py, Ray, embedded engine, FSDP/LoRA, real sandbox and tests) and, marked slow, the
embedded CPU preset for real (bash swe-rl/run_swe_rl.sh with SmolLM2)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

ROOT = Path(__file__).resolve().parents[1]
# The trainer's plugin loader puts swe-rl on the import path, as in a run; its sibling
# modules are then imported by their own names (one module object each).
load_plugin_module("swe-rl/swe_sources.py")

import swe_sources  # noqa: E402
from swe_instances import shipped_instances  # noqa: E402

run_train = load_plugin_module(str(Path(__file__).resolve().parent / "track_helpers.py")).run_train

pytestmark = [pytest.mark.ray, pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")]


def two_instances() -> list[str]:
    rows = shipped_instances("train")[:2]
    missing = swe_sources.missing_sources([i.sdist for i in rows])
    if missing:
        msg = f"missing: {missing}; run `bash swe-rl/setup_swe.sh`"
        pytest.fail(msg) if os.environ.get("CI") else pytest.skip(msg)
    return [i.instance_id for i in rows]


def test_swe_rl_trains_two_steps(tmp_path, tiny_model_path):
    ids = two_instances()
    data = tmp_path / "swe.jsonl"
    subprocess.run([sys.executable, "swe-rl/prepare_data.py", "--out", str(data), "--ids", *ids], cwd=ROOT, check=True)
    _, samples = run_train(tmp_path, tiny_model_path, data, "swe-rl/swe_generate.py", context_len=2048, batch=4,
                           envs=4, extra=("--prm-step-coef", "0.1"))
    assert len(samples) == 4
    for s in samples:
        assert len(s["loss_mask"]) == len(s["rollout_log_probs"]) == s["response_length"] > 0
        assert 0 in s["loss_mask"]  # tool results were appended and masked
        meta = s["metadata"]
        assert meta["instance_id"] in ids and meta["steps"] == 2
        assert set(meta["test_results"]) == set(meta["instance"]["FAIL_TO_PASS"] + meta["instance"]["PASS_TO_PASS"])
        bonus = 0.1 * sum(meta["step_scores"]) / len(meta["step_scores"])
        assert s["reward"] == pytest.approx((1.0 if meta["resolved"] else 0.0) + bonus)


@pytest.mark.slow
def test_cpu_preset_runs_for_real(tmp_path):
    two_instances()
    env = {k: v for k, v in os.environ.items() if k not in ("MODEL_PATH", "RAY_ADDRESS", "ENV_TYPE")}
    env.update(RAY_AUTH_MODE="disabled", HF_HUB_OFFLINE="1", CKPT_SAVE_DIR=str(tmp_path / "ck"),
               LOG_DIR=str(tmp_path / "logs"), DATA_PATH=str(tmp_path / "train.jsonl"), NUM_ROLLOUT="1",
               MAX_STEPS="2", PARALLEL_ENVS="4", ENV_TYPE="swe")
    out = subprocess.run(["bash", "swe-rl/run_swe_rl.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=1800)
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-3000:])
    assert "EMBEDDED CPU PRESET" in out.stdout + out.stderr
    metrics = (tmp_path / "logs" / "metrics.jsonl").read_text().splitlines()
    assert len(metrics) == 1 and "reward/mean" in json.loads(metrics[0])
