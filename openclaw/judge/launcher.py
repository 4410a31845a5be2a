"""Launch `python -m openclaw.server --model-path X --port 0` as a judge endpoint we own: a
subprocess in its own process group, found by reading its ready banner, stopped by PID."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from openclaw.proctree import stop_started_group

_READY_RE = re.compile(r"OpenAI API\s*:\s*(http://\S+?)/v1\b")


@dataclass
class LaunchedJudgeServer:
    proc: subprocess.Popen
    base_url: str  # http://127.0.0.1:PORT/v1
    _log: deque = field(default_factory=lambda: deque(maxlen=200))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM the server's process group (it is ours: start_new_session), SIGKILL it after
        `timeout`; returns once no member is left."""
        stop_started_group(self.proc, grace_s=timeout)


def launch_judge_server(model_path: str, startup_timeout: float = 300.0,
                        extra_args: list[str] | None = None) -> LaunchedJudgeServer:
    cmd = [sys.executable, "-m", "openclaw.server", "--model-path", model_path, "--host", "127.0.0.1",
           "--port", "0", "--log-level", "warning", *(extra_args or [])]
    env = dict(os.environ)
    env.pop("OPENCLAW_API_KEY", None)  # a loopback judge needs no key; never inherit the policy's
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    lines: deque = deque(maxlen=200)
    found: list[str] = []
    ready = threading.Event()

    def pump() -> None:  # drain output forever so the child never blocks on a full pipe
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip())
            if not found:
                m = _READY_RE.search(line)
                if m:
                    found.append(m.group(1) + "/v1")
                    ready.set()
        ready.set()

    threading.Thread(target=pump, name=f"judge-server-{proc.pid}-log", daemon=True).start()
    server = LaunchedJudgeServer(proc, "", lines)
    deadline = time.monotonic() + startup_timeout
    while not found:
        if proc.poll() is not None:
            raise RuntimeError(f"judge server exited with {proc.returncode}:\n" + "\n".join(list(lines)[-20:]))
        if time.monotonic() > deadline:
            server.stop()
            raise TimeoutError(f"judge server on {model_path} not ready after {startup_timeout:g}s")
        ready.wait(0.2)
    server.base_url = found[0]
    return server
