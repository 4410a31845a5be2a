"""The processes below a PID, read from /proc (Linux): what a test or a benchmark started, found
by parentage rather than by name (never `pkill chromium`: other people's browsers share the host)."""

from __future__ import annotations

import os


def process_tree(root: int) -> list[int]:
    """`root` and every process below it (a pid namespace's orphans stay below its init)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def descendants(root: int) -> set[int]:
    """Every process below `root` (not `root` itself)."""
    return set(process_tree(root)) - {root}
