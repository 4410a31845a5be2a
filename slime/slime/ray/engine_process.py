"""Inference engines as child processes, started and stopped by PID.

CPU (and GPU without SGLang): `python -m openclaw.engines.serve` (the embedded engine, SGLang's
HTTP API). GPU with SGLang installed: `python -m sglang.launch_server` through
openclaw.engines.sglang_backend when the engine helper's launcher is available.
Each process runs in its own session so that stopping it also stops anything it spawned.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class EngineProcess:
    model_path: str
    host: str = "127.0.0.1"
    port: int = 0
    dtype: str = "float32"
    device: str | None = None
    max_batch_size: int = 16
    log_path: Path | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "openclaw.engines.serve", "--model-path", str(self.model_path),
               "--host", self.host, "--port", str(self.port), "--dtype", self.dtype,
               "--max-batch-size", str(self.max_batch_size)]
        if self.device:
            cmd += ["--device", self.device]
        return cmd

    def start(self, timeout_s: float = 300.0) -> None:
        """Launch and wait for /health; retries on a port taken between probe and bind."""
        last_error = ""
        for _ in range(3):
            if not self.port:
                self.port = free_port(self.host)
            log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
            env = dict(os.environ, **self.extra_env)
            env.setdefault("TOKENIZERS_PARALLELISM", "false")
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
            if log is not subprocess.DEVNULL:
                log.close()
            ok, last_error = self._wait_healthy(timeout_s)
            if ok:
                return
            self.stop()
            self.port = 0
        raise RuntimeError(f"engine for {self.model_path} did not become healthy: {last_error}"
                           + (f" (log: {self.log_path})" if self.log_path else ""))

    def _wait_healthy(self, timeout_s: float) -> tuple[bool, str]:
        deadline = time.monotonic() + timeout_s
        error = "timeout"
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False, f"process exited with {self.proc.returncode if self.proc else None}"
            try:
                if httpx.get(self.url + "/health", timeout=2.0).status_code == 200:
                    return True, ""
            except httpx.HTTPError as exc:
                error = str(exc)
            time.sleep(0.2)  # polling interval while waiting on a condition with a deadline
        return False, error

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM the engine's process group (it is the group leader), SIGKILL after a timeout."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=timeout_s)
        self.proc = None
