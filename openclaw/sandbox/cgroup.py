"""One memory+pids cgroup per episode: the kernel caps the sum over all of the episode's processes.

RLIMIT_AS and RLIMIT_NPROC are per process / per uid; a cgroup bounds the whole episode (every
command it runs, their children, their tmpfs pages). Works with the unified hierarchy (cgroup v2,
memory and pids enabled for our children) and with the v1 `memory` and `pids` hierarchies of
hybrid hosts. Needs root (or a delegated, writable cgroup); `episode_cgroups_unavailable_reason`
says why not otherwise, and the pool then uses the watchdog (see watchdog.py).

A command joins its episode's cgroup before it execs anything (see command.cgroup_join_args), so
even a fork bomb's first fork is counted.
"""

from __future__ import annotations

import functools
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from openclaw.proctree import pid_exists

_PREFIX = "openclaw-sbx-"


@dataclass(frozen=True)
class LimitCounters:
    """Kernel counters of an episode cgroup; a delta across a command says which caps it hit."""

    oom_kills: int
    pids_max_hits: int


def _mountinfo() -> list[tuple[str, str, str, str]]:
    """(root, mount point, fs type, super options) of each mount of this process."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) >= 5 and len(rest) >= 3:
            out.append((fields[3], fields[4], rest[0], rest[2]))
    return out


def _own_cgroups() -> dict[str, str]:
    """Controller (or "" for the unified hierarchy) -> this process's cgroup path."""
    out: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            out[name] = path
    return out


def _join(mount: str, mount_root: str, path: str) -> Path:
    rel = os.path.relpath(path, mount_root) if path.startswith(mount_root) else path.lstrip("/")
    return Path(mount) / ("" if rel == "." else rel.lstrip("/"))


@dataclass(frozen=True)
class _Layout:
    """Where episode cgroups are created: one parent (v2) or one per controller (v1)."""

    version: int
    memory_parent: Path
    pids_parent: Path


def _v2_layout(mounts: list[tuple[str, str, str, str]], own: dict[str, str]) -> tuple[_Layout | None, str]:
    for root, point, fstype, _ in mounts:
        if fstype != "cgroup2" or "" not in own:
            continue
        parent = _join(point, root, own[""])
        try:
            available = (parent / "cgroup.controllers").read_text().split()
        except OSError as exc:
            return None, f"cgroup v2 at {parent}: {exc}"
        if not {"memory", "pids"} <= set(available):
            return None, f"cgroup v2 at {parent} offers {available or 'no controllers'}, not memory+pids"
        enabled = set((parent / "cgroup.subtree_control").read_text().split())
        if not {"memory", "pids"} <= enabled:
            try:
                (parent / "cgroup.subtree_control").write_text("+memory +pids")
            except OSError as exc:
                # EBUSY: our own cgroup holds processes (the "no internal processes" rule); run
                # under a delegated cgroup (systemd-run --scope -p Delegate=yes) to use v2.
                return None, f"cgroup v2 at {parent}: cannot enable memory+pids for children ({exc})"
        return _Layout(2, parent, parent), ""
    return None, "no cgroup v2 hierarchy"


def _v1_layout(mounts: list[tuple[str, str, str, str]], own: dict[str, str]) -> tuple[_Layout | None, str]:
    found: dict[str, Path] = {}
    for root, point, fstype, options in mounts:
        if fstype != "cgroup":
            continue
        for controller in ("memory", "pids"):
            if controller in options.split(",") and controller in own:
                found[controller] = _join(point, root, own[controller])
    if set(found) != {"memory", "pids"}:
        return None, f"cgroup v1: memory and pids hierarchies not both mounted (found {sorted(found)})"
    if not (found["memory"] / "memory.oom_control").exists():
        return None, f"cgroup v1 at {found['memory']}: no memory.oom_control"
    return _Layout(1, found["memory"], found["pids"]), ""


@functools.lru_cache(maxsize=1)
def _detect() -> tuple[_Layout | None, str]:
    if os.geteuid() != 0:
        return None, "not running as root (cgroups need root or a delegated cgroup)"
    mounts, own = _mountinfo(), _own_cgroups()
    v2, why_v2 = _v2_layout(mounts, own)
    layout, why_v1 = (v2, "") if v2 is not None else _v1_layout(mounts, own)
    if layout is None:
        return None, f"{why_v2}; {why_v1}"
    try:  # can we really create one? (read-only cgroupfs in many containers)
        probe = EpisodeCgroup.create(layout, memory_bytes=64 << 20, max_pids=4)
    except OSError as exc:
        return None, f"cannot create a cgroup under {layout.memory_parent}: {exc}"
    probe.remove()
    return layout, ""


def pid_is_dead(pid: int) -> bool:
    return not pid_exists(pid)


def owner_pid(name: str) -> int | None:
    """The pid in an `openclaw-sbx-<pid>-<id>` name (the process that created it)."""
    if not name.startswith(_PREFIX):
        return None
    head = name[len(_PREFIX):].split("-", 1)[0]
    return int(head) if head.isdigit() else None


def reap_stale_cgroups() -> list[str]:
    """Remove episode cgroups left by a process that died (kill -9): they would pin memory."""
    layout, _ = _detect()
    if layout is None:
        return []
    removed = []
    for parent in {layout.memory_parent, layout.pids_parent}:
        for d in parent.glob(_PREFIX + "*"):
            pid = owner_pid(d.name)
            if pid is None or not pid_is_dead(pid):
                continue
            try:
                EpisodeCgroup(layout, (d,)).remove()
                removed.append(str(d))
            except OSError:
                continue  # still busy: the next start tries again
    return removed


def episode_cgroups_unavailable_reason() -> str | None:
    """None when episode cgroups can be used here, else why not (for the fallback warning)."""
    layout, why = _detect()
    return None if layout is not None else why


def create_episode_cgroup(memory_bytes: int, max_pids: int) -> EpisodeCgroup:
    layout, why = _detect()
    if layout is None:
        raise RuntimeError(f"episode cgroups are unavailable: {why}")
    return EpisodeCgroup.create(layout, memory_bytes, max_pids)


def _read_key(path: Path, key: str) -> int:
    for line in path.read_text().splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    raise KeyError(f"{key} not in {path}")


class EpisodeCgroup:
    """The cgroup(s) of one episode; every command of the episode joins them."""

    def __init__(self, layout: _Layout, dirs: tuple[Path, ...]) -> None:
        self.layout = layout
        self.dirs = dirs  # v2: (dir,), v1: (memory dir, pids dir)

    @classmethod
    def create(cls, layout: _Layout, memory_bytes: int, max_pids: int) -> EpisodeCgroup:
        name = f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        if layout.version == 2:
            d = layout.memory_parent / name
            d.mkdir()
            group = cls(layout, (d,))
            try:
                (d / "memory.max").write_text(str(memory_bytes))
                if (d / "memory.swap.max").exists():
                    (d / "memory.swap.max").write_text("0")  # swap would let the cap be exceeded
                (d / "pids.max").write_text(str(max_pids))
            except OSError:
                group.remove()
                raise
            return group
        mem, pids = layout.memory_parent / name, layout.pids_parent / name
        mem.mkdir()
        group = cls(layout, (mem,))
        try:
            pids.mkdir()
            group = cls(layout, (mem, pids))
            (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
            if (mem / "memory.memsw.limit_in_bytes").exists():
                (mem / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
            (pids / "pids.max").write_text(str(max_pids))
        except OSError:
            group.remove()
            raise
        return group

    @property
    def procs_files(self) -> tuple[str, ...]:
        """The files a command writes its pid into to join (all of them, before it execs)."""
        return tuple(str(d / "cgroup.procs") for d in self.dirs)

    def counters(self) -> LimitCounters:
        if self.layout.version == 2:
            d = self.dirs[0]
            return LimitCounters(_read_key(d / "memory.events", "oom_kill"), _read_key(d / "pids.events", "max"))
        mem, pids = self.dirs
        return LimitCounters(_read_key(mem / "memory.oom_control", "oom_kill"), _read_key(pids / "pids.events", "max"))

    def pids(self) -> list[int]:
        found: set[int] = set()
        for procs in self.procs_files:
            try:
                found.update(int(p) for p in Path(procs).read_text().split())
            except FileNotFoundError:
                continue
        return sorted(found)

    def kill(self) -> None:
        """SIGKILL every process of the episode (by PID, or cgroup.kill where the kernel has it)."""
        kill_file = self.dirs[0] / "cgroup.kill"
        if self.layout.version == 2 and kill_file.exists():
            kill_file.write_text("1")
            return
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def remove(self, timeout_s: float = 2.0) -> None:
        """Kill what is left and remove the cgroup(s); a dying process may keep it busy briefly."""
        deadline = time.monotonic() + timeout_s
        for d in self.dirs:
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    self.kill()
                    time.sleep(0.01)  # the kernel tears exiting tasks down asynchronously
