"""A test run that gets SIGTERM (a CI timeout, a kill of its process group) still runs its fixtures'
teardown, so a server a fixture started in its own session is stopped, not left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from openclaw.proctree import live_group_members, stop_process_group

REPO = Path(__file__).resolve().parents[1]

INNER_TEST = """
import os, pathlib, subprocess, sys, time
import pytest

@pytest.fixture(scope="session")
def server():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()

def test_waits(server):
    print(server.pid, flush=True)
    time.sleep(300)
"""


def test_sigterm_to_the_test_run_stops_what_its_fixtures_started(tmp_path):
    (tmp_path / "test_inner.py").write_text(INNER_TEST)
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "conftest", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    server = None
    try:
        for line in run.stdout:
            if line.strip().isdigit():
                server = int(line)
                break
        assert server is not None, "the inner run never started its server"
        assert live_group_members(server) == [server]
        os.killpg(run.pid, signal.SIGTERM)  # what reaches the server: nothing, it has its own session
        rest = run.communicate(timeout=60)[0]
        assert "KeyboardInterrupt: SIGTERM" in rest, rest
        assert live_group_members(server) == []
    finally:
        stop_process_group(run.pid)
        if server is not None:
            stop_process_group(server)
        run.wait(timeout=30)
        run.stdout.close()
