"""kill -9 the real server (a subprocess) in the middle of a burst of concurrent requests:
every request that got a response must have its durable turn record after a restart, and
`python -m openclaw.buffer verify` must pass."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from openclaw.buffer import TrajectoryBuffer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]



def test_kill_9_mid_burst(tiny_model_path: Path, tmp_path: Path, start_intercept_server) -> None:
    """Reopening the buffer after the kill is what a restarted server does first (SQLite
    recovers the WAL on open); the slow variant below restarts the real server too."""
    _kill_9_mid_burst(tiny_model_path, tmp_path, start_intercept_server, restart=False)


@pytest.mark.slow
def test_kill_9_mid_burst_then_restart(tiny_model_path: Path, tmp_path: Path, start_intercept_server) -> None:
    _kill_9_mid_burst(tiny_model_path, tmp_path, start_intercept_server, restart=True)


def _kill_9_mid_burst(tiny_model_path: Path, tmp_path: Path, start_server, restart: bool) -> None:
    buf, log = tmp_path / "buf", tmp_path / "server.log"
    port = _free_port()
    proc = start_server(tiny_model_path, buf, port, log)
    answered: dict[str, str] = {}  # session id -> content the client received
    lock = threading.Lock()
    enough = threading.Event()
    n_req, n_threads, kill_after = 64, 16, 12

    def worker(ids: list[int]) -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as c:
            for i in ids:
                sid = f"crash-{i}"
                try:
                    r = c.post("/v1/chat/completions", headers={"X-Session-Id": sid},
                               json={"model": "m", "max_tokens": 6,
                                     "messages": [{"role": "user", "content": f"request number {i}"}]})
                except httpx.HTTPError:
                    continue  # the server died under us: no response, no guarantee
                if r.status_code == 200:
                    with lock:
                        answered[sid] = r.json()["choices"][0]["message"]["content"]
                        if len(answered) >= kill_after:
                            enough.set()

    threads = [threading.Thread(target=worker, args=(list(range(k, n_req, n_threads)),)) for k in range(n_threads)]
    for t in threads:
        t.start()
    try:
        assert enough.wait(120), "the burst never produced enough responses"
        os.kill(proc.pid, signal.SIGKILL)  # by PID: the process this test started
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    for t in threads:
        t.join(90)
    got = dict(answered)
    assert kill_after <= len(got) < n_req, f"the kill did not land mid-burst ({len(got)} of {n_req} answered)"

    if restart:  # the same buffer: recovery on open, then a new request still works
        proc2 = start_server(tiny_model_path, buf, port, log)
        try:
            r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", headers={"X-Session-Id": "after"},
                           json={"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": "alive?"}]},
                           timeout=60)
            assert r.status_code == 200
        finally:
            proc2.send_signal(signal.SIGTERM)
            proc2.wait(60)
    with TrajectoryBuffer.open(buf) as b:
        for sid, content in got.items():
            turns = b.session_turns(sid)
            assert len(turns) == 1, f"{sid} got a response but has {len(turns)} records"
            assert (turns[0].content or "") == (content or "")
            assert len(turns[0].response_ids) == len(turns[0].response_logprobs) > 0
        assert len(b.session_turns("after")) == (1 if restart else 0)
        assert b.verify() == []
    r = subprocess.run([sys.executable, "-m", "openclaw.buffer", "verify", "--dir", str(buf)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr
