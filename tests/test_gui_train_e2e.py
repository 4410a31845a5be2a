"""A short gui-rl training run through the real trainer (python slime/train.py, Ray, embedded
engine, FSDP/LoRA) with the tiny model, 2 steps, 2 browsers, on real MiniWoB++ pages. In the default
suite: it is the short form CI runs with the real browser (~45 s)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from slime.utils.checkpoint import load_meta

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.ray,
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="chromium not installed"),
]
pytest.importorskip("playwright")


def test_gui_rl_trains(tmp_path, tiny_model_path):
    data = tmp_path / "gui.jsonl"
    subprocess.run([sys.executable, "gui-rl/prepare_data.py", "--tasks", "click-button", "enter-text",
                    "--seeds-per-task", "2", "--out", str(data)], cwd=ROOT, check=True)
    cmd = [
        sys.executable, "slime/train.py", "--hf-checkpoint", str(tiny_model_path), "--rollout-backend", "embedded",
        "--prompt-data", str(data), "--input-key", "input", "--label-key", "label", "--metadata-key", "metadata",
        "--num-rollout", "2", "--rollout-batch-size", "2", "--n-samples-per-prompt", "2", "--global-batch-size", "2",
        "--rollout-max-response-len", "24", "--rollout-max-context-len", "1536", "--parallel-envs", "2",
        "--use-lora", "--lora-rank", "8", "--lora-alpha", "16", "--lora-target-modules", "q_proj", "k_proj",
        "v_proj", "o_proj", "--lr", "1e-3", "--entropy-coef", "0.01", "--max-steps", "2",
        "--custom-generate-function-path", "gui-rl/gui_generate.py",
        "--extra-args-provider-path", "gui-rl/gui_generate.py",
        "--save", str(tmp_path / "ck"), "--log-dir", str(tmp_path / "logs"),
        "--save-debug-rollout-data", str(tmp_path / "rollout_{rollout_id}.jsonl"),
    ]
    env = dict(os.environ, RAY_AUTH_MODE="disabled", HF_HUB_OFFLINE="1")
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    metrics = [json.loads(x) for x in (tmp_path / "logs" / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 2 and (tmp_path / "ck" / "checkpoint-latest").exists()
    # 4 samples per rollout in batches of 2: two optimizer steps per rollout, and the checkpoint says so
    assert load_meta(tmp_path / "ck" / "checkpoint-latest").global_step == 4
    for m in metrics:
        assert m["policy/train_rollout_logprob_abs_diff"] < 1e-3
        assert m["gradient/norm"] > 0
    samples = [json.loads(x) for x in (tmp_path / "rollout_1.jsonl").read_text().splitlines()]
    assert len(samples) == 4
    for s in samples:
        meta = s["metadata"]
        assert meta["task"] in ("click-button", "enter-text") and meta["steps"] == 2  # random tiny model: 2 turns
        assert len(s["loss_mask"]) == len(s["rollout_log_probs"]) == s["response_length"] > 0
        assert 0 in s["loss_mask"] and 1 in s["loss_mask"]  # the page between turns is masked out
        assert s["reward"] in (0.0, 1.0)
        shots = [base64.b64decode(x) for x in meta["screenshots"]]
        assert len(shots) >= 1 and all(x.startswith(b"\x89PNG") for x in shots)
