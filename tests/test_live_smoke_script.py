"""scripts/live_smoke.py, the live half of scripts/gpu_smoke.sh, run here on the CPU: the LoRA run script
serves the tiny model with the RL intercept, the length-only reward judges the chats the script sends,
the Ray job trains two steps and pushes both adapters, and the server promotes the second version."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.ray]


def test_live_smoke_trains_two_steps_and_serves_the_second_version(tmp_path: Path, tiny_model_path: Path) -> None:
    out = subprocess.run([sys.executable, "scripts/live_smoke.py", "--model", str(tiny_model_path), "--steps", "2",
                          "--out", str(tmp_path / "live"), "--timeout", "500"],
                         cwd=REPO, capture_output=True, text=True, timeout=560)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert "ok   the server promoted weight version 2 (passed its canary: served)" in out.stdout
    assert "OK: live loop, 2 LoRA steps" in out.stdout
    assert list((tmp_path / "live" / "ckpt").glob("checkpoint-*/adapter_model.safetensors"))
