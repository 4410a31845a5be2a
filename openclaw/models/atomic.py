"""Build a directory once, atomically, even when several processes race to build it."""

from __future__ import annotations

import fcntl
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

READY_MARKER = ".openclaw-ready"


@contextmanager
def _file_lock(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def is_ready(target: Path) -> bool:
    return (target / READY_MARKER).is_file()


def build_once(target: Path, build: Callable[[Path], None]) -> Path:
    """Run `build(tmp_dir)` and rename the result to `target`, unless `target` is ready.

    A process that loses the race blocks on the lock and then finds the target ready.
    A crash mid-build leaves only a temp dir behind (never a half-written target).
    """
    if is_ready(target):
        return target
    with _file_lock(target.parent / f".{target.name}.lock"):
        if is_ready(target):
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        try:
            build(tmp)
            (tmp / READY_MARKER).write_text("ok\n")
            if target.exists():  # a stale, unmarked leftover from an older layout
                shutil.rmtree(target)
            tmp.rename(target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target
