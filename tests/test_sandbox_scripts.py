"""The Track 2 launch scripts: syntax, shellcheck, thin wrappers over `python -m openclaw.launch`, and
what they would submit (DRY_RUN=1)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

ROOT = Path(__file__).resolve().parents[1]
check_shell_script = load_plugin_module(str(Path(__file__).resolve().parent / "track_helpers.py")).check_shell_script
SCRIPTS = [ROOT / "terminal-rl" / "run_terminal_rl.sh", ROOT / "toolcall-rl" / "run_toolcall_rl.sh"]
NO_GPU = shutil.which("nvidia-smi") is None


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_bash_syntax_and_shellcheck(script):
    assert "exec \"${PYTHON:-python}\" -m openclaw.launch " in script.read_text()  # one launcher, in Python
    check_shell_script(script)


def dry_run(script: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("MODEL_PATH", "RAY_ADDRESS", "MAX_STEPS",
                                                            "PARALLEL_ENVS", "ENV_TYPE", "TOOLS_CONFIG")}
    full.update(DRY_RUN="1", CKPT_SAVE_DIR=str(tmp_path / "ck"), LOG_DIR=str(tmp_path / "logs"),
                DATA_PATH=str(tmp_path / "train.jsonl"), DATA_DIR=str(tmp_path / "data"), **env)
    return subprocess.run(["bash", str(script)], cwd=tmp_path, env=full, capture_output=True, text=True, timeout=120)


def _prepare(stdout: str) -> None:
    for line in stdout.splitlines():
        if line.startswith("would run prepare: "):
            subprocess.run(shlex.split(line[len("would run prepare: "):]), cwd=ROOT, check=True, timeout=300)


def _submitted(stdout: str) -> str:
    """The trainer command of the `would run submit: ray job submit ... -- CMD` line."""
    line = next(ln for ln in stdout.splitlines() if ln.startswith("would run submit: "))
    argv = shlex.split(line[len("would run submit: "):])
    assert argv[:3] == ["ray", "job", "submit"] and "--working-dir" in argv
    return shlex.join(argv[argv.index("--") + 1:])


@pytest.mark.skipif(not NO_GPU, reason="the CPU preset applies only without a GPU")
def test_terminal_script_cpu_preset(tmp_path):
    out = dry_run(SCRIPTS[0], tmp_path, CPU_PRESET_MODEL="tiny", MAX_STEPS="3", PARALLEL_ENVS="5")
    assert out.returncode == 0, out.stderr
    assert "EMBEDDED CPU PRESET" in out.stdout
    cmd = _submitted(out.stdout)
    assert cmd.startswith("python slime/train.py")
    for piece in ("--custom-generate-function-path terminal-rl/terminal_generate.py", "--max-steps 3",
                  "--parallel-envs 5", "--rollout-backend embedded", "--use-lora", "tiny-qwen3"):
        assert piece in cmd, piece
    assert not (tmp_path / "train.jsonl").exists()  # a dry run writes nothing: it shows the preparation a real launch runs first; run that here
    _prepare(out.stdout)
    assert (tmp_path / "train.jsonl").is_file()  # prompt data prepared from the tasks
    assert not (tmp_path / "ck").exists()  # a dry run creates no run folders


@pytest.mark.skipif(not NO_GPU, reason="the CPU preset applies only without a GPU")
def test_toolcall_script_cpu_preset_and_bad_input(tmp_path):
    out = dry_run(SCRIPTS[1], tmp_path, CPU_PRESET_MODEL="tiny", EVAL_LIMIT="3")
    assert out.returncode == 0, out.stderr
    cmd = _submitted(out.stdout)
    assert "--tools-config " + str(ROOT / "toolcall-rl" / "tools_config.json") in cmd
    assert "--eval-prompt-data gsm8k" in cmd and "--tool-use-bonus 0.1" in cmd
    assert not (tmp_path / "data").exists()  # a dry run writes nothing: it shows the preparation a real launch runs first; run that here
    _prepare(out.stdout)
    assert len((tmp_path / "data" / "eval.jsonl").read_text().splitlines()) == 3
    bad = dry_run(SCRIPTS[1], tmp_path, CPU_PRESET_MODEL="tiny", ENV_TYPE="terminal")
    assert bad.returncode == 2 and "ENV_TYPE" in bad.stderr
    bad = dry_run(SCRIPTS[1], tmp_path, CPU_PRESET_MODEL="tiny", TOOLS_CONFIG=str(tmp_path / "nope.json"))
    assert bad.returncode == 2 and "does not exist" in bad.stderr
    bad = dry_run(SCRIPTS[0], tmp_path, CPU_PRESET_MODEL="huge")
    assert bad.returncode == 2 and "CPU_PRESET_MODEL" in bad.stderr
