"""Sandbox for Track 2 environments: bubblewrap isolation, rlimits, timeouts, a concurrency pool.

    pool = SandboxPool(SandboxConfig(), size=parallel_envs_from_env())
    async with pool.session() as sb:
        result = await sb.run("ls -la")

See openclaw/sandbox/README.md for the threat model.
"""

from openclaw.sandbox.command import SandboxUnavailableError
from openclaw.sandbox.config import (
    Limits,
    SandboxConfig,
    parallel_envs_from_env,
    sandbox_config_from_env,
)
from openclaw.sandbox.pool import NO_SANDBOX_WARNING, SandboxPool, SandboxSession
from openclaw.sandbox.result import ExecResult

__all__ = [
    "NO_SANDBOX_WARNING",
    "ExecResult",
    "Limits",
    "SandboxConfig",
    "SandboxPool",
    "SandboxSession",
    "SandboxUnavailableError",
    "parallel_envs_from_env",
    "sandbox_config_from_env",
]
