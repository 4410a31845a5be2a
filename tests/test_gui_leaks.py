"""gui-rl browsers never leak: after Ctrl-C or a killed worker, no Chromium process it started is
left. A real worker process opens real browsers; the test collects their PIDs from /proc, stops the
worker, and checks each PID."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openclaw.proctree import descendants

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="chromium not installed")
pytest.importorskip("playwright")

WORKER = """
import sys, threading
from slime.utils.plugins import load_plugin_module
gui_env = load_plugin_module("gui-rl/gui_env.py")
pool = gui_env.BrowserPool(2)
held = [pool.env_sync() for _ in range(2)]
envs = [h.__enter__() for h in held]
for env in envs:
    env.reset("click-test", 1_000_000)
print("ready", flush=True)
threading.Event().wait()  # until interrupted or killed
"""




def alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"  # a zombie has exited; only its parent's bookkeeping is left


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def start_worker() -> tuple[subprocess.Popen[str], set[int]]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-c", WORKER], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the browsers are up (or the worker died)
    assert line.strip() == "ready", proc.stderr.read() if proc.stderr else line
    browsers = {p for p in descendants(proc.pid) if comm(p).startswith("chrom")}
    assert len(browsers) >= 2  # two browsers (each several processes)
    return proc, browsers


def wait_gone(pids: set[int], timeout: float = 30.0) -> set[int]:
    """The PIDs still alive once all are gone or the deadline passes (a deadline, not a sleep:
    the outcome does not depend on speed unless a browser really survives)."""
    deadline = time.monotonic() + timeout
    left = {p for p in pids if alive(p) and comm(p).startswith("chrom")}
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = {p for p in left if alive(p) and comm(p).startswith("chrom")}
    return left


def test_ctrl_c_closes_every_browser():
    proc, browsers = start_worker()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    assert wait_gone(browsers) == set()


def test_killed_worker_leaves_no_browser():
    proc, browsers = start_worker()
    proc.kill()  # SIGKILL: no Python cleanup runs at all
    proc.wait(timeout=30)
    assert wait_gone(browsers) == set()


def test_close_ends_browsers_in_process():
    from slime.utils.plugins import load_plugin_module

    gui_env = load_plugin_module("gui-rl/gui_env.py")
    before = descendants(os.getpid())
    pool = gui_env.BrowserPool(1)
    with pool.env_sync() as env:
        env.reset("click-test", 1_000_000)
    started = {p for p in descendants(os.getpid()) - before if comm(p).startswith("chrom")}
    assert started
    pool.close()
    assert wait_gone(started) == set()



def test_a_borrow_open_at_close_ends_without_waiting_on_the_stopped_loop():
    """Ctrl-C: atexit closes the pool while an `env_sync` borrow is still open; the borrow's exit then
    runs against a stopped loop. It must return at once, and any later call must fail, not wait."""
    from slime.utils.plugins import load_plugin_module

    gui_env = load_plugin_module("gui-rl/gui_env.py")
    pool = gui_env.BrowserPool(1)
    borrow = pool.env_sync()
    borrow.__enter__().reset("click-test", 1_000_000)
    pool.close()
    borrow.__exit__(None, None, None)  # before the fix: blocked 120 s on a future nobody would run
    with pytest.raises(RuntimeError, match="closed"):
        pool.run(asyncio.sleep(0))
