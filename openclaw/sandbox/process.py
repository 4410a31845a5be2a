"""Run one argv with a wall-clock deadline, capped output and process-group cleanup."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from openclaw.sandbox.result import ExecResult

_CHUNK = 64 << 10
_GRACE_S = 5.0


@dataclass(frozen=True)
class SpawnSpec:
    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    timeout_s: float
    max_output_bytes: int
    # bwrap reports a signalled child as exit code 128+N; a bare subprocess as -N.
    signal_as_128_plus: bool = True
    kill_group_after_exit: bool = False  # background jobs outlive the group leader without a pid namespace
    pass_fds: tuple[int, ...] = ()
    # Started with the spawned pid; if it returns (a reason such as "episode_memory_limit") before
    # the command ends, the command is killed like on a timeout and reported with that reason.
    monitor: Callable[[int], Awaitable[str]] | None = None


class _Capture:
    """Keeps at most `cap` bytes of a stream and counts the rest: 100 MB never lands in memory."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kept = bytearray()
        self.total = 0

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while True:
            chunk = await stream.read(_CHUNK)
            if not chunk:
                return
            self.total += len(chunk)
            room = self.cap - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]


def kill_process_group(pgid: int) -> None:
    """SIGKILL a whole process group (by its id, never by name)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _killed_reason(exit_code: int, timed_out: bool, signal_as_128_plus: bool) -> str | None:
    if timed_out:
        return "timeout"
    signum = None
    if exit_code < 0:
        signum = -exit_code
    elif signal_as_128_plus and 128 < exit_code < 128 + 65:
        signum = exit_code - 128
    if signum is None:
        return None
    if signum == signal.SIGXCPU:
        return "cpu_limit"
    if signum == signal.SIGXFSZ:
        return "file_size_limit"
    try:
        return f"signal:{signal.Signals(signum).name}"
    except ValueError:
        return f"signal:{signum}"


async def run_spawn(spec: SpawnSpec) -> ExecResult:
    """Spawn in a new session (so its process group is ours to kill) and collect the result."""
    start = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *spec.argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=spec.env,
        cwd=spec.cwd,
        start_new_session=True,
        pass_fds=spec.pass_fds,
    )
    assert proc.stdout is not None and proc.stderr is not None
    out, err = _Capture(spec.max_output_bytes), _Capture(spec.max_output_bytes)
    everything = asyncio.gather(out.drain(proc.stdout), err.drain(proc.stderr), proc.wait())
    timed_out = False
    limit_reason: str | None = None
    monitor = asyncio.ensure_future(spec.monitor(proc.pid)) if spec.monitor is not None else None
    try:
        if monitor is None:
            await asyncio.wait_for(asyncio.shield(everything), timeout=spec.timeout_s)
        else:
            done, _ = await asyncio.wait({everything, monitor}, timeout=spec.timeout_s,
                                         return_when=asyncio.FIRST_COMPLETED)
            if everything not in done and monitor in done:
                limit_reason = monitor.result()
            elif not done:
                timed_out = True
    except asyncio.TimeoutError:
        timed_out = True
    except BaseException:
        # Cancelled or failed: never leave the command running behind us.
        if proc.returncode is None:
            kill_process_group(proc.pid)
        everything.cancel()
        raise
    finally:
        if monitor is not None:
            monitor.cancel()
    if limit_reason is not None:
        kill_process_group(proc.pid)
    if proc.returncode is None or timed_out or spec.kill_group_after_exit:
        # While the group leader is unreaped, or while any member of its group is alive, the pgid cannot
        # be recycled, so this reaches only our processes. Under bwrap, --die-with-parent and the
        # pid namespace take down anything else; kind="none" has no pid namespace, hence the flag.
        kill_process_group(proc.pid)
    try:
        # Pipes close within milliseconds of the kill; bound the wait anyway in case a process
        # outside the group holds them (possible only with kind="none").
        await asyncio.wait_for(asyncio.shield(everything), timeout=_GRACE_S)
    except asyncio.TimeoutError:
        everything.cancel()
        await proc.wait()
    exit_code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
    return ExecResult(
        exit_code=exit_code,
        stdout=out.kept.decode("utf-8", errors="replace"),
        stderr=err.kept.decode("utf-8", errors="replace"),
        truncated=out.total > len(out.kept) or err.total > len(err.kept),
        timed_out=timed_out,
        killed_reason=limit_reason or _killed_reason(exit_code, timed_out, spec.signal_as_128_plus),
        duration_s=time.monotonic() - start,
        stdout_bytes=out.total,
        stderr_bytes=err.total,
    )
