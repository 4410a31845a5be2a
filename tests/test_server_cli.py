"""`python -m openclaw.server` as users run it: a real subprocess, its banner, and its refusals."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time

import httpx
import pytest

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def test_refuses_public_bind_without_key():
    env = {k: v for k, v in ENV.items() if k != "OPENCLAW_API_KEY"}
    proc = subprocess.run([sys.executable, "-m", "openclaw.server", "--host", "0.0.0.0"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "refusing to bind 0.0.0.0:8000 without an API key" in proc.stderr and "OPENCLAW_API_KEY" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "openclaw.server", "--no-such-flag"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unrecognized argument: --no-such-flag" in proc.stderr


@pytest.fixture
def started(tiny_model_path, tmp_path):
    """Start the server on a free port with the RL intercept on; yield (base_url, banner, buffer dir)."""
    buf = tmp_path / "rl_buffer"
    env = {**ENV, "OPENCLAW_PORT": "0", "OPENCLAW_API_KEY": "k-123"}
    proc = subprocess.Popen([sys.executable, "-m", "openclaw.server", "--model-path", str(tiny_model_path),
                             "--enable-rl-intercept", "--rl-buffer-dir", str(buf), "--log-level", "info"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    ready = threading.Event()

    def pump() -> None:  # read output in a thread so a silent hang cannot block the test
        for line in proc.stdout:
            lines.append(line)
            if "openclaw.json provider snippet" in line:
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        deadline = time.monotonic() + 180
        while not ready.is_set():
            assert proc.poll() is None, "server exited:\n" + "".join(lines)
            assert time.monotonic() < deadline, "server not ready:\n" + "".join(lines)
            ready.wait(0.1)
        banner = "".join(lines)
        url = re.search(r"OpenAI API\s+: (http://\S+)/v1", banner).group(1)
        yield url, banner, buf
    finally:
        proc.terminate()  # SIGTERM by PID: graceful shutdown, then uvicorn re-raises the signal
        try:
            assert proc.wait(60) in (0, -15), "".join(lines)
            deadline = time.monotonic() + 10
            while "OpenClaw-RL server stopped (engine shut down)" not in "".join(lines):
                assert time.monotonic() < deadline, "no graceful shutdown:\n" + "".join(lines)
                time.sleep(0.05)
        finally:
            if proc.poll() is None:
                proc.kill()


def test_cli_serves_with_banner_auth_and_intercept(started, tiny_model_path):
    url, banner, buf = started
    assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
    snippet = json.loads(banner[banner.index("{", banner.index("provider snippet")):])
    provider = snippet["models"]["providers"]["openclaw-rl"]
    assert provider["baseUrl"] == url + "/v1" and provider["api"] == "openai-completions"
    assert provider["models"][0]["id"] == tiny_model_path.name and "k-123" not in banner
    body = {"model": tiny_model_path.name, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    assert httpx.post(url + "/v1/chat/completions", json=body, timeout=60).status_code == 401
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=60,
                   headers={"Authorization": "Bearer k-123", "X-Session-Id": "cli-session"})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 3
    # The intercept stored the turn durably before the reply was sent (read by a second process).
    from openclaw.buffer import TrajectoryBuffer

    store = TrajectoryBuffer.open(buf)
    try:
        (turn,) = store.session_turns("cli-session")
    finally:
        store.close()
    assert turn.request_id == r.json()["id"] and len(turn.response_ids) == 3
    assert len(turn.response_logprobs) == 3 and turn.prompt_ids and turn.model == tiny_model_path.name
