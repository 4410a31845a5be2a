"""The buffer's files on disk: private modes, and whether every live writer's WAL is the one
at the path.

Nothing here opens a descriptor on the database file: POSIX advisory locks belong to the
process, so closing ANY descriptor of the file drops every lock this process's SQLite
connections hold on it. Modes are set and checked through the path."""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

log = logging.getLogger("openclaw.buffer")

_SIDE_FILES = ("-wal", "-shm")


def create_private_db(db: Path, timeout: float) -> sqlite3.Connection:
    """Let SQLite create (or open) `db`, then make it 0600 through the path before anything is
    written: the caller made the directory 0700 first, so the empty file is never reachable by
    anyone else, and SQLite creates -wal/-shm later with the database file's mode."""
    conn = sqlite3.connect(db, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        if db.stat().st_mode & 0o077:
            os.chmod(db, 0o600)
    except BaseException:
        conn.close()
        raise
    return conn


def make_private(db: Path) -> None:
    """chmod 0600 the database and its -wal/-shm (through their paths), e.g. after an older
    version created them wider."""
    for p in (db, *(Path(str(db) + s) for s in _SIDE_FILES)):
        try:
            if p.stat().st_mode & 0o077:
                os.chmod(p, 0o600)
        except FileNotFoundError:
            continue


def mode_problems(directory: Path, db: Path) -> list[str]:
    out: list[str] = []
    for p in [directory, db, *(Path(str(db) + s) for s in _SIDE_FILES)]:
        try:
            mode = p.stat().st_mode & 0o777
        except FileNotFoundError:
            continue
        want = 0o700 if p.is_dir() else 0o600
        if mode & ~want:
            out.append(f"{p}: mode {oct(mode)} is wider than {oct(want)}")
    return out


def wal_problems(db: Path, proc_root: Path = Path("/proc")) -> list[str]:
    """Processes that have `db` open but write to a -wal or -shm that is no longer the file at
    its path (unlinked, or replaced by a new one): their commits never reach the database and
    are lost when they exit. Compares, for every process that holds the database open, the
    (device, inode) of its open -wal/-shm descriptors with those of the files at the paths.

    Reads /proc/<pid>/fd (Linux): processes of other users are not visible and are skipped.
    Without /proc the check cannot run: it says so in its result, never silently passes."""
    fd_dirs = proc_root / "self" / "fd"
    if not fd_dirs.is_dir():
        return [f"cannot check the live writers' WAL of {db}: {proc_root} is not available on this system"]
    try:
        st = os.stat(db)
    except FileNotFoundError:
        return []
    db_key = (st.st_dev, st.st_ino)
    real = os.path.realpath(db)
    side = {real + s: str(db) + s for s in _SIDE_FILES}
    problems: list[str] = []
    for pid_dir in proc_root.iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            fds = list((pid_dir / "fd").iterdir())
        except OSError:  # another user's process, or it exited
            continue
        holds_db = False
        open_side: dict[str, tuple[int, int]] = {}
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            name = target.removesuffix(" (deleted)")
            if name != real and name not in side:
                continue
            try:
                fst = os.stat(fd)  # the open file itself, even when it was unlinked
            except OSError:
                continue
            if (fst.st_dev, fst.st_ino) == db_key:
                holds_db = True
            elif name in side:
                open_side[name] = (fst.st_dev, fst.st_ino)
        if not holds_db:
            continue
        for name, key in open_side.items():
            path = side[name]
            try:
                cur = os.stat(path)
                same = (cur.st_dev, cur.st_ino) == key
            except FileNotFoundError:
                same = False
            if not same:
                problems.append(
                    f"pid {pid_dir.name} writes to a {path[len(str(db)):]} file that is no longer {path} "
                    "(unlinked or replaced): its commits since then are not in the database and are lost "
                    "when it exits; another process deleted it while this one still had the buffer open"
                )
    return problems
