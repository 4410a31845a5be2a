"""`ray job submit --working-dir . -- python slime/train.py ...` against a local Ray head that
this test starts (private ports and temp dir) and stops by the PID of its `ray start --block`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import httpx
import pytest
from runtime_helpers import REPO, env, free_ports, metrics, processes_mentioning, wait_for

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture
def ray_head():
    """A private head: every port chosen here, its own --temp-dir; `--block` makes the CLI
    process own the cluster, so SIGTERM to that one PID stops exactly this cluster."""
    temp_dir = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))  # short: unix socket paths are limited
    gcs, dash, client, agent, agent_grpc, metrics_port, runtime_env = free_ports(7)
    cmd = [shutil.which("ray") or "ray", "start", "--head", "--block", "--num-cpus", "2", "--num-gpus", "0",
           "--port", str(gcs), "--dashboard-port", str(dash), "--dashboard-host", "127.0.0.1",
           "--ray-client-server-port", str(client), "--dashboard-agent-listen-port", str(agent),
           "--dashboard-agent-grpc-port", str(agent_grpc), "--metrics-export-port", str(metrics_port),
           "--runtime-env-agent-port", str(runtime_env), "--temp-dir", str(temp_dir), "--include-dashboard", "true"]
    head = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    url = f"http://127.0.0.1:{dash}"

    def dashboard_up():
        if head.poll() is not None:
            raise RuntimeError(f"ray start exited: {head.stdout.read()[-3000:]}")
        try:
            return httpx.get(url + "/api/version", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(dashboard_up, 180, "the Ray dashboard")
        yield url, temp_dir
    finally:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(timeout=30)
        try:  # every process of this cluster has the private temp dir on its command line
            wait_for(lambda: not processes_mentioning(str(temp_dir)), 60, "the head's processes to exit")
        finally:
            stray = processes_mentioning(str(temp_dir))
            for pid in stray:  # ours by construction (private temp dir), never another cluster's
                os.kill(pid, signal.SIGKILL)
            shutil.rmtree(temp_dir, ignore_errors=True)
        assert not stray, f"processes outlived `ray start --block`: {stray}"


def test_ray_job_submit_train(ray_head, tmp_path, task):
    url, temp_dir = ray_head
    model = task.model
    flags = task.flags() + ["--num-rollout", "2", "--save", str(tmp_path / "ckpt")]
    job_env = env()
    submit = subprocess.run(
        [shutil.which("ray") or "ray", "job", "submit", "--address", url, "--working-dir", str(REPO), "--",
         "python", "slime/train.py", *flags],
        cwd=REPO, env=job_env, capture_output=True, text=True, timeout=900)
    assert submit.returncode == 0, (submit.stdout + submit.stderr)[-4000:]
    assert "succeeded" in (submit.stdout + submit.stderr).lower()
    rows = metrics(tmp_path / "logs")
    assert [r["step"] for r in rows] == [0, 1]
    assert (tmp_path / "ckpt" / "checkpoint-latest" / "slime_meta.json").is_file()
    assert not processes_mentioning(str(model))  # engines stopped with the job


LEARNING_FLAGS = {
    "full": ["--num-rollout", "8"],
    "lora": ["--num-rollout", "10", "--rollout-batch-size", "8", "--use-lora", "--lora-rank", "8",
             "--lora-alpha", "16", "--lr", "2e-2"],
}


@pytest.mark.parametrize("mode", sorted(LEARNING_FLAGS))
def test_ray_job_submit_learns(ray_head, tmp_path, task, mode):
    """The acceptance run: through `ray job submit`, the verifiable reward rises clearly, for
    full fine-tuning and for LoRA (same task and settings as the local learning tests)."""
    url, _ = ray_head
    flags = task.flags() + LEARNING_FLAGS[mode]
    submit = subprocess.run(
        [shutil.which("ray") or "ray", "job", "submit", "--address", url, "--working-dir", str(REPO), "--",
         "python", "slime/train.py", *flags],
        cwd=REPO, env=env(), capture_output=True, text=True, timeout=1500)
    assert submit.returncode == 0, (submit.stdout + submit.stderr)[-4000:]
    rewards = [r["reward/mean"] for r in metrics(tmp_path / "logs")]
    first, last = sum(rewards[:2]) / 2, sum(rewards[-2:]) / 2
    assert last > first + 0.2 and last > 0.8, f"reward did not rise under ray job submit: {rewards}"
