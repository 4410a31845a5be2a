"""The processes below a PID, or in a process group, read from /proc (Linux): what a test, a
benchmark or a backend started, found by parentage or group rather than by name (never
`pkill chromium`: other people's browsers share the host), and stopped by PID."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time

log = logging.getLogger(__name__)


def _stat_fields(pid: str) -> list[str] | None:
    """/proc/PID/stat after the command name: state, ppid, pgrp, ...; None once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].decode().split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def pid_exists(pid: int) -> bool:
    """Whether `pid` names a process on this host (a zombie included), ours or another user's."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by someone else
    return True


def _all_stats() -> dict[int, list[str]]:
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat_fields(entry)) is not None:
            stats[int(entry)] = fields
    return stats


def process_tree(root: int) -> list[int]:
    """`root` and every process below it (a pid namespace's orphans stay below its init)."""
    children: dict[int, list[int]] = {}
    for pid, fields in _all_stats().items():
        children.setdefault(int(fields[1]), []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def descendants(root: int) -> set[int]:
    """Every process below `root` (not `root` itself)."""
    return set(process_tree(root)) - {root}


def live_group_members(pgid: int) -> list[int]:
    """PIDs in process group `pgid` that are not zombies."""
    return sorted(pid for pid, fields in _all_stats().items() if int(fields[2]) == pgid and fields[0] != "Z")


def stop_process_group(pgid: int, grace_s: float = 10.0) -> None:
    """SIGTERM what is left of a group we started (`start_new_session=True`), SIGKILL it after
    `grace_s`, and return once no live member remains. Waiting on the group leader alone is not enough:
    members that outlive it (Chromium's helpers, measured) keep running, and writing, for a moment."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not live_group_members(pgid):  # checked first: an emptied group's id can be reused
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + grace_s
        while live_group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)  # polling /proc for processes that are not our children; bounded
    if left := live_group_members(pgid):
        log.warning("process group %d still has live members after SIGKILL: %s", pgid, left)


def stop_started_group(proc: subprocess.Popen, grace_s: float) -> None:
    """Stop the process group that `proc` leads (started with `start_new_session=True`) with
    `stop_process_group`, then reap `proc`. Also when `proc` has already exited: its children
    (SGLang's scheduler, a server's workers) may not have."""
    stop_process_group(proc.pid, grace_s)
    try:
        proc.wait(timeout=5)  # a zombie by now; it only stays if SIGKILL could not end it (state D)
    except subprocess.TimeoutExpired:
        log.warning("process %d did not exit after SIGKILL to its group", proc.pid)


def stop_child(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM a child we started, SIGKILL it if it is still running after `grace_s`, and reap it."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
