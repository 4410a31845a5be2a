"""Per-episode unprivileged uids, leased across processes with file locks.

Running as root, every concurrent episode gets its own uid: RLIMIT_NPROC then counts that
episode's processes only (the kernel ignores it for root), root-owned host files are unreadable,
and "no stray process" can be checked by uid. The lock files make the lease safe between
processes (several rollout workers, tests) and are released by the kernel if we crash.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
from dataclasses import dataclass

LOCK_DIR = "/tmp/openclaw-sandbox-uids"
UID_RANGE = 4096


@dataclass
class UidLease:
    uid: int
    fd: int

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing drops the flock
            self.fd = -1


def lease_uid(uid_base: int) -> UidLease:
    os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
    for uid in range(uid_base, uid_base + UID_RANGE):
        fd = os.open(os.path.join(LOCK_DIR, f"{uid}.lock"), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return UidLease(uid, fd)
    raise RuntimeError(f"no free sandbox uid in [{uid_base}, {uid_base + UID_RANGE})")


def _is_zombie(pid: str) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as f:
        # The state follows the parenthesised command name, which may itself contain spaces.
        return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"


def pids_of_uid(uid: int) -> list[int]:
    """Live (non-zombie) PIDs owned by `uid`, from /proc."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid == uid and not _is_zombie(entry):
                pids.append(int(entry))
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
    return pids


async def wait_uid_idle(uid: int, timeout_s: float = 2.0) -> bool:
    """Poll until `uid` has no live process (a killed sandbox tears down asynchronously)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while pids_of_uid(uid):
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def kill_uid_processes(uid: int) -> list[int]:
    """SIGKILL, by PID, every process still running as a leased sandbox uid; returns those PIDs.

    The pid namespace normally leaves none; this is the backstop before the uid is re-leased.
    """
    found = pids_of_uid(uid)
    for pid in found:
        # Pin the process with a pidfd, then re-check its uid: a PID recycled between the scan
        # and the kill can never be hit.
        try:
            fd = os.pidfd_open(pid)
        except (ProcessLookupError, OSError):
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        except (ProcessLookupError, FileNotFoundError):
            pass
        finally:
            os.close(fd)
    return found


def pids_with_marker(marker: str) -> list[int]:
    """Live PIDs whose command line contains `marker`, a unique token the caller put there.

    Used to check, by PID, that nothing a command started outlives it.
    """
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            zombie = _is_zombie(entry)
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if needle in cmdline and not zombie:
            found.append(int(entry))
    return found
