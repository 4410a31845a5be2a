"""gui-rl's launch scripts: thin wrappers (shellcheck), what run_gui_rl.sh would submit (dry run),
and what run_gui_agent.sh says for a vision-language model without a GPU or a missing Selenium."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

ROOT = Path(__file__).resolve().parents[1]
check_shell_script = load_plugin_module(str(Path(__file__).resolve().parent / "track_helpers.py")).check_shell_script
RL, AGENT = ROOT / "gui-rl" / "run_gui_rl.sh", ROOT / "gui-rl" / "run_gui_agent.sh"
NO_GPU = shutil.which("nvidia-smi") is None


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MODEL_PATH", "RAY_ADDRESS", "MAX_STEPS", "PARALLEL_ENVS",
                                                          "ENV_TYPE", "SCREENSHOT_BACKEND")}
    env.update(extra)
    return env


@pytest.mark.parametrize("script", [RL, AGENT], ids=lambda p: p.name)
def test_bash_syntax_and_shellcheck(script):
    check_shell_script(script)


@pytest.mark.skipif(not NO_GPU, reason="the CPU preset applies only without a GPU")
def test_rl_script_dry_run_cpu_preset(tmp_path):
    env = clean_env(DRY_RUN="1", CPU_PRESET_MODEL="tiny", ENV_TYPE="gui", SCREENSHOT_BACKEND="playwright",
                    PARALLEL_ENVS="16", MAX_STEPS="3", CKPT_SAVE_DIR=str(tmp_path / "ck"),
                    LOG_DIR=str(tmp_path / "logs"), DATA_PATH=str(tmp_path / "train.jsonl"))
    out = subprocess.run(["bash", str(RL)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "EMBEDDED CPU PRESET" in out.stdout and "ray job submit" in out.stdout
    for piece in ("--custom-generate-function-path gui-rl/gui_generate.py", "--parallel-envs 16", "--max-steps 3",
                  "--screenshot-backend playwright", "--rollout-backend embedded"):
        assert piece in out.stdout, piece
    assert not (tmp_path / "train.jsonl").exists()  # a dry run writes nothing: it shows the preparation a real launch runs first; run that here
    prepare = next(ln for ln in out.stdout.splitlines() if ln.startswith("would run prepare: "))
    subprocess.run(shlex.split(prepare[len("would run prepare: "):]), cwd=ROOT, check=True, timeout=300)
    assert len((tmp_path / "train.jsonl").read_text().splitlines()) >= 20 * 50  # prepared from the task list
    bad = subprocess.run(["bash", str(RL)], cwd=tmp_path, env=dict(env, ENV_TYPE="terminal"), capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode != 0 and "ENV_TYPE" in bad.stderr


@pytest.mark.skipif(not NO_GPU, reason="on a GPU machine the VL path is available")
def test_agent_vl_model_needs_gpu_path():
    out = subprocess.run(["bash", str(AGENT), "--model", "qwen3.5-vl"], cwd=ROOT, env=clean_env(),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "GPU/SGLang path" in out.stderr and "NO GPU" in out.stderr and "--model smollm2" in out.stderr


@pytest.mark.skipif(importlib.util.find_spec("selenium") is not None and shutil.which("chromedriver") is not None,
                    reason="Selenium is installed")
def test_selenium_backend_says_what_to_install():
    out = subprocess.run(["bash", str(AGENT), "--model", "smollm2"], cwd=ROOT,
                         env=clean_env(SCREENSHOT_BACKEND="selenium"), capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "pip install selenium" in out.stderr


@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="chromium not installed")
def test_eval_shows_progress_and_each_tasks_result(tmp_path):
    """An evaluation on CPU can take minutes: it says how far it is and each task's result as it finishes."""
    out = subprocess.run([sys.executable, str(ROOT / "gui-rl" / "gui_eval.py"), "--tasks", "click-button", "focus-text",
                          "--policy", "scripted", "--episodes", "2", "--parallel-envs", "2", "--max-steps", "2",
                          "--out", str(tmp_path)], cwd=ROOT, env=clean_env(), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "[gui-eval/scripted] 0/4 started" in out.stderr and "[gui-eval/scripted] 4/4 episodes done" in out.stderr
    for task in ("click-button", "focus-text"):  # success itself is test_gui_env's to check
        assert re.search(rf"^\[gui-eval/scripted\] {task}: [0-2]/2 succeeded$", out.stderr, re.M), out.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert all(len(e["error_messages"]) == e["errors"] for e in report["episodes"])
