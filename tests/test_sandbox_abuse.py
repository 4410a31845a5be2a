"""Abuse suite: each attack runs in the real bubblewrap sandbox and must be contained and
reported cleanly, leaving no process behind (checked by PID)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
import uuid

import pytest

from openclaw.sandbox import Limits, SandboxConfig, SandboxPool
from openclaw.sandbox.uids import pids_of_uid, pids_with_marker

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def wait_until(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def make_pool(**limits) -> SandboxPool:
    base = {"wall_timeout_s": 10.0, "cpu_seconds": 10, "max_processes": 64}
    base.update(limits)
    return SandboxPool(SandboxConfig(limits=Limits(**base)), size=2)


def marker() -> str:
    """A unique sleep duration: lets us find the command's processes by PID afterwards."""
    return f"{1000 + uuid.uuid4().int % 100000}.{uuid.uuid4().int % 10**6:06d}"


def assert_no_strays(session_uid: int | None, token: str | None = None) -> None:
    if session_uid is not None:
        assert wait_until(lambda: not pids_of_uid(session_uid), 5), pids_of_uid(session_uid)
    if token is not None:
        assert wait_until(lambda: not pids_with_marker(token), 5), pids_with_marker(token)


async def test_cannot_read_host_files_outside_binds(tmp_path):
    secret = "s3cr3t-" + uuid.uuid4().hex
    tmp_secret = tmp_path / "secret.txt"
    tmp_secret.write_text(secret)
    os.chmod(tmp_path, 0o755)
    tmp_secret.chmod(0o644)  # world-readable: only the mount namespace stands in the way
    targets = [str(tmp_secret)]
    root_secret = None
    if os.access("/root", os.W_OK):
        root_secret = f"/root/.openclaw-sandbox-test-{uuid.uuid4().hex}"
        with open(root_secret, "w") as f:
            f.write(secret)
        os.chmod(root_secret, 0o644)
        targets.append(root_secret)
    try:
        pool = make_pool()
        async with pool.session() as sb:
            for target in targets:
                r = await sb.run(f"cat {target}; ls -la {os.path.dirname(target)}")
                assert secret not in r.stdout + r.stderr
                assert r.exit_code != 0
                assert "No such file or directory" in r.stderr
            # Nor via /proc of a host process: the sandbox has its own pid namespace.
            r = await sb.run("ls /proc/*/root/ 2>&1 | head -50; cat /proc/1/cmdline")
            assert secret not in r.stdout
            assert "bwrap" in r.stdout  # pid 1 is the sandbox's own init, not the host's
            # Host environment variables do not leak in.
            os.environ["OPENCLAW_TEST_SECRET"] = secret
            try:
                r = await sb.run("env")
            finally:
                del os.environ["OPENCLAW_TEST_SECRET"]
            assert secret not in r.stdout and r.exit_code == 0
            uid = sb.uid
        assert_no_strays(uid)
    finally:
        if root_secret:
            os.unlink(root_secret)


async def test_cannot_write_outside_workdir(tmp_path):
    os.chmod(tmp_path, 0o777)  # even a world-writable host dir is not reachable
    host_target = tmp_path / "pwned"
    pool = make_pool()
    async with pool.session() as sb:
        r = await sb.run(
            f"echo x > {host_target}; echo x > /usr/pwned; echo x > /etc/pwned; "
            "echo x > /pwned; touch /workspace/../pwned; echo ok > /workspace/inside.txt"
        )
        assert "Read-only file system" in r.stderr or "Permission denied" in r.stderr
        assert not host_target.exists()
        assert not os.path.exists("/usr/pwned") and not os.path.exists("/etc/pwned")
        assert not os.path.exists(os.path.join(os.path.dirname(sb.workdir), "pwned"))
        # The one writable place works and is visible from the host.
        with open(os.path.join(sb.workdir, "inside.txt")) as f:
            assert f.read() == "ok\n"
        # /tmp inside is a private tmpfs: writes there never reach the host's /tmp.
        name = f"openclaw-sbx-probe-{uuid.uuid4().hex}"
        r = await sb.run(f"echo x > /tmp/{name} && cat /tmp/{name}")
        assert r.exit_code == 0 and r.stdout == "x\n"
        assert not os.path.exists(f"/tmp/{name}")
        uid = sb.uid
    assert_no_strays(uid)


async def test_no_network_including_host_loopback():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted: list[object] = []
    stop = threading.Event()

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                conn, addr = listener.accept()
            except (TimeoutError, OSError):
                continue
            accepted.append(addr)
            conn.close()

    thread = threading.Thread(target=accept_loop, daemon=True)
    thread.start()
    try:
        # The listener is real: a host-side connection is accepted.
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        assert wait_until(lambda: len(accepted) == 1, 5)
        probe = textwrap.dedent(
            f"""
            import socket
            for host, port in [("127.0.0.1", {port}), ("1.1.1.1", 53), ("8.8.8.8", 443)]:
                try:
                    socket.create_connection((host, port), timeout=2).close()
                    print("CONNECTED", host)
                except OSError as e:
                    print("BLOCKED", host, type(e).__name__)
            try:
                socket.getaddrinfo("example.com", 80)
                print("DNS OK")
            except OSError as e:
                print("DNS BLOCKED")
            """
        )
        pool = make_pool()
        async with pool.session() as sb:
            r = await sb.run(["python3", "-c", probe])
            uid = sb.uid
        assert "CONNECTED" not in r.stdout, r.stdout
        assert r.stdout.count("BLOCKED") == 4, r.stdout + r.stderr
        assert len(accepted) == 1  # nothing from the sandbox reached the listener
        assert_no_strays(uid)
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


async def test_fork_bomb_is_contained():
    pool = make_pool(max_processes=32, wall_timeout_s=4.0, cpu_seconds=4)
    async with pool.session() as sb:
        start = time.monotonic()
        # The top shell stays (sleep) while the bomb grows: with a bare `wait` it could exit 0 before
        # any fork failed (its own job ends at once; the bomb lives on in grandchildren), and the
        # episode would end without the bomb ever meeting a cap.
        r = await sb.run("bomb() { bomb | bomb & }; bomb; sleep 30")
        uid = sb.uid
        elapsed = time.monotonic() - start
        assert elapsed < 15
        # Either the bomb hit RLIMIT_NPROC (fork: Resource temporarily unavailable) and exited, or it
        # was killed at the deadline; both are reported cleanly.
        assert r.timed_out or "Resource temporarily unavailable" in r.stderr or r.exit_code != 0
        # The host is still usable and so is the session.
        r2 = await sb.run("echo alive")
        assert r2.stdout == "alive\n"
    assert_no_strays(uid)


async def test_memory_bomb_is_contained():
    pool = make_pool(address_space_bytes=512 << 20)
    async with pool.session() as sb:
        r = await sb.run(["python3", "-c", "x = bytearray(4 << 30); print('allocated')"])
        uid = sb.uid
    assert "allocated" not in r.stdout
    assert r.exit_code != 0 and "MemoryError" in r.stderr
    assert not r.timed_out
    assert_no_strays(uid)


async def test_infinite_loop_times_out_and_is_killed():
    token = marker()
    pool = make_pool(wall_timeout_s=1.0)
    async with pool.session() as sb:
        start = time.monotonic()
        r = await sb.run(f"sleep {token} & while :; do :; done")
        uid = sb.uid
    assert time.monotonic() - start < 8
    assert r.timed_out and r.killed_reason == "timeout"
    assert 0.9 < r.duration_s < 5
    assert_no_strays(uid, token)


async def test_cpu_limit_kills_busy_loop():
    pool = make_pool(cpu_seconds=1, wall_timeout_s=20.0)
    async with pool.session() as sb:
        r = await sb.run(["python3", "-c", "while True: pass"])
        uid = sb.uid
    assert not r.timed_out
    assert r.killed_reason in ("cpu_limit", "signal:SIGKILL"), r
    assert r.duration_s < 15
    assert_no_strays(uid)


async def test_hundred_megabytes_of_output_is_truncated_not_buffered():
    pool = make_pool(max_output_bytes=64 << 10)
    async with pool.session() as sb:
        tracemalloc.start()
        try:
            r = await sb.run("head -c 100000000 /dev/zero | tr '\\0' 'a'; echo done >&2")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        uid = sb.uid
    assert r.exit_code == 0 and r.truncated
    assert r.stdout_bytes == 100_000_000
    assert len(r.stdout) == 64 << 10 and set(r.stdout) == {"a"}
    assert r.stderr == "done\n"
    assert peak < 16 << 20, f"peak Python allocation {peak} bytes: output was buffered"
    assert_no_strays(uid)


async def test_file_size_limit():
    pool = make_pool(file_size_bytes=1 << 20)
    async with pool.session() as sb:
        r = await sb.run("head -c 5000000 /dev/zero > big.bin")
        size = os.path.getsize(os.path.join(sb.workdir, "big.bin"))
    assert size <= 1 << 20
    assert r.exit_code != 0


PARENT_SCRIPT = """
import asyncio, sys
from openclaw.sandbox import Limits, SandboxConfig, SandboxPool

async def main():
    pool = SandboxPool(SandboxConfig(limits=Limits(wall_timeout_s=600)), size=1)
    async with pool.session() as sb:
        print("UID", sb.uid, flush=True)
        await sb.run("sleep {token} & sleep {token}; wait")

asyncio.run(main())
"""


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return "?"


def sleeps(token: str) -> list[int]:
    return [p for p in pids_with_marker(token) if cmdline(p).startswith("sleep ")]


def describe(pids: list[int]) -> list[str]:
    return [f"{p}: {cmdline(p)}" for p in pids]


def test_killing_the_parent_kills_the_sandbox():
    token = marker()
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT_SCRIPT.format(token=token)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so our kill -9 hits only the parent, not its process group
    )
    try:
        line = parent.stdout.readline()
        assert line.startswith("UID"), line
        # Wait until the command itself runs (both sleeps), i.e. the sandbox is fully up.
        assert wait_until(lambda: len(sleeps(token)) >= 2, 30), "sandbox never started"
        children = pids_with_marker(token)
        os.kill(parent.pid, 9)
        parent.wait(timeout=10)
        # The parent-death signal (outer bwrap) and the lifeline watchdog (everything inside the
        # pid namespace) take the whole sandbox down with the parent.
        assert wait_until(lambda: not pids_with_marker(token), 10), describe(pids_with_marker(token))
        # Each PID that belonged to the sandbox is gone (or reused by an unrelated process).
        assert len(children) >= 4  # outer bwrap, inner bwrap, the shell, two sleeps (minus races)
        for pid in children:
            assert token not in cmdline(pid)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        # The killed parent left its episode's work dir mount and cgroup: a new pool frees them.
        SandboxPool(SandboxConfig(), size=1)


async def test_background_processes_do_not_outlive_a_command():
    token = marker()
    pool = make_pool()
    async with pool.session() as sb:
        r = await sb.run(f"(nohup sleep {token} >/dev/null 2>&1 &); setsid sleep {token} & echo started")
        assert r.stdout == "started\n" and r.exit_code == 0
        # The pid namespace dies with the command: nothing is left, checked by PID.
        assert wait_until(lambda: not pids_with_marker(token), 5), pids_with_marker(token)
        uid = sb.uid
    assert_no_strays(uid, token)


async def test_cancellation_kills_the_command():
    token = marker()
    pool = make_pool(wall_timeout_s=60)
    async with pool.session() as sb:
        task = asyncio.create_task(sb.run(f"sleep {token}"))
        assert await asyncio.to_thread(wait_until, lambda: bool(pids_with_marker(token)), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        uid = sb.uid
    assert_no_strays(uid, token)
