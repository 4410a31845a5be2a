"""Typed sandbox configuration, parsed once (from flags or env) and passed around."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from openclaw.environment import env_value

SandboxKind = Literal["bwrap", "none"]
# How the per-episode caps (memory, processes, workspace) are enforced, see README.md:
# "cgroup": the kernel (a memory+pids cgroup per episode and a size-limited tmpfs work dir; needs
# root and writable cgroup controllers), "watchdog": a poller that kills the episode's command when
# a cap is crossed (soft: the overshoot is bounded by the poll interval), "auto": cgroup when this
# host allows it, else watchdog with a loud warning.
EpisodeLimitsMode = Literal["auto", "cgroup", "watchdog"]

# System paths bound read-only into every sandbox (missing ones are skipped; symlinks such as
# /bin -> usr/bin on merged-/usr distros are recreated as symlinks).
DEFAULT_RO_PATHS: tuple[str, ...] = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32")
# Only the /etc entries programs need to start; the rest of host /etc stays invisible.
DEFAULT_ETC_PATHS: tuple[str, ...] = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/mime.types",
    "/etc/python3",
    "/etc/python3.11",
    "/etc/bash.bashrc",
    "/etc/inputrc",
    "/etc/magic",
)


@dataclass(frozen=True)
class Limits:
    """Resource limits: per command (rlimits, wall-clock timeout) and per episode (aggregate caps)."""

    wall_timeout_s: float = 30.0
    cpu_seconds: int = 30  # RLIMIT_CPU, per process
    address_space_bytes: int = 1 << 30  # RLIMIT_AS: 1 GiB
    max_processes: int = 64  # per episode: pids cgroup (or RLIMIT_NPROC of the episode's uid)
    file_size_bytes: int = 64 << 20  # RLIMIT_FSIZE: 64 MiB per file
    open_files: int = 256  # RLIMIT_NOFILE
    max_output_bytes: int = 64 << 10  # kept per stream; the rest is read and discarded
    tmpfs_bytes: int = 64 << 20  # size of the private /tmp
    # Per episode, all of its processes together (incl. /tmp and, with cgroups, the workspace's
    # tmpfs pages, which are memory too).
    episode_memory_bytes: int = 4 << 30
    workspace_bytes: int = 1 << 30  # quota of the episode's /workspace (all files together)

    def __post_init__(self) -> None:
        for name in (
            "wall_timeout_s",
            "cpu_seconds",
            "address_space_bytes",
            "max_processes",
            "file_size_bytes",
            "open_files",
            "max_output_bytes",
            "tmpfs_bytes",
            "episode_memory_bytes",
            "workspace_bytes",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"Limits.{name} must be > 0, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class SandboxConfig:
    """How commands are isolated.

    kind="bwrap": bubblewrap, read-only system, private writable work dir, no network.
    kind="none": a plain subprocess in the work dir, NO isolation; trusted local debugging only.
    """

    kind: SandboxKind = "bwrap"
    limits: Limits = field(default_factory=Limits)
    network: bool = False  # True shares the host network namespace (never the default)
    ro_paths: tuple[str, ...] = DEFAULT_RO_PATHS + DEFAULT_ETC_PATHS
    extra_ro_binds: tuple[tuple[str, str], ...] = ()  # (host path, sandbox path)
    workdir_in_sandbox: str = "/workspace"
    # When running as root, each pool slot runs as its own unprivileged uid (uid_base + slot), so
    # RLIMIT_NPROC counts that episode's processes only and host files owned by root stay unreadable.
    uid_base: int = 200_000
    bwrap_path: str = "bwrap"
    prlimit_path: str = "prlimit"
    workdir_root: str | None = None  # where per-episode work dirs are created (default: tempdir)
    env: tuple[tuple[str, str], ...] = ()  # extra variables inside the sandbox
    episode_limits: EpisodeLimitsMode = "auto"
    # True (per command, via SandboxSession.run(deny_ptrace=True)): its processes cannot ptrace one
    # another or write one another's memory (see seccomp.py), for graders that run untrusted code.
    deny_ptrace: bool = False

    def __post_init__(self) -> None:
        if self.kind not in ("bwrap", "none"):
            raise ValueError(f"sandbox kind must be 'bwrap' or 'none', got {self.kind!r}")
        if self.episode_limits not in ("auto", "cgroup", "watchdog"):
            raise ValueError(
                f"episode_limits must be 'auto', 'cgroup' or 'watchdog', got {self.episode_limits!r}"
            )
        if not self.workdir_in_sandbox.startswith("/"):
            raise ValueError("workdir_in_sandbox must be an absolute path")


def parallel_envs_from_env(default: int = 8) -> int:
    """PARALLEL_ENVS, validated (the number of concurrent episodes)."""
    raw = env_value("PARALLEL_ENVS") or str(default)
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"PARALLEL_ENVS must be an integer, got {raw!r}") from None
    if value < 1:
        raise ValueError(f"PARALLEL_ENVS must be >= 1, got {value}")
    return value


def sandbox_config_from_env(kind: str | None = None, **limits: float) -> SandboxConfig:
    """Build a config from OPENCLAW_SANDBOX (bwrap|none) and keyword limit overrides."""
    chosen = kind or env_value("OPENCLAW_SANDBOX") or "bwrap"
    if chosen not in ("bwrap", "none"):
        raise ValueError(f"OPENCLAW_SANDBOX/--sandbox must be 'bwrap' or 'none', got {chosen!r}")
    return SandboxConfig(kind=chosen, limits=Limits(**limits))  # type: ignore[arg-type]
