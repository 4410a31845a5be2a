"""Short CPU training runs of terminal-rl and toolcall-rl through the real trainer
(python slime/train.py, Ray, embedded engine, FSDP/LoRA) with the tiny model."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

ROOT = Path(__file__).resolve().parents[1]
run_train = load_plugin_module(str(Path(__file__).resolve().parent / "track_helpers.py")).run_train

pytestmark = [
    pytest.mark.slow,
    pytest.mark.ray,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
]


def test_terminal_rl_trains(tmp_path, tiny_model_path):
    data = tmp_path / "terminal.jsonl"
    subprocess.run([sys.executable, "terminal-rl/prepare_data.py", "--out", str(data), "--ids", "create-file",
                    "count-lines"], cwd=ROOT, check=True)
    _, samples = run_train(tmp_path, tiny_model_path, data, "terminal-rl/terminal_generate.py", context_len=1024,
                           batch=4, envs=4, extra=("--prm-step-coef", "0.1"))
    for s in samples:
        assert s["metadata"]["task_id"] in ("create-file", "count-lines")
        assert 0 in s["loss_mask"]  # observations were appended and masked
        assert s["metadata"]["steps"] == 2


def test_toolcall_rl_trains(tmp_path, tiny_model_path):
    subprocess.run([sys.executable, "toolcall-rl/prepare_data.py", "--train-size", "8", "--eval-limit", "2",
                    "--out-dir", str(tmp_path / "data")], cwd=ROOT, check=True)
    _, samples = run_train(tmp_path, tiny_model_path, tmp_path / "data" / "train.jsonl",
                           "toolcall-rl/toolcall_generate.py", context_len=1024, batch=4, envs=4,
                           extra=("--tool-use-bonus", "0.1"))
    for s in samples:
        assert s["metadata"]["answer_true"] and s["reward"] in (0.0, 1.0, 1.1)
