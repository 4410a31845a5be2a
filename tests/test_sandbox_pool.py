"""Sandbox configuration, errors and the PARALLEL_ENVS pool (real bwrap, real processes)."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil

import pytest

from openclaw.sandbox import (
    NO_SANDBOX_WARNING,
    Limits,
    SandboxConfig,
    SandboxPool,
    SandboxUnavailableError,
    parallel_envs_from_env,
)

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def test_missing_bwrap_is_a_clear_error():
    with pytest.raises(SandboxUnavailableError) as exc:
        SandboxPool(SandboxConfig(bwrap_path="/nonexistent/bwrap"), size=1)
    message = str(exc.value)
    assert "apt-get install bubblewrap" in message and "--sandbox none" in message


def test_bad_config_is_rejected(monkeypatch):
    with pytest.raises(ValueError, match="kind"):
        SandboxConfig(kind="docker")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="wall_timeout_s"):
        Limits(wall_timeout_s=0)
    with pytest.raises(ValueError, match="pool size"):
        SandboxPool(SandboxConfig(kind="none"), size=0)
    monkeypatch.setenv("PARALLEL_ENVS", "many")
    with pytest.raises(ValueError, match="PARALLEL_ENVS"):
        parallel_envs_from_env()
    monkeypatch.setenv("PARALLEL_ENVS", "32")
    assert parallel_envs_from_env() == 32


async def test_sandbox_none_warns_loudly_and_still_limits_time(caplog):
    with caplog.at_level(logging.WARNING):
        pool = SandboxPool(SandboxConfig(kind="none", limits=Limits(wall_timeout_s=1)), size=1)
    assert NO_SANDBOX_WARNING in caplog.text and "SANDBOX DISABLED" in caplog.text
    async with pool.session() as sb:
        r = await sb.run("pwd; echo x > f.txt; sleep 30")
        assert r.timed_out and r.killed_reason == "timeout"
        assert r.stdout.strip() == sb.workdir
        assert os.path.exists(os.path.join(sb.workdir, "f.txt"))


@needs_bwrap
async def test_result_fields_and_workdir_persistence():
    pool = SandboxPool(SandboxConfig(), size=1)
    async with pool.session() as sb:
        r = await sb.run("echo out; echo err >&2; exit 3")
        assert (r.exit_code, r.stdout, r.stderr, r.truncated, r.timed_out) == (3, "out\n", "err\n", False, False)
        assert r.killed_reason is None and r.duration_s > 0 and not r.ok
        # Files persist between commands of one session; shell state does not.
        await sb.run("mkdir d && echo hello > d/f && cd d")
        r = await sb.run("cat d/f && pwd")
        assert r.stdout == "hello\n/workspace\n"
        sb.write_file("given/input.txt", "from host\n")
        r = await sb.run("cat given/input.txt && echo more >> given/input.txt")
        assert r.stdout == "from host\n" and r.exit_code == 0
        with pytest.raises(ValueError, match="escapes"):
            sb.write_file("../outside.txt", "x")
        r = await sb.run("kill -SEGV $$")
        assert r.killed_reason == "signal:SIGSEGV"
        workdir = sb.workdir
    assert not os.path.exists(workdir)  # cleaned up with the session


@needs_bwrap
async def test_staged_files_are_bound_read_only():
    pool = SandboxPool(SandboxConfig(), size=1)
    async with pool.session() as sb:
        tests_dir = sb.stage("tests", {"check.sh": "echo checked\n", "sub/data.txt": "d\n"})
        r = await sb.run("ls /tests")
        assert "No such file" in r.stderr  # invisible until bound
        r = await sb.run(
            "bash /tests/check.sh; cat /tests/sub/data.txt; echo x > /tests/new",
            ro_binds=[(tests_dir, "/tests")],
        )
        assert r.stdout == "checked\nd\n" and "Read-only" in r.stderr
        assert not os.path.exists(os.path.join(tests_dir, "new"))
        with pytest.raises(ValueError):
            sb.stage("x", {"../../evil": "x"})


@needs_bwrap
async def test_pool_bounds_concurrency_and_isolates_episodes():
    pool = SandboxPool(SandboxConfig(), size=3)
    active = 0
    peak = 0
    seen: list[tuple[int | None, str]] = []

    async def episode(i: int) -> str:
        nonlocal active, peak
        async with pool.session() as sb:
            active += 1
            peak = max(peak, active)
            seen.append((sb.uid, sb.workdir))
            await sb.run(f"echo {i} > mine.txt")
            r = await sb.run("ls; cat mine.txt")
            active -= 1
            return r.stdout

    outputs = await asyncio.gather(*(episode(i) for i in range(8)))
    assert peak == 3
    # Each episode saw only its own file.
    assert outputs == [f"mine.txt\n{i}\n" for i in range(8)]
    assert len({w for _, w in seen}) == 8
    if os.geteuid() == 0:
        concurrent_uids = {u for u, _ in seen}
        assert all(u is not None and u >= SandboxConfig().uid_base for u in concurrent_uids)
