"""The workspace quota: a size-limited tmpfs mounted on the episode's work dir (root only).

A tmpfs `size=` is a hard bound on the sum of all files (and their metadata), enforced by the
kernel at write time (ENOSPC), whatever the number or size of the files; RLIMIT_FSIZE only bounds
each file. It is mounted on the host side, once per episode, so files persist across the episode's
commands and the host (write_file, tests, graders) sees them; bwrap binds it in as /workspace. Its
pages are memory, charged to the episode's cgroup: the workspace counts toward the episode's
memory cap too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable

_MNT_DETACH = 2
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def mount_workspace_tmpfs(path: str, size_bytes: int, uid: int) -> None:
    """Mount a tmpfs of `size_bytes` on `path`, owned by the episode's uid."""
    options = f"size={size_bytes},mode=0755,uid={uid},gid={uid}".encode()
    if _libc.mount(b"tmpfs", path.encode(), b"tmpfs", 0, options) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount tmpfs on {path}: {os.strerror(err)}")


def unmount_workspace(path: str) -> None:
    # Lazy: a process still holding a file open there (killed, being reaped) cannot keep it busy.
    if _libc.umount2(path.encode(), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"umount {path}: {os.strerror(err)}")


def reap_stale_workspaces(root: str, is_stale: Callable[[str], bool]) -> list[str]:
    """Unmount workspace tmpfs mounts under `root` whose episode dir `is_stale` (its owner died).

    Their pages are memory: a trainer killed with -9 must not leave them pinned until reboot.
    """
    prefix = os.path.join(os.path.realpath(root), "")
    reaped = []
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f if " - tmpfs " in line]
    for point in points:
        if point.startswith(prefix) and is_stale(os.path.basename(os.path.dirname(point))):
            try:
                unmount_workspace(point)
            except OSError:
                continue
            reaped.append(point)
    return reaped


def workspace_full(path: str, slack_bytes: int = 64 << 10) -> bool:
    """The quota is (nearly) exhausted: a write was, or is about to be, refused with ENOSPC."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize < slack_bytes


def tree_bytes(path: str) -> int:
    """Disk usage of a directory tree (allocated blocks, like du), for the watchdog."""
    total = 0
    for root, dirs, files in os.walk(path):
        for name in files + dirs:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                continue  # removed while we walked
    return total
