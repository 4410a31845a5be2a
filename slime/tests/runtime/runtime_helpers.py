"""Shared helpers of the trainer-runtime end-to-end tests (real subprocesses, real Ray)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

EVEN_RM = '''
async def reward_func(args, sample):
    """Verifiable reward: the fraction of response tokens with an even token id."""
    resp = sample.tokens[len(sample.tokens) - sample.response_length:]
    return sum(1 for t in resp if t % 2 == 0) / max(1, len(resp))
'''


def private_model(src: Path, dst: Path) -> Path:
    """A private copy of the tiny model: its path identifies this test's engine processes."""
    shutil.copytree(src, dst)
    return dst


def write_task(tmp: Path, n_prompts: int = 64) -> tuple[Path, Path]:
    prompts = tmp / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"input": f"Question {i}: write something.", "label": "x"}) + "\n"
                               for i in range(n_prompts)))
    rm = tmp / "even_rm.py"
    rm.write_text(EVEN_RM)
    return prompts, rm


def base_flags(model: Path, prompts: Path, rm: Path, tmp: Path, engine_command: str) -> list[str]:
    return ["--hf-checkpoint", str(model), "--prompt-data", str(prompts), "--custom-rm-path", str(rm),
            "--rollout-batch-size", "4", "--n-samples-per-prompt", "4", "--rollout-max-response-len", "8",
            "--rollout-top-k", "8", "--lr", "5e-3", "--use-dynamic-batch-size", "--max-tokens-per-gpu", "4096",
            "--log-dir", str(tmp / "logs"), "--no-progress-bar", "--rollout-engine-command", engine_command]


@dataclass(frozen=True)
class Task:
    """The runtime tests' learning task (prompts, a verifiable reward) on a private copy of the tiny
    model, whose path identifies this test's engine and worker processes."""

    tmp: Path
    model: Path
    prompts: Path
    rm: Path
    engine_command: str

    def flags(self, rm: Path | None = None) -> list[str]:
        """The trainer's flags for the task; `rm`: another reward plugin instead of the task's."""
        return base_flags(self.model, self.prompts, rm or self.rm, self.tmp, self.engine_command)


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """n distinct free ports: every socket stays bound until all are chosen, so none repeats."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind((host, 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def env() -> dict[str, str]:
    e = dict(os.environ, RAY_AUTH_MODE="disabled", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
             PYTHONUNBUFFERED="1")
    e.pop("RAY_ADDRESS", None)
    return e


def run_script(script: str, flags: list[str], timeout: float = 900, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "slime" / script), *flags], cwd=cwd, env=env(),
                          capture_output=True, text=True, timeout=timeout)


def metrics(log_dir: Path) -> list[dict]:
    path = log_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def processes_mentioning(text: str) -> list[int]:
    """PIDs whose command line contains `text` (to prove nothing we started outlived the run)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            status = (proc / "status").read_text()
        except OSError:
            continue
        if text in cmd and "zombie" not in status:
            found.append(int(proc.name))
    return found


def wait_for(cond, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(interval)  # polling a condition with a deadline
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
