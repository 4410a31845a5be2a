"""Start children and stop exactly those, by PID, fast.

Every child runs in its own session (so a terminal's Ctrl-C reaches only the launcher, which then
stops them in order) and carries `OPENCLAW_LAUNCH_ID=<id>` in its environment. Processes a child
spawns inherit that variable (the Ray head's raylet, GCS, workers and the job's driver included),
so on stop the launcher can find every process of its own tree, and only those, even ones that
moved to another session, and kill what outlived the graceful stop. Never `pkill`, never
`ray stop`: another cluster or server on the machine is never touched.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from openclaw.proctree import pid_exists

LAUNCH_ID_VAR = "OPENCLAW_LAUNCH_ID"


def tagged_pids(launch_id: str) -> list[int]:
    """PIDs whose environment carries this launch's tag (readable for our own processes)."""
    needle = f"{LAUNCH_ID_VAR}={launch_id}".encode()
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:  # exited meanwhile, or not ours to read
            continue
    return found


def alive(pid: int) -> bool:
    if not pid_exists(pid):
        return False
    try:  # a zombie (exited, not yet reaped by its parent) is not running
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@dataclass
class Child:
    name: str
    proc: subprocess.Popen
    log: Path | None
    stop_signal: int = signal.SIGTERM
    grace_s: float = 10.0


@dataclass
class Supervisor:
    """The processes this launch started, stopped in reverse order on exit, signal or failure."""

    pid_file: Path | None = None
    launch_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    children: list[Child] = field(default_factory=list)

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, LAUNCH_ID_VAR: self.launch_id}

    def start(self, name: str, argv: list[str], env: dict[str, str], cwd: Path, log: Path | None,
              grace_s: float = 10.0) -> Child:
        out = open(log, "ab") if log else None  # the child keeps its own copy
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=self.env(env), stdout=out or None,
                                    stderr=subprocess.STDOUT if out else None, start_new_session=True)
        finally:
            if out:
                out.close()
        child = Child(name, proc, log, grace_s=grace_s)
        self.children.append(child)
        self._record()
        return child

    def _record(self) -> None:
        if self.pid_file is None:
            return
        data = {"launcher": os.getpid(), "launch_id": self.launch_id,
                "children": {c.name: c.proc.pid for c in self.children}}
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.pid_file.write_text(json.dumps(data))

    def failed(self) -> Child | None:
        """The first child that exited (any exit of a long-running child is a failure of the run)."""
        return next((c for c in self.children if c.proc.poll() is not None), None)

    def stop_all(self) -> float:
        """Stop children newest first: the signal to the child's process group, a grace period,
        then SIGKILL to its group; finally SIGKILL to anything still tagged with this launch.
        Returns the seconds it took."""
        t0 = time.monotonic()
        for child in reversed(self.children):
            if child.proc.poll() is None:
                _signal_group(child.proc.pid, child.stop_signal)
        for child in reversed(self.children):
            try:
                child.proc.wait(timeout=max(0.0, child.grace_s - (time.monotonic() - t0)))
            except subprocess.TimeoutExpired:
                _signal_group(child.proc.pid, signal.SIGKILL)
                child.proc.wait(timeout=30)
        for _ in range(3):  # what left the groups (Ray's raylet, workers, the job's driver)
            stray = [p for p in tagged_pids(self.launch_id) if alive(p)]
            if not stray:
                break
            for pid in stray:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 5
            while any(alive(p) for p in stray) and time.monotonic() < deadline:
                time.sleep(0.05)  # reaped by their parents (or init) within milliseconds
        return time.monotonic() - t0


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # started with start_new_session: its pgid is its pid
    except ProcessLookupError:
        pass
