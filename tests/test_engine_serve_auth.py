"""The embedded engine (`python -m openclaw.engines.serve`, the trainer's rollout engine) requires a key
when one is set, and refuses to listen beyond loopback without one: on a Ray cluster of several nodes
slime binds it to the node's address, and an engine reachable without a key takes anyone's weights."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_exposed_engine_without_a_key_is_refused(tiny_model_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENCLAW_API_KEY"}
    out = subprocess.run([sys.executable, "-m", "openclaw.engines.serve", "--model-path", str(tiny_model_path),
                          "--host", "0.0.0.0", "--port", str(_free_port())], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "set OPENCLAW_API_KEY" in out.stderr


def test_engine_with_a_key_answers_only_requests_that_present_it(tiny_model_path: Path) -> None:
    port, key = _free_port(), "engine-key-0123456789"
    proc = subprocess.Popen([sys.executable, "-m", "openclaw.engines.serve", "--model-path", str(tiny_model_path),
                             "--host", "127.0.0.1", "--port", str(port)], cwd=REPO,
                            env={**os.environ, "OPENCLAW_API_KEY": key}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the engine prints its ready line before it serves
            if "openclaw engine ready" in line:
                break
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=60) as client:
            deadline = time.monotonic() + 60
            while True:  # uvicorn binds right after the ready line: poll the port until it answers
                try:
                    health = client.get("/health")
                    break
                except httpx.ConnectError:
                    if time.monotonic() > deadline:
                        raise
            assert health.status_code == 200  # the probe is open
            body = {"text": "hi", "sampling_params": {"max_new_tokens": 1}}
            missing = client.post("/generate", json=body)
            assert missing.status_code == 401 and missing.json()["error"]["code"] == "invalid_api_key"
            wrong = client.post("/update_weights_from_disk", json={"model_path": "/tmp/x"},
                                headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            ok = client.post("/generate", json=body, headers={"Authorization": f"Bearer {key}"})
            assert ok.status_code == 200 and "text" in ok.json()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
