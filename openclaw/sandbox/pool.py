"""Sandbox sessions (one per episode: a private work dir) and a pool bounding concurrency."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

from openclaw.sandbox.cgroup import (
    EpisodeCgroup,
    LimitCounters,
    create_episode_cgroup,
    episode_cgroups_unavailable_reason,
    owner_pid,
    pid_is_dead,
    reap_stale_cgroups,
)
from openclaw.sandbox.command import SandboxUnavailableError, build_argv, require_tools, sandbox_env
from openclaw.sandbox.config import SandboxConfig
from openclaw.sandbox.process import SpawnSpec, run_spawn
from openclaw.sandbox.quota import (
    mount_workspace_tmpfs,
    reap_stale_workspaces,
    unmount_workspace,
    workspace_full,
)
from openclaw.sandbox.result import ExecResult
from openclaw.sandbox.seccomp import deny_ptrace_program
from openclaw.sandbox.uids import (
    UidLease,
    kill_uid_processes,
    lease_uid,
    nproc_charged,
    wait_uid_idle,
)
from openclaw.sandbox.watchdog import EpisodeWatchdog

log = logging.getLogger(__name__)

NO_SANDBOX_WARNING = (
    "\n" + "!" * 78 + "\n"
    "!! SANDBOX DISABLED (--sandbox none): model-written commands run directly on this host\n"
    "!! with your user's permissions, network and files. Use only for trusted local debugging.\n"
    + "!" * 78
)

# Pools that fell back to the watchdog for the per-episode caps (each also logs a warning).
WATCHDOG_FALLBACKS = 0


def _is_root() -> bool:
    return os.geteuid() == 0


def _rmtree(path: str) -> None:
    def fix_and_retry(func, p, _exc):  # the agent may have chmod'ed things 000
        try:
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=fix_and_retry)


class SandboxSession:
    """One episode's sandbox: a writable work dir that persists across its commands.

    Each `run` is a fresh process tree (shell state such as `cd` or background jobs does not
    carry over between commands; files do).
    """

    def __init__(
        self, config: SandboxConfig, workdir: str, uid: int | None, cgroup: EpisodeCgroup | None = None
    ) -> None:
        self.config = config
        self.workdir = workdir
        self.uid = uid
        self.cgroup = cgroup  # None: the per-episode caps are enforced by the watchdog

    def _nproc(self) -> int:
        # The episode's cap is the pids cgroup or the watchdog (which also report it); RLIMIT_NPROC
        # is a hard backstop with room for the sandbox's own processes (bwrap x2, lifeline shell).
        backstop = self.config.limits.max_processes + 8
        if self.uid is not None:
            return backstop  # the episode's own uid: counts this episode only
        # Unprivileged: RLIMIT_NPROC counts all of our uid's processes (zombies too), so leave
        # headroom for them.
        return nproc_charged(os.getuid()) + backstop

    async def run(
        self,
        command: str | Sequence[str],
        *,
        timeout_s: float | None = None,
        ro_binds: Sequence[tuple[str, str]] = (),
        deny_ptrace: bool = False,
    ) -> ExecResult:
        """Run a shell string (bash -c) or an argv inside the sandbox.

        deny_ptrace: the command's processes cannot ptrace one another or write one another's
        memory (for a grader that runs untrusted code; see seccomp.py). kind="none" ignores it.
        """
        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        limits = self.config.limits
        timeout = limits.wall_timeout_s if timeout_s is None else timeout_s
        if self.config.kind == "none":
            return await self._run_unsandboxed(argv, timeout, ro_binds)
        config = self.config
        if ro_binds:
            config = _with_binds(config, ro_binds)
        if deny_ptrace:
            config = replace(config, deny_ptrace=True)
        seccomp_fd: int | None = None
        # The lifeline: only we hold the write end, so it closes exactly when we die.
        lifeline_r, lifeline_w = os.pipe()
        watchdog = None if self.cgroup is not None else EpisodeWatchdog(limits, self.workdir, self.uid)
        before = self.cgroup.counters() if self.cgroup is not None else None
        try:
            if config.deny_ptrace:
                seccomp_fd = _seccomp_pipe()
            argv = build_argv(
                config, self.workdir, argv, self._nproc(), lifeline_fd=lifeline_r, uid=self.uid,
                cgroup_procs=self.cgroup.procs_files if self.cgroup is not None else (),
                seccomp_fd=seccomp_fd,
            )
            spec = SpawnSpec(
                argv=argv,
                # Not the host's environment: bwrap (pid 1 inside, its /proc/1/environ readable by
                # the command) would show it; the tools are called by absolute path.
                env=sandbox_env(config),
                cwd="/",  # nor our cwd, which the join shell would export as PWD
                timeout_s=timeout,
                max_output_bytes=limits.max_output_bytes,
                pass_fds=(lifeline_r,) if seccomp_fd is None else (lifeline_r, seccomp_fd),
                monitor=watchdog.watch if watchdog is not None else None,
            )
            result = await run_spawn(spec)
        finally:
            os.close(lifeline_r)
            os.close(lifeline_w)
            if seccomp_fd is not None:
                os.close(seccomp_fd)
        if watchdog is not None:
            return replace(result, limits_hit=tuple(sorted(watchdog.hits)))
        return self._with_cgroup_report(result, before)

    def _with_cgroup_report(self, result: ExecResult, before: LimitCounters | None) -> ExecResult:
        """Which per-episode caps the kernel enforced during the command, from its counters."""
        assert self.cgroup is not None and before is not None
        after = self.cgroup.counters()
        hits = []
        if after.oom_kills > before.oom_kills:
            hits.append("episode_memory")
        if after.pids_max_hits > before.pids_max_hits:
            hits.append("episode_processes")
        if workspace_full(self.workdir):
            hits.append("workspace_quota")
        killed_reason = result.killed_reason
        if "episode_memory" in hits and killed_reason in (None, "signal:SIGKILL"):
            killed_reason = "episode_memory_limit"  # the OOM killer's SIGKILL, within the episode
        return replace(result, limits_hit=tuple(hits), killed_reason=killed_reason)

    async def _run_unsandboxed(
        self, argv: list[str], timeout: float, ro_binds: Sequence[tuple[str, str]]
    ) -> ExecResult:
        env = sandbox_env(self.config)
        env["HOME"] = self.workdir
        del ro_binds  # no mounts without a sandbox: callers use bound_path() to find the host path
        limits = self.config.limits
        prlimit = [
            shutil.which(self.config.prlimit_path) or "prlimit",
            f"--cpu={limits.cpu_seconds}",
            f"--as={limits.address_space_bytes}",
            f"--fsize={limits.file_size_bytes}",
            "--",
        ]
        watchdog = EpisodeWatchdog(limits, self.workdir, None)
        spec = SpawnSpec(
            argv=prlimit + argv,
            env=env,
            cwd=self.workdir,
            timeout_s=timeout,
            max_output_bytes=limits.max_output_bytes,
            signal_as_128_plus=False,
            kill_group_after_exit=True,
            monitor=watchdog.watch,
        )
        result = await run_spawn(spec)
        return replace(result, limits_hit=tuple(sorted(watchdog.hits)))

    def stage(self, name: str, files: dict[str, str | bytes]) -> str:
        """Write read-only files (e.g. a task's tests) beside the work dir; returns the host dir.

        Bind it with `run(..., ro_binds=[(dir, "/tests")])`: the sandbox uid can read it (the
        episode's parent dir is traversable) but neither it nor the agent can change it.
        """
        if not name or "/" in name or name in (".", "..", "work"):
            raise ValueError(f"bad stage name {name!r}")
        base = Path(self.workdir).parent / name
        base.mkdir(mode=0o755, exist_ok=True)
        for rel, data in files.items():
            target = (base / rel).resolve()
            if base.resolve() not in target.parents:
                raise ValueError(f"{rel!r} escapes the staged dir")
            target.parent.mkdir(parents=True, exist_ok=True)
            for parent in target.parents:
                if parent == base.parent:
                    break
                os.chmod(parent, 0o755)
            target.write_bytes(data.encode() if isinstance(data, str) else data)
            os.chmod(target, 0o755 if rel.endswith(".sh") else 0o644)
        return str(base)

    def bound_path(self, host_dir: str, inside: str) -> str:
        """The path a command uses for a dir bound with ro_binds=[(host_dir, inside)] (the host
        path itself with kind="none", which mounts nothing)."""
        return host_dir if self.config.kind == "none" else inside

    def write_file(self, rel_path: str, data: str | bytes, mode: int = 0o644) -> Path:
        """Write a file into the work dir from the host, owned by the episode's uid."""
        root = Path(self.workdir).resolve()
        target = (root / rel_path).resolve()
        if root != target and root not in target.parents:
            raise ValueError(f"{rel_path!r} escapes the work dir")
        target.parent.mkdir(parents=True, exist_ok=True)
        payload = data.encode() if isinstance(data, str) else data
        target.write_bytes(payload)
        os.chmod(target, mode)
        if self.uid is not None:
            path = target
            while path != root.parent:
                os.chown(path, self.uid, self.uid)
                path = path.parent
        return target


def _seccomp_pipe() -> int:
    """The read end of a pipe holding the deny-ptrace filter; bwrap reads it to EOF."""
    program = deny_ptrace_program()
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, program)  # a few hundred bytes: always fits the pipe buffer
    finally:
        os.close(write_fd)
    return read_fd


def _with_binds(config: SandboxConfig, binds: Sequence[tuple[str, str]]) -> SandboxConfig:
    return replace(config, extra_ro_binds=tuple(config.extra_ro_binds) + tuple(binds))


def _resolve_episode_limits(config: SandboxConfig) -> bool:
    """True: cgroup + tmpfs (the kernel enforces the episode caps); False: the watchdog."""
    if config.episode_limits == "watchdog":
        return False
    why = episode_cgroups_unavailable_reason()
    if why is None:
        return True
    if config.episode_limits == "cgroup":
        raise SandboxUnavailableError(f"episode_limits='cgroup' but episode cgroups are unavailable: {why}")
    global WATCHDOG_FALLBACKS
    WATCHDOG_FALLBACKS += 1
    log.warning(
        "sandbox: per-episode memory/process caps and the workspace quota are enforced by a polling "
        "watchdog (SOFT: a cap can be overshot by one poll interval) because episode cgroups are "
        "unavailable here: %s. Run as root with writable memory+pids cgroups for hard caps.", why
    )
    return False


def _stale_episode_dir(name: str) -> bool:
    pid = owner_pid(name)
    return pid is not None and pid_is_dead(pid)


def _reap_stale_episodes(workdir_root: str) -> None:
    """Workspace mounts and cgroups of episodes whose process died (kill -9) are freed here."""
    mounts = reap_stale_workspaces(workdir_root, _stale_episode_dir) if os.path.isdir(workdir_root) else []
    for point in mounts:
        _rmtree(os.path.dirname(point))
    groups = reap_stale_cgroups()
    if mounts or groups:
        log.warning("sandbox: freed %d workspace(s) and %d cgroup(s) left by dead processes: %s",
                    len(mounts), len(groups), mounts + groups)


class SandboxPool:
    """At most `size` concurrent episodes (PARALLEL_ENVS); each gets a fresh work dir and uid."""

    def __init__(self, config: SandboxConfig, size: int) -> None:
        if size < 1:
            raise ValueError(f"pool size (PARALLEL_ENVS) must be >= 1, got {size}")
        self.config = config
        self.size = size
        self._semaphore = asyncio.Semaphore(size)
        if config.kind == "none":
            log.warning(NO_SANDBOX_WARNING)
        else:
            require_tools(config)  # fail now, with instructions, not mid-rollout
        self.use_cgroups = config.kind == "bwrap" and _resolve_episode_limits(config)
        if self.use_cgroups:
            _reap_stale_episodes(self._workdir_root())

    def _workdir_root(self) -> str:
        return self.config.workdir_root or os.path.join(tempfile.gettempdir(), "openclaw-sandbox")

    @asynccontextmanager
    async def session(self) -> AsyncIterator[SandboxSession]:
        async with self._semaphore:
            lease: UidLease | None = None
            if self.config.kind == "bwrap" and _is_root():
                # Nothing runs as the leased uid, not even a zombie (see uids.lease_uid).
                lease = lease_uid(self.config.uid_base)
            root = self._workdir_root()
            os.makedirs(root, exist_ok=True)
            if lease is not None:
                os.chmod(root, 0o711)  # episode uids must traverse it to reach their own dir
            # The parent is traversable (not listable) so the episode uid can reach its own dir.
            # The creating pid in the name lets a later process reap what a killed one left behind.
            parent = tempfile.mkdtemp(prefix=f"openclaw-sbx-{os.getpid()}-", dir=root)
            os.chmod(parent, stat.S_IRWXU | stat.S_IXGRP | stat.S_IXOTH)
            workdir = os.path.join(parent, "work")
            os.mkdir(workdir, 0o755)
            cgroup: EpisodeCgroup | None = None
            mounted = False
            try:
                if lease is not None:
                    os.chown(workdir, lease.uid, lease.uid)
                if self.use_cgroups and lease is not None:
                    limits = self.config.limits
                    cgroup = create_episode_cgroup(limits.episode_memory_bytes, limits.max_processes)
                    mount_workspace_tmpfs(workdir, limits.workspace_bytes, lease.uid)
                    mounted = True
                yield SandboxSession(self.config, workdir, lease.uid if lease else None, cgroup)
            finally:
                if lease is not None and not await wait_uid_idle(lease.uid):
                    strays = kill_uid_processes(lease.uid)
                    if strays:
                        log.warning("killed stray sandbox processes %s (uid %d)", strays, lease.uid)
                if mounted:
                    unmount_workspace(workdir)
                if cgroup is not None:
                    await asyncio.to_thread(cgroup.remove)
                if lease is not None:
                    lease.release()
                await asyncio.to_thread(_rmtree, parent)

    async def run_once(self, command: str | Sequence[str], **kwargs) -> ExecResult:
        """One command in a throwaway session."""
        async with self.session() as session:
            return await session.run(command, **kwargs)
