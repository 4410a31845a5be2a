"""Build the argv that runs one command under bubblewrap + prlimit."""

from __future__ import annotations

import os
import shutil

from openclaw.sandbox.config import Limits, SandboxConfig

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"


class SandboxUnavailableError(RuntimeError):
    """bubblewrap (or prlimit) is missing: the sandbox cannot be built."""


def require_tools(config: SandboxConfig) -> tuple[str, str, str]:
    """Resolve bwrap, prlimit and setpriv, or fail with an error that says how to fix it."""
    bwrap = shutil.which(config.bwrap_path)
    if bwrap is None:
        raise SandboxUnavailableError(
            f"bubblewrap ({config.bwrap_path!r}) was not found on PATH. Install it with "
            "`apt-get install bubblewrap` (scripts/setup-system.sh does this), or pass "
            "`--sandbox none` for trusted local debugging only (no isolation at all)."
        )
    prlimit = shutil.which(config.prlimit_path)
    if prlimit is None:
        raise SandboxUnavailableError(
            f"prlimit ({config.prlimit_path!r}, util-linux) was not found on PATH; it applies the "
            "sandbox's resource limits. Install util-linux."
        )
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise SandboxUnavailableError(
            "setpriv (util-linux) was not found on PATH; it ties the sandbox's life to its parent "
            "(parent-death signal). Install util-linux."
        )
    return bwrap, prlimit, setpriv


def sandbox_env(config: SandboxConfig) -> dict[str, str]:
    """The clean environment seen inside the sandbox (nothing inherited from the host)."""
    home = config.workdir_in_sandbox
    env = {
        "PATH": SANDBOX_PATH,
        "HOME": home,
        "USER": "agent",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": "/tmp",
        "PYTHONDONTWRITEBYTECODE": "1",
        # git refuses to commit without an identity and getpwuid() has no entry for our uid.
        "GIT_AUTHOR_NAME": "agent",
        "GIT_AUTHOR_EMAIL": "agent@sandbox",
        "GIT_COMMITTER_NAME": "agent",
        "GIT_COMMITTER_EMAIL": "agent@sandbox",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    env.update(dict(config.env))
    return env


def rlimit_args(prlimit: str, limits: Limits, nproc: int) -> list[str]:
    """prlimit sets the limits on itself, then execs bwrap: they are inherited by everything below."""
    return [
        prlimit,
        f"--cpu={limits.cpu_seconds}",
        f"--as={limits.address_space_bytes}",
        f"--nproc={nproc}",
        f"--fsize={limits.file_size_bytes}",
        f"--nofile={limits.open_files}",
        "--core=0",
        "--",
    ]


def bwrap_args(
    bwrap: str, config: SandboxConfig, host_workdir: str, seccomp_fd: int | None = None
) -> list[str]:
    if config.deny_ptrace and seccomp_fd is None:
        raise ValueError("deny_ptrace needs the fd of the seccomp program (seccomp.deny_ptrace_program)")
    args = [bwrap, "--die-with-parent", "--unshare-all", "--unshare-user", "--disable-userns"]
    if config.network:
        args.append("--share-net")
    for path in config.ro_paths:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            args += ["--ro-bind", path, path]
    for host, inside in config.extra_ro_binds:
        if not os.path.exists(host):
            raise FileNotFoundError(f"extra_ro_binds: {host} does not exist")
        args += ["--ro-bind", host, inside]
    args += [
        "--proc", "/proc",
        *(["--remount-ro", "/proc"] if config.deny_ptrace else []),  # no /proc/PID/mem writes
        "--dev", "/dev",
        "--size", str(config.limits.tmpfs_bytes), "--tmpfs", "/tmp",
        "--bind", host_workdir, config.workdir_in_sandbox,
        "--chdir", config.workdir_in_sandbox,
        "--hostname", "sandbox",
        "--clearenv",
    ]
    for key, value in sandbox_env(config).items():
        args += ["--setenv", key, value]
    if config.deny_ptrace:
        args += ["--seccomp", str(seccomp_fd)]
    args.append("--")
    return args


def cgroup_join_args(procs_files: tuple[str, ...]) -> list[str]:
    """A shell that writes its own pid into the episode's cgroup(s), then execs the rest.

    It runs as root, before the switch to the episode uid (joining a cgroup needs write access to
    the common ancestor, which the episode uid must not have) and before anything forks, so every
    process of the command is counted from the start.
    """
    script = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'
    return [shutil.which("sh") or "/bin/sh", "-c", script, "cgroup-join", str(len(procs_files)), *procs_files]


def watchdog_wrap(command: list[str], lifeline_fd: int) -> list[str]:
    """Run `command` with a watchdog that empties the pid namespace when our process dies.

    `lifeline_fd` is the read end of a pipe whose write end only we hold: if we die (even by
    kill -9) it reads EOF and SIGKILLs every process of the namespace. bwrap's own
    --die-with-parent is not enough: its pid-1 monitor intermittently survives the death of the
    outer bwrap process (observed with bwrap 0.8), leaving the command running.
    """
    script = (
        f"(read -r _ <&{lifeline_fd}; kill -KILL -1) >/dev/null 2>&1 </dev/null & "
        f'exec {lifeline_fd}<&-; exec "$@"'
    )
    return ["/bin/bash", "-c", script, "sandbox-watchdog", *command]


def build_argv(
    config: SandboxConfig,
    host_workdir: str,
    command: list[str],
    nproc: int,
    lifeline_fd: int | None = None,
    *,
    uid: int | None = None,
    cgroup_procs: tuple[str, ...] = (),
    seccomp_fd: int | None = None,
) -> list[str]:
    """Full argv: [cgroup join] setpriv [--reuid U] --pdeathsig KILL -- prlimit ... -- bwrap ... -- [watchdog] cmd."""
    bwrap, prlimit, setpriv = require_tools(config)
    # The parent-death signal takes down the outer bwrap when we die; the lifeline watchdog takes
    # down everything inside (see watchdog_wrap). setpriv sets it after the uid switch (a
    # credential change clears it).
    priv = [setpriv]
    if uid is not None:
        priv += [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    priv += ["--pdeathsig", "KILL", "--"]
    inner = watchdog_wrap(command, lifeline_fd) if lifeline_fd is not None else command
    return (
        (cgroup_join_args(cgroup_procs) if cgroup_procs else [])
        + priv
        + rlimit_args(prlimit, config.limits, nproc)
        + bwrap_args(bwrap, config, host_workdir, seccomp_fd)
        + inner
    )
