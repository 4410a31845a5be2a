"""A short gui-rl training run through the real trainer (python slime/train.py, Ray, embedded
engine, FSDP/LoRA) with the tiny model, 2 steps, 2 browsers, on real MiniWoB++ pages. In the default
suite: it is the short form CI runs with the real browser (~45 s)."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest
from slime.utils.checkpoint import load_meta
from slime.utils.plugins import load_plugin_module

ROOT = Path(__file__).resolve().parents[1]
run_train = load_plugin_module(str(Path(__file__).resolve().parent / "track_helpers.py")).run_train

pytestmark = [
    pytest.mark.ray,
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="chromium not installed"),
]
pytest.importorskip("playwright")


def test_gui_rl_trains(tmp_path, tiny_model_path):
    data = tmp_path / "gui.jsonl"
    subprocess.run([sys.executable, "gui-rl/prepare_data.py", "--tasks", "click-button", "enter-text",
                    "--seeds-per-task", "2", "--out", str(data)], cwd=ROOT, check=True)
    _, samples = run_train(tmp_path, tiny_model_path, data, "gui-rl/gui_generate.py", context_len=1536, batch=2,
                           envs=2)
    # 4 samples per rollout in batches of 2: two optimizer steps per rollout, and the checkpoint says so
    assert load_meta(tmp_path / "ck" / "checkpoint-latest").global_step == 4
    assert len(samples) == 4
    for s in samples:
        meta = s["metadata"]
        assert meta["task"] in ("click-button", "enter-text") and meta["steps"] == 2  # random tiny model: 2 turns
        assert len(s["loss_mask"]) == len(s["rollout_log_probs"]) == s["response_length"] > 0
        assert 0 in s["loss_mask"] and 1 in s["loss_mask"]  # the page between turns is masked out
        assert s["reward"] in (0.0, 1.0)
        shots = [base64.b64decode(x) for x in meta["screenshots"]]
        assert len(shots) >= 1 and all(x.startswith(b"\x89PNG") for x in shots)
