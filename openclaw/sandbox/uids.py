"""Per-episode unprivileged uids, leased across processes with file locks.

Running as root, every concurrent episode gets its own uid: RLIMIT_NPROC then counts that
episode's processes only (the kernel ignores it for root), root-owned host files are unreadable,
and "no stray process" can be checked by uid. The lock files make the lease safe between
processes (several rollout workers, tests) and are released by the kernel if we crash.

A free lock is not enough: the kernel charges a process to its uid's RLIMIT_NPROC until it is
reaped, zombies included, and every command leaves one behind for a while. bwrap's outer process
exits as soon as its pid-1 child reports the command's exit status, without reaping it, so that
child is reparented to the host's init and stays charged until init gets round to reaping it
(within about 1.5 s on the VM the tests run on). A uid is therefore leased only when no process
at all, live or zombie, runs as it.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import signal
from dataclasses import dataclass

LOCK_DIR = "/tmp/openclaw-sandbox-uids"
UID_RANGE = 4096

log = logging.getLogger(__name__)


@dataclass
class UidLease:
    uid: int
    fd: int

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing drops the flock
            self.fd = -1


def lease_uid(uid_base: int) -> UidLease:
    """Lease the first uid of the range that nobody holds and no process is charged to.

    A uid whose lock is free but which still has processes is skipped, not waited for: zombies
    are reaped by the host's init, on its own schedule (see the module docstring), and would
    leave the next episode fewer processes than its cap.
    """
    os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
    for uid in range(uid_base, uid_base + UID_RANGE):
        fd = os.open(os.path.join(LOCK_DIR, f"{uid}.lock"), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        # Checked while holding the lock: only a holder starts processes as this uid.
        if not _uid_in_use(uid):
            return UidLease(uid, fd)
        os.close(fd)
    raise RuntimeError(
        f"no free sandbox uid in [{uid_base}, {uid_base + UID_RANGE}): each one is leased or still has "
        "processes (zombies included) running as it; if zombies pile up, the host's init (pid 1) "
        "does not reap orphans: run the container with an init (docker run --init)"
    )


def _uid_in_use(uid: int) -> bool:
    """Whether any process, live or zombie, runs as `uid`, whose lock the caller has just taken.

    A live one was orphaned by a holder that died: it is killed here, so it cannot share a later
    episode's process limit or files; a later lease takes the uid once nothing runs as it.
    """
    live, zombies = _processes_of_uid(uid)
    if live:
        killed = kill_uid_processes(uid)
        if killed:
            log.warning("killed orphaned sandbox processes %s (uid %d)", killed, uid)
    return bool(live or zombies)


def _is_zombie(pid: str) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as f:
        # The state follows the parenthesised command name, which may itself contain spaces.
        return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"


def _processes_of_uid(uid: int) -> tuple[list[int], list[int]]:
    """(live PIDs, zombie PIDs) owned by `uid`, from /proc."""
    live, zombies = [], []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid == uid:
                (zombies if _is_zombie(entry) else live).append(int(entry))
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
    return live, zombies


def pids_of_uid(uid: int) -> list[int]:
    """Live (non-zombie) PIDs owned by `uid`, from /proc."""
    return _processes_of_uid(uid)[0]


def nproc_charged(uid: int) -> int:
    """How many processes the kernel counts against `uid`'s RLIMIT_NPROC: zombies count too."""
    live, zombies = _processes_of_uid(uid)
    return len(live) + len(zombies)


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
