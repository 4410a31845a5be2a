"""The trajectory buffer on real SQLite files: life cycle, leases, consumers, bounds, purges,
and several processes writing at once."""

from __future__ import annotations

import multiprocessing as mp
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openclaw.buffer import (
    AWAITING,
    CLOSED,
    JUDGE_FAILED,
    JUDGED,
    READY,
    Batch,
    BufferFull,
    RecordError,
    TrajectoryBuffer,
    TurnRecord,
)


def rec(sid: str = "s1", idx: int = 0, *, n: int = 4, text: str = "hello", turn_type: str = "main", **kw) -> TurnRecord:
    trainable = kw.pop("trainable", turn_type == "main")
    return TurnRecord(
        session_id=sid,
        turn_index=idx,
        turn_type=turn_type,
        messages=[{"role": "user", "content": text}],
        prompt_ids=[1, 2, 3],
        response_ids=list(range(10, 10 + n)),
        response_logprobs=[-0.5] * n,
        response_text="out",
        content="out",
        model="m",
        weight_version=3,
        trainable=trainable,
        **kw,
    )


@pytest.fixture
def buf(tmp_path: Path):
    b = TrajectoryBuffer.open(tmp_path / "buf")
    yield b
    b.close()


def test_permissions_and_wal(tmp_path: Path) -> None:
    d = tmp_path / "b"
    with TrajectoryBuffer.open(d) as b:
        b.append_turn(rec())
        assert b._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert b._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
        for f in d.iterdir():
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
        assert b.verify() == []


def test_round_trip_exact(buf: TrajectoryBuffer) -> None:
    r = rec(n=5)
    r.response_logprobs = [-0.1234567891234, -1e-9, -3.0, -0.0, -17.25]
    r.tool_calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    r.metadata = {"redactions": 0}
    tid = buf.append_turn(r)
    got = buf.get_turn(tid)
    assert got is not None and got.state == AWAITING
    assert got.response_logprobs == r.response_logprobs
    assert got.response_ids == r.response_ids and got.prompt_ids == r.prompt_ids
    assert got.tool_calls == r.tool_calls and got.messages == r.messages and got.metadata == r.metadata


def test_rejects_bad_records(buf: TrajectoryBuffer) -> None:
    bad = rec(n=3)
    bad.response_logprobs = [-1.0, -1.0]  # not 1:1
    with pytest.raises(RecordError, match="1:1"):
        buf.append_turn(bad)
    with pytest.raises(RecordError):
        buf.append_turn(rec(turn_type="side", trainable=True))
    with pytest.raises(RecordError):
        buf.append_turn(rec(sid="a\x00b"))
    pos = rec()
    pos.response_logprobs = [0.5] * 4
    with pytest.raises(RecordError):
        buf.append_turn(pos)
    assert buf.stats()["turns"] == 0


def test_life_cycle(buf: TrajectoryBuffer) -> None:
    t0 = buf.append_turn(rec("s", 0))
    t1 = buf.append_turn(rec("s", 1))
    side = buf.append_turn(rec("s", 2, turn_type="side"))
    assert buf.get_turn(side).state == CLOSED
    # attach goes to the latest awaiting turn
    assert buf.attach_next_state("s", {"role": "user", "content": "next"}) == t1
    assert buf.get_turn(t1).state == READY
    assert buf.attach_next_state("s", {"role": "user", "content": "x"}, turn_id=t1) is None  # not twice
    assert buf.finalize_session("s") == 1  # t0 was still awaiting
    r0 = buf.get_turn(t0)
    assert r0.state == READY and r0.next_state is None
    assert buf.open_sessions() == []
    claimed = buf.claim_for_judging("w1", limit=10)
    assert [r.turn_id for r in claimed] == [t0, t1]
    assert buf.claim_for_judging("w2", limit=10) == []  # leased
    assert not buf.write_judgement(t0, {"score": 1}, worker_id="w2")  # not the lease holder
    assert buf.write_judgement(t0, {"score": 1}, worker_id="w1")
    assert buf.write_judgement(t1, {"score": -1})
    assert buf.get_turn(t0).state == JUDGED
    assert buf.verify() == []


def test_lease_expiry_and_failures(tmp_path: Path) -> None:
    b = TrajectoryBuffer.open(tmp_path / "b", max_judge_attempts=2)
    t = b.append_turn(rec(next_state={"role": "user", "content": "n"}))
    assert b.get_turn(t).state == READY
    assert [r.turn_id for r in b.claim_for_judging("dead", lease_seconds=0.05)] == [t]
    deadline = time.time() + 5
    got: list = []
    while not got and time.time() < deadline:  # the dead worker's lease runs out
        got = b.claim_for_judging("alive", lease_seconds=60)
    assert [r.turn_id for r in got] == [t]
    assert b.record_judge_failure(t, "boom") == READY
    assert [r.turn_id for r in b.claim_for_judging("alive")] == [t]  # failure released the lease
    assert b.record_judge_failure(t, "boom again") == JUDGE_FAILED
    assert b.claim_for_judging("alive") == []
    assert b.stats()["counters"]["judge_failed"] == 1
    b.close()


def _judged(buf: TrajectoryBuffer, n: int, sid: str = "s") -> list[int]:
    ids = []
    for i in range(n):
        t = buf.append_turn(rec(sid, i, next_state={"role": "user", "content": "ok"}))
        ids.append(t)
    for r in buf.claim_for_judging("w", limit=n):
        assert buf.write_judgement(r.turn_id, {"score": 1.0})
    return ids


def test_consumers_fetch_does_not_mark(buf: TrajectoryBuffer) -> None:
    ids = _judged(buf, 5)
    first = [r.turn_id for r in buf.fetch_judged("trainer", limit=3)]
    assert first == ids[:3]
    assert [r.turn_id for r in buf.fetch_judged("trainer", limit=3)] == ids[:3]  # not marked
    assert buf.commit_consumed("trainer", first, "checkpoint-1") == 3
    assert buf.commit_consumed("trainer", first, "checkpoint-1") == 0  # idempotent replay
    assert [r.turn_id for r in buf.fetch_judged("trainer", limit=10)] == ids[3:]
    assert [r.turn_id for r in buf.fetch_judged("other", limit=10)] == ids  # per consumer
    pos = buf.consumer_position("trainer")
    assert pos["checkpoint_tag"] == "checkpoint-1" and pos["consumed"] == 3 and pos["max_turn_id"] == ids[2]
    assert buf.consumer_position("nobody") is None
    assert buf.fetch_judged("trainer", min_weight_version=4) == []
    assert buf.fetch_judged("trainer", turn_type="side") == []


def test_size_bound_evicts_consumed_then_refuses(tmp_path: Path) -> None:
    b = TrajectoryBuffer.open(tmp_path / "b", max_mb=0.25)
    big = "x" * 20_000
    ids = []
    with pytest.raises(BufferFull):
        for i in range(100):
            ids.append(b.append_turn(rec("s", i, text=f"{i} {big}", next_state={"role": "user", "content": "n"})))
    n_stored = len(ids)
    assert 3 < n_stored < 100
    assert b.stats()["counters"]["dropped_buffer_full"] == 1
    # nothing unconsumed was evicted
    assert b.stats()["turns"] == n_stored
    # consume some: they become evictable and new records fit again
    for r in b.claim_for_judging("w", limit=5):
        b.write_judgement(r.turn_id, {"score": 0})
    done = [r.turn_id for r in b.fetch_judged("t", limit=5)]
    b.commit_consumed("t", done, "c1")
    b.append_turn(rec("s", 1000, text="new " + big))
    st = b.stats()
    assert st["counters"]["evicted_consumed"] >= 1
    assert all(b.get_turn(t) is not None for t in ids[5:])  # unconsumed all still there
    assert b.verify() == []
    b.close()


def test_ttl_purge(buf: TrajectoryBuffer) -> None:
    old = rec("old", 0)
    old.created_at = time.time() - 3600
    buf.append_turn(old)
    buf.append_turn(rec("new", 0))
    assert buf.purge_older_than(600) == 1
    assert buf.session_turns("old") == [] and len(buf.session_turns("new")) == 1
    assert buf.stats()["counters"]["purged_ttl"] == 1


def test_purge_session_leaves_no_bytes(tmp_path: Path) -> None:
    d = tmp_path / "b"
    b = TrajectoryBuffer.open(d)
    secret_text = "PLANTED-PRIVATE-TEXT-0123456789"
    b.append_turn(rec("victim", 0, text=secret_text * 50))
    b.append_turn(rec("keep", 0, text="other"))
    assert _grep(d, secret_text.encode())
    assert b.purge_session("victim") == 1
    assert not _grep(d, secret_text.encode())
    assert not _grep(d, b"victim")
    assert len(b.session_turns("keep")) == 1 and b.verify() == []
    b.close()


def _grep(d: Path, needle: bytes) -> bool:
    """Read the files in another process: opening and closing a descriptor of the database in
    this one would drop the locks of the connection this test holds."""
    code = ("import pathlib, sys; n = sys.argv[2].encode();"
            " sys.exit(0 if any(n in p.read_bytes() for p in pathlib.Path(sys.argv[1]).rglob('*') if p.is_file()) else 1)")
    return subprocess.run([sys.executable, "-c", code, str(d), needle.decode()], timeout=60).returncode == 0


def test_history_is_stored_once(tmp_path: Path) -> None:
    """Turns that re-send a session's history share its chunks; deleting releases them."""
    b = TrajectoryBuffer.open(tmp_path / "b")
    history = [{"role": "system", "content": "S" * 50_000}]
    prompt = list(range(5000))
    for i in range(20):
        history = history + [{"role": "user", "content": f"turn {i}"}]
        r = rec("s", i)
        r.messages, r.prompt_ids = list(history), prompt + list(range(i * 10))
        b.append_turn(r)
    assert b.stats()["used_bytes"] < 400_000  # stored in full: 20 x (50 KB + 20 KB) = 1.4 MB
    got = b.session_turns("s")
    assert got[-1].messages == history and got[-1].prompt_ids == prompt + list(range(190))
    assert got[3].messages == history[:5] and len(got[3].prompt_ids) == 5030
    assert b.verify() == []
    assert b.purge_session("s") == 20
    assert b._conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0
    b.close()


def test_finalize_idle(buf: TrajectoryBuffer) -> None:
    buf.append_turn(rec("idle", 0))
    assert buf.finalize_idle_sessions(3600) == []
    assert buf.finalize_idle_sessions(0) == ["idle"]
    assert buf.session_turns("idle")[0].state == READY


def test_batch_partial_errors(buf: TrajectoryBuffer) -> None:
    bad = rec("s", 1)
    bad.response_logprobs = [-1.0]
    res = buf.write_batch(Batch(appends=[rec("s", 0), bad, rec("s", 2)]))
    assert res.turn_ids[0] is not None and res.turn_ids[1] is None and res.turn_ids[2] is not None
    assert isinstance(res.errors[1], RecordError)


# ---------------------------------------------------------------- several processes at once
def _producer(d: str, pid: int, n: int) -> None:
    b = TrajectoryBuffer.open(d)
    for i in range(n):
        b.append_turn(rec(f"p{pid}", i, next_state={"role": "user", "content": "n"}))
    b.close()


def _judge(d: str, wid: str, total: int, out) -> None:
    b = TrajectoryBuffer.open(d)
    mine: list[int] = []
    deadline = time.time() + 60
    while time.time() < deadline:
        got = b.claim_for_judging(wid, limit=4, lease_seconds=120)
        for r in got:
            assert b.write_judgement(r.turn_id, {"score": 1.0, "by": wid}, worker_id=wid)
            mine.append(r.turn_id)
        if not got and b.stats()["by_state"][JUDGED] >= total:
            break
    out.put((wid, mine))
    b.close()


def test_multi_process_append_and_claim(tmp_path: Path) -> None:
    d = str(tmp_path / "mp")
    TrajectoryBuffer.open(d).close()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    n_prod, per = 3, 40
    procs = [ctx.Process(target=_producer, args=(d, i, per)) for i in range(n_prod)]
    procs += [ctx.Process(target=_judge, args=(d, f"j{i}", n_prod * per, out)) for i in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in range(2)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    judged = [t for _, ids in results for t in ids]
    assert len(judged) == len(set(judged)) == n_prod * per  # each turn judged exactly once
    b = TrajectoryBuffer.open(d)
    st = b.stats()
    assert st["turns"] == n_prod * per and st["by_state"][JUDGED] == n_prod * per
    for i in range(n_prod):
        assert [r.turn_index for r in b.session_turns(f"p{i}")] == list(range(per))
    for r in b.fetch_judged("t", limit=1000):
        assert r.judgement["by"] in ("j0", "j1")
    assert b.verify() == []
    b.close()
    assert os.listdir(d)
