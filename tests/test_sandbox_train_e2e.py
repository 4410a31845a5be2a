"""Short CPU training runs of terminal-rl and toolcall-rl through the real trainer
(python slime/train.py, Ray, embedded engine, FSDP/LoRA) with the tiny model."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.ray,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
]


def run_train(tmp_path: Path, model: Path, data: Path, method: list[str]) -> tuple[list[dict], list[dict]]:
    cmd = [
        sys.executable, "slime/train.py", "--hf-checkpoint", str(model), "--rollout-backend", "embedded",
        "--prompt-data", str(data), "--input-key", "input", "--label-key", "label", "--metadata-key", "metadata",
        "--num-rollout", "2", "--rollout-batch-size", "2", "--n-samples-per-prompt", "2", "--global-batch-size", "4",
        "--rollout-max-response-len", "24", "--rollout-max-context-len", "1024", "--parallel-envs", "4",
        "--use-lora", "--lora-rank", "8", "--lora-alpha", "16", "--lora-target-modules", "q_proj", "k_proj",
        "v_proj", "o_proj", "--lr", "1e-3", "--entropy-coef", "0.01", "--max-steps", "2",
        "--save", str(tmp_path / "ck"), "--log-dir", str(tmp_path / "logs"),
        "--save-debug-rollout-data", str(tmp_path / "rollout_{rollout_id}.jsonl"), *method,
    ]
    env = dict(os.environ, RAY_AUTH_MODE="disabled", HF_HUB_OFFLINE="1")
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    metrics = [json.loads(x) for x in (tmp_path / "logs" / "metrics.jsonl").read_text().splitlines()]
    samples = [json.loads(x) for x in (tmp_path / "rollout_1.jsonl").read_text().splitlines()]
    assert len(metrics) == 2
    assert (tmp_path / "ck" / "checkpoint-latest").exists()
    for m in metrics:
        # The trainer recomputes the rollout's log-probs on the response tokens: they agree.
        assert m["policy/train_rollout_logprob_abs_diff"] < 1e-3
        assert m["gradient/norm"] > 0  # the entropy term reaches the LoRA weights through the mask
    for s in samples:
        assert len(s["loss_mask"]) == len(s["rollout_log_probs"]) == s["response_length"] > 0
    return metrics, samples


def test_terminal_rl_trains(tmp_path, tiny_model_path):
    data = tmp_path / "terminal.jsonl"
    subprocess.run([sys.executable, "terminal-rl/prepare_data.py", "--out", str(data), "--ids", "create-file",
                    "count-lines"], cwd=ROOT, check=True)
    _, samples = run_train(tmp_path, tiny_model_path, data, [
        "--custom-generate-function-path", "terminal-rl/terminal_generate.py",
        "--extra-args-provider-path", "terminal-rl/terminal_generate.py", "--prm-step-coef", "0.1",
    ])
    for s in samples:
        assert s["metadata"]["task_id"] in ("create-file", "count-lines")
        assert 0 in s["loss_mask"]  # observations were appended and masked
        assert s["metadata"]["steps"] == 2


def test_toolcall_rl_trains(tmp_path, tiny_model_path):
    subprocess.run([sys.executable, "toolcall-rl/prepare_data.py", "--train-size", "8", "--eval-limit", "2",
                    "--out-dir", str(tmp_path / "data")], cwd=ROOT, check=True)
    _, samples = run_train(tmp_path, tiny_model_path, tmp_path / "data" / "train.jsonl", [
        "--custom-generate-function-path", "toolcall-rl/toolcall_generate.py",
        "--extra-args-provider-path", "toolcall-rl/toolcall_generate.py", "--tool-use-bonus", "0.1",
    ])
    for s in samples:
        assert s["metadata"]["answer_true"] and s["reward"] in (0.0, 1.0, 1.1)
