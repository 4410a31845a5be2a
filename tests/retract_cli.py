"""What the retract end-to-end tests share: reading files as another process would, the served
version, and a CLI retract killed -9 at a journal state."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

from openclaw.control.retract import PAUSE_ENV


def grep_files(phrase: str, *paths: Path) -> list[str]:
    """Files holding `phrase`, read by another process (grep), WAL and -shm included."""
    existing = [str(p) for p in paths if p.exists()]
    if not existing:
        return []
    out = subprocess.run(["grep", "-rla", "--", phrase, *existing], capture_output=True, text=True)
    assert out.returncode in (0, 1), out.stderr
    return out.stdout.split()


def served_version(url: str) -> int:
    return int(httpx.get(url + "/get_weight_version", timeout=30).json()["weight_version"])


def retract_cli_killed_at(state: str, buf_dir: Path, session_id: str, url: str,
                          in_window: Callable[[], None] | None = None) -> None:
    """Run `python -m openclaw.control retract` in a child, SIGKILL it once the journal says `state`
    (`in_window` runs first, while the child is paused there)."""
    proc = subprocess.Popen([sys.executable, "-m", "openclaw.control", "retract", "--dir", str(buf_dir), "--session",
                             session_id, "--engine-url", url], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True, env={**os.environ, PAUSE_ENV: state})
    try:
        lines = []
        for line in proc.stderr:  # blocks until the child reaches the pause point (or dies)
            lines.append(line)
            if f"paused at {state}" in line:
                break
        else:
            raise AssertionError(f"retract exited before {state}: {''.join(lines)}")
        if in_window is not None:
            in_window()
        os.kill(proc.pid, signal.SIGKILL)  # by PID: the child this test started
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
