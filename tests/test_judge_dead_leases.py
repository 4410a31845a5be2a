"""Leases held by a judge worker whose process died (the server was killed) are given back when a
judge service starts, instead of blocking those turns until the lease runs out (15 min default)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from openclaw.buffer import READY, TrajectoryBuffer, TurnRecord
from openclaw.judge.worker import release_dead_workers_claims


def _ready_turn(buf: TrajectoryBuffer, sid: str) -> int:
    return buf.append_turn(TurnRecord(
        session_id=sid, turn_index=None, turn_type="main", messages=[{"role": "user", "content": "q"}],
        prompt_ids=[1, 2], response_ids=[3], response_logprobs=[-0.1], response_text="a", content="a",
        model="m", weight_version=0, trainable=True, next_state={"role": "user", "content": "ok"}))


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: the pid names no process now
    return child.pid


def test_leases_of_dead_workers_are_released_live_ones_kept(tmp_path: Path) -> None:
    with TrajectoryBuffer.open(tmp_path) as buf:
        dead_turn, live_turn, foreign_turn = (_ready_turn(buf, s) for s in ("dead", "live", "foreign"))
        [r] = buf.claim_for_judging(f"judge-{_dead_pid()}-abc123-0", limit=1, lease_seconds=3600)
        assert r.turn_id == dead_turn
        buf.claim_for_judging(f"judge-{os.getppid()}-abc123-0", limit=1, lease_seconds=3600)  # alive
        buf.claim_for_judging("someone-elses-worker", limit=1, lease_seconds=3600)  # not ours to judge

        assert release_dead_workers_claims(buf) == 1
        again = buf.claim_for_judging("judge-restarted", limit=10, lease_seconds=60)
        assert [t.turn_id for t in again] == [dead_turn]
        assert buf.get_turn(live_turn).state == READY and buf.get_turn(foreign_turn).state == READY
