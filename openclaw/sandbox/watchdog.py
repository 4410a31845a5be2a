"""The fallback for the per-episode caps where cgroups are unavailable: a poller.

While a command runs, it sums the memory of the episode's processes (private RSS), counts them,
and measures the work dir; when a cap is crossed it asks for the command to be killed, with the
reason. It is SOFT: the kernel does not refuse the allocation, fork or write, so a cap can be
overshot by what the command does before the poller next runs: one 50 ms interval on an idle
machine, longer when other work holds the CPU (du is also spaced out on big trees).
Per-process RLIMIT_AS / RLIMIT_FSIZE and the per-uid RLIMIT_NPROC still apply underneath.
"""

from __future__ import annotations

import asyncio
import time

from openclaw.proctree import process_tree
from openclaw.sandbox.config import Limits
from openclaw.sandbox.quota import tree_bytes
from openclaw.sandbox.uids import pids_of_uid

POLL_S = 0.05


def _private_rss(pid: int) -> int:
    """Anonymous + shmem resident bytes: shared library pages would be counted once per process."""
    total = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("RssAnon:", "RssShmem:")):
                    total += int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        return 0
    return total


class EpisodeWatchdog:
    """Watches one command of an episode; `hits` collects every cap seen crossed."""

    def __init__(self, limits: Limits, workdir: str, uid: int | None) -> None:
        self.limits = limits
        self.workdir = workdir
        self.uid = uid
        self.hits: set[str] = set()

    def _episode_pids(self, root: int) -> list[int]:
        # By uid when each episode has its own (root), else the spawned tree.
        return pids_of_uid(self.uid) if self.uid is not None else process_tree(root)

    async def watch(self, root_pid: int) -> str:
        """Poll until a cap is crossed; returns the kill reason (cancelled when the command ends)."""
        next_du, du_cost = 0.0, 0.0
        baseline: int | None = None  # the work dir when the command started
        while True:
            pids = await asyncio.to_thread(self._episode_pids, root_pid)
            if len(pids) > self.limits.max_processes:
                self.hits.add("episode_processes")
                return "episode_process_limit"
            memory = sum(_private_rss(p) for p in pids)
            if memory > self.limits.episode_memory_bytes:
                self.hits.add("episode_memory")
                return "episode_memory_limit"
            now = time.monotonic()
            if now >= next_du:
                used = await asyncio.to_thread(tree_bytes, self.workdir)
                du_cost = time.monotonic() - now
                # A big tree is walked less often, so the watchdog stays a small share of a core.
                next_du = now + max(POLL_S, 10 * du_cost)
                baseline = used if baseline is None else baseline
                # Only growth past the quota is killed: a command that cleans up an over-full work
                # dir (left by a killed writer) must be able to run.
                if used > self.limits.workspace_bytes and used > baseline:
                    self.hits.add("workspace_quota")
                    return "workspace_quota"
            await asyncio.sleep(POLL_S)  # the poll interval, not a synchronisation
