"""The buffer store on real SQLite files, with real processes: POSIX locks survive a second
open, `verify` sees a writer whose WAL was unlinked, private modes without
a raw descriptor, opening an existing buffer only, one bad record never fails
its group commit, and the CLI ends quietly on a closed pipe."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openclaw.buffer import (
    C_BAD_RECORD,
    AppendOp,
    AttachOp,
    BufferNotFoundError,
    FinalizeOp,
    RecordError,
    TrajectoryBuffer,
    TurnRecord,
    wal_problems,
)
from openclaw.intercept.writer import GroupCommitWriter


def rec(sid: str, text: str = "hello", **kw) -> TurnRecord:
    fields = dict(session_id=sid, turn_index=None, turn_type="main", messages=[{"role": "user", "content": text}],
                  prompt_ids=[1, 2, 3], response_ids=[10, 11], response_logprobs=[-0.5, -0.25],
                  response_text="out", content="out", model="m", weight_version=1, trainable=True)
    fields.update(kw)
    return TurnRecord(**fields)


def cli(d: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "openclaw.buffer", "--dir", str(d), *args],
                          capture_output=True, text=True, timeout=120, **kw)


# ---------------------------------------------------------------- locks, WAL
def test_second_open_keeps_the_locks_of_the_first(tmp_path: Path) -> None:
    """The unit form of the data loss: a second open in this process, then another process
    opens and closes the database. Before the fix the first handle's locks were gone, the other
    process deleted the WAL, and this handle's next commit went to an unlinked file."""
    first = TrajectoryBuffer.open(tmp_path)
    try:
        first.append_turn(rec("a"))
        TrajectoryBuffer.open(tmp_path).close()
        assert cli(tmp_path, "stats").returncode == 0  # another process: open, read, close
        assert Path(str(first.path) + "-wal").exists()
        first.append_turn(rec("b"))
        assert wal_problems(first.path) == []
        assert cli(tmp_path, "verify").returncode == 0
    finally:
        first.close()
    with TrajectoryBuffer.open(tmp_path) as again:
        assert [len(again.session_turns(s)) for s in ("a", "b")] == [1, 1]


@pytest.mark.parametrize("unlinked", [("-wal", "-shm"), ("-wal",)])
def test_verify_detects_an_unlinked_wal_under_a_live_writer(tmp_path: Path, unlinked: tuple[str, ...]) -> None:
    """What the bug did (SQLite deleted -wal and -shm while a writer still had them open),
    done by hand: `verify` in another process names the writer's pid and the -wal it lost.
    With only the -wal gone SQLite cannot open the database at all; verify still says why."""
    code = ("import sys; from openclaw.buffer import TrajectoryBuffer; b = TrajectoryBuffer.open(sys.argv[1]);"
            " b.bump_counter('x', 1); print('ready', flush=True); sys.stdin.readline()")
    writer = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        ok = cli(tmp_path, "verify")
        assert ok.returncode == 0, ok.stdout + ok.stderr
        for suffix in unlinked:
            os.unlink(tmp_path / f"buffer.sqlite3{suffix}")
        r = cli(tmp_path, "verify")
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"pid {writer.pid} writes to a -wal file that is no longer" in r.stdout, r.stdout
    finally:
        assert writer.stdin is not None
        writer.stdin.close()  # the writer exits on EOF
        writer.wait(30)


def test_files_are_private_under_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0o002)
    try:
        with TrajectoryBuffer.open(tmp_path / "b") as b:
            b.append_turn(rec("s"))
            for p in (b.path, Path(str(b.path) + "-wal"), Path(str(b.path) + "-shm")):
                assert p.stat().st_mode & 0o777 == 0o600, p
            assert b.directory.stat().st_mode & 0o777 == 0o700
            assert b.verify() == []
    finally:
        os.umask(old)


def test_open_never_opens_a_descriptor_on_the_database(tmp_path: Path) -> None:
    """The rule behind the fix, checked directly: while a handle is open, a second open adds
    and closes no descriptor of the database file other than SQLite's own."""
    with TrajectoryBuffer.open(tmp_path) as b:
        db = os.path.realpath(b.path)

        def db_fds() -> set[str]:
            out = set()
            for fd in os.listdir("/proc/self/fd"):
                try:
                    if os.readlink(f"/proc/self/fd/{fd}") == db:
                        out.add(fd)
                except OSError:
                    continue
            return out

        before = db_fds()
        with TrajectoryBuffer.open(tmp_path) as second:
            during = db_fds()
            second.append_turn(rec("x"))
        assert before <= during and len(during) == len(before) + 1  # the second connection, nothing else
        assert b.get_turn(1) is not None and wal_problems(b.path) == []


# ---------------------------------------------------------------- existing only
def test_open_existing_only(tmp_path: Path) -> None:
    missing = tmp_path / "typo"
    with pytest.raises(BufferNotFoundError) as e:
        TrajectoryBuffer.open(missing, create=False)
    msg = str(e.value)
    assert str(missing) in msg and f"--enable-rl-intercept --rl-buffer-dir {missing}" in msg
    assert isinstance(e.value, FileNotFoundError)
    assert not missing.exists(), "create=False must not create the directory"
    tmp_path.joinpath("empty").mkdir()
    with pytest.raises(BufferNotFoundError):
        TrajectoryBuffer.open(tmp_path / "empty", create=False)
    assert not (tmp_path / "empty" / "buffer.sqlite3").exists()
    TrajectoryBuffer.open(tmp_path / "real").close()
    with TrajectoryBuffer.open(tmp_path / "real", create=False) as b:
        assert b.stats()["turns"] == 0
    r = cli(missing, "stats")
    assert r.returncode != 0 and "--enable-rl-intercept --rl-buffer-dir" in r.stderr and str(missing) in r.stderr


# ---------------------------------------------------------------- bad record
BAD = {
    "lone surrogate in session_id": lambda: rec("bad-\ud800-sid"),
    "lone surrogate in a message name": lambda: rec(
        "bad-name", messages=[{"role": "user", "content": "hi", "name": "x\udc00"}]),
    "lone surrogate in tool_call_id": lambda: rec(
        "bad-tcid", messages=[{"role": "user", "content": "q"},
                              {"role": "tool", "content": "r", "tool_call_id": "call-\ud83d"}]),
    "lone surrogate in a tool parameter key": lambda: rec(
        "bad-tool", tools=[{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"k\udfff": {"type": "string"}}}}}]),
    "a model that is not text": lambda: rec("bad-model", model=b"\x00\xff"),
    # Passes every check before the transaction and fails inside SQLite: the replay path.
    "a weight version SQLite cannot store": lambda: rec("bad-version", weight_version=2**80),
}


@pytest.mark.parametrize("kind", list(BAD))
def test_one_bad_record_fails_only_itself(tmp_path: Path, kind: str) -> None:
    with TrajectoryBuffer.open(tmp_path) as b:
        prev = rec("good-0")
        b.append_turn(prev)
        good = [rec(f"good-{i}") for i in range(1, 6)]
        bad = BAD[kind]()
        ops = [AttachOp(prev, {"role": "user", "content": "next"}), AppendOp(good[0]), AppendOp(good[1]),
               AppendOp(bad), AttachOp(bad, {"role": "user", "content": "x"}), AppendOp(good[2]),
               AppendOp(good[3]), FinalizeOp("good-3"), AppendOp(good[4])]
        results = b.write_ops(ops)
        assert isinstance(results[3], RecordError), results[3]
        assert results[4] is None  # nothing to attach to: the record was refused
        assert bad.turn_id is None
        assert results[0] == prev.turn_id and results[7] == 1
        for r in good:
            got = b.session_turns(r.session_id)
            assert len(got) == 1 and got[0].turn_id == r.turn_id
        assert b.get_turn(prev.turn_id).state == "ready"
        assert b.stats()["turns"] == 6 and b.verify() == []


def test_concurrent_group_commit_isolates_a_bad_record(tmp_path: Path) -> None:
    """The intercept's path: concurrent requests share a group commit through the writer
    thread; the bad one fails alone, every other request's turn lands."""
    with TrajectoryBuffer.open(tmp_path) as b:
        writer = GroupCommitWriter(b)

        async def burst() -> list:
            futs = []
            for i in range(24):
                r = BAD["lone surrogate in session_id"]() if i == 11 else rec(f"user-{i}")
                futs.append(writer.submit([AppendOp(r)]))
            return await asyncio.gather(*futs)

        try:
            outcomes = asyncio.run(burst())
        finally:
            writer.close()
        assert isinstance(outcomes[11][0], RecordError)
        assert all(isinstance(o[0], int) for i, o in enumerate(outcomes) if i != 11)
        assert b.stats()["turns"] == 23 and b.verify() == []


def test_fallback_path_counts_the_bad_record(tmp_path: Path) -> None:
    with TrajectoryBuffer.open(tmp_path) as b:
        res = b.write_ops([AppendOp(rec("ok-1")), AppendOp(BAD["a weight version SQLite cannot store"]()),
                           AppendOp(rec("ok-2"))])
        assert isinstance(res[0], int) and isinstance(res[1], RecordError) and isinstance(res[2], int)
        assert b.counters()[C_BAD_RECORD] == 1
        ids = [t.turn_id for t in b.iter_turns()]
        assert ids == [res[0], res[2]]


# ---------------------------------------------------------------- closed pipe
@pytest.mark.parametrize("args", [["stats"], ["stats", "--json"], ["tail", "-n", "5"], ["export"],
                                  ["export", "--format", "jsonl"], ["verify"], ["purge", "--session", "s-0"],
                                  ["import", "-"]])
def test_closed_pipe_ends_quietly(tmp_path: Path, args: list[str]) -> None:
    """`python -m openclaw.buffer ... | head`: the reader is gone before the command writes
    (the pipe's read end is closed before the child starts, so every write fails)."""
    with TrajectoryBuffer.open(tmp_path) as b:
        for i in range(3):
            b.append_turn(rec(f"s-{i}"))
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = subprocess.run([sys.executable, "-m", "openclaw.buffer", "--dir", str(tmp_path), *args],
                           stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
                           input='{"session_id": "new", "turns": []}' if args[0] == "import" else None)
    finally:
        os.close(write_end)
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr
    assert r.returncode == 141, (r.returncode, r.stderr)
