"""Judge workers: threads that lease ready turns from the trajectory buffer, judge them and
write the results back. Used by `python -m openclaw.judge` and by the server (`--judge-workers`).

Never blocking: workers are daemon threads; every backend call is bounded (timeouts, retries);
a failure is recorded on the turn (`record_judge_failure`, retried up to the buffer's max
attempts) and the worker moves on. A crashed worker's leases expire and other workers take over.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openclaw.judge.collapse import CollapseMonitor
from openclaw.judge.config import JudgeConfig
from openclaw.judge.schema import Judge, JudgeFailure, JudgeResult
from openclaw.judge.turns import judgement_payload, no_next_state_result, to_input
from openclaw.proctree import pid_exists

log = logging.getLogger("openclaw.judge")


@dataclass
class JudgeStats:
    judged: int = 0
    failed: int = 0
    lost_lease: int = 0
    invalid_votes: int = 0  # judge completions without a parseable verdict (each one warned about)
    busy_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, judged: int = 0, failed: int = 0, lost: int = 0, busy: float = 0.0, invalid: int = 0) -> int:
        """Returns the running count of invalid votes."""
        with self._lock:
            self.judged += judged
            self.failed += failed
            self.lost_lease += lost
            self.busy_s += busy
            self.invalid_votes += invalid
            return self.invalid_votes

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return {"judged": self.judged, "failed": self.failed, "lost_lease": self.lost_lease,
                    "invalid_votes": self.invalid_votes, "busy_s": round(self.busy_s, 3)}


def judge_once(buf: Any, judge: Judge, config: JudgeConfig, worker_id: str, stats: JudgeStats,
               monitor: CollapseMonitor | None = None) -> int:
    """Claim one batch, judge it, write results/failures. Returns how many turns were claimed."""
    recs = buf.claim_for_judging(worker_id, limit=config.batch_size, lease_seconds=config.effective_lease_seconds)
    if not recs:
        return 0
    t0 = time.perf_counter()
    inputs = [to_input(r) for r in recs]
    todo = [(r, i) for r, i in zip(recs, inputs, strict=True) if i is not None]
    outcomes: dict[int, JudgeResult | JudgeFailure] = {r.turn_id: no_next_state_result() for r, i in zip(recs, inputs, strict=True) if i is None}
    if todo:
        try:
            results = judge.judge_batch([i for _, i in todo])
            if len(results) != len(todo):
                raise RuntimeError(f"backend returned {len(results)} results for {len(todo)} turns")
        except Exception as e:  # noqa: BLE001 - a backend bug must not kill the worker
            log.exception("judge backend %s failed on a batch", judge.name)
            results = [JudgeFailure(f"{type(e).__name__}: {e}"[:1000])] * len(todo)
        outcomes.update({r.turn_id: res for (r, _), res in zip(todo, results, strict=True)})
    judged = failed = lost = 0
    for rec in recs:
        out = outcomes[rec.turn_id]
        invalid = out.invalid_votes if isinstance(out, JudgeFailure) else sum(v is None for v in out.votes)
        if invalid:
            total = stats.add(invalid=invalid)
            log.warning("turn %s: %d judge completion(s) had no parseable verdict%s (%d unparseable so far)",
                        rec.turn_id, invalid, "" if isinstance(out, JudgeFailure) else "; scored from the other votes",
                        total)
        if isinstance(out, JudgeFailure):
            state = buf.record_judge_failure(rec.turn_id, out.error)
            log.warning("turn %s: judge failure (%s), now %s", rec.turn_id, out.error[:200], state)
            failed += 1
            continue
        if buf.write_judgement(rec.turn_id, judgement_payload(out, worker_id), worker_id=worker_id):
            judged += 1
            if monitor is not None and out.backend != "none":
                monitor.observe(out.reward, out.all_invalid)
        else:
            lost += 1  # lease expired and another worker took the turn: its result wins
    stats.add(judged, failed, lost, time.perf_counter() - t0)
    return len(recs)


def _worker_pid(worker_id: str) -> int | None:
    """Our worker ids are `judge-<pid>-<tag>-<k>` (see JudgeService); others are not ours to judge."""
    parts = worker_id.split("-")
    if len(parts) >= 4 and parts[0] == "judge" and parts[1].isdigit():
        return int(parts[1])
    return None


def release_dead_workers_claims(buffer: Any) -> int:
    """Give back the leases of judge workers whose process no longer exists on this host, so turns
    leased by a killed server are judged at restart instead of after the lease runs out. The buffer
    is a local SQLite file, so every worker that can hold a lease runs on this host."""
    released = 0
    for owner in buffer.lease_owners():
        pid = _worker_pid(owner)
        if pid is not None and pid != os.getpid() and not pid_exists(pid):
            released += buffer.release_claims(owner)
    return released


class JudgeService:
    """N worker threads sharing one backend and one buffer handle. `stop()` is idempotent."""

    def __init__(self, config: JudgeConfig, buffer_dir: str | Path, judge: Judge | None = None,
                 buffer: Any = None) -> None:
        from openclaw.buffer import TrajectoryBuffer

        self.config = config
        self._own_buffer = buffer is None
        self.buffer = buffer if buffer is not None else TrajectoryBuffer.open(buffer_dir, create=False)
        self._own_judge = judge is None
        try:
            self.judge = judge if judge is not None else _make(config)
        except BaseException:
            if self._own_buffer:
                self.buffer.close()
            raise
        self.stats = JudgeStats()
        self.monitor = CollapseMonitor(config.collapse_window, config.collapse_threshold)
        self._stop = threading.Event()
        tag = f"{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.worker_ids = [f"judge-{tag}-{k}" for k in range(config.num_workers)]
        self._threads = [threading.Thread(target=self._run, args=(wid,), name=wid, daemon=True) for wid in self.worker_ids]
        self._stopped = False

    def start(self) -> JudgeService:
        released = release_dead_workers_claims(self.buffer)
        if released:
            log.warning("judge service: released the leases of %d turn(s) held by judge workers whose "
                        "process is gone (a crash or kill -9); they are judged again now", released)
        for t in self._threads:
            t.start()
        log.info("judge service: %d worker(s), backend %s", len(self._threads), self.judge.name)
        return self

    def _run(self, worker_id: str) -> None:
        backoff = self.config.poll_interval_s
        while not self._stop.is_set():
            try:
                n = judge_once(self.buffer, self.judge, self.config, worker_id, self.stats, self.monitor)
                backoff = self.config.poll_interval_s
            except Exception:  # noqa: BLE001 - e.g. the database is locked: log, back off, go on
                log.exception("judge worker %s: error, backing off", worker_id)
                n = 0
                backoff = min(backoff * 2, 30.0)
            if n == 0:
                self._stop.wait(backoff)

    @property
    def alive(self) -> int:
        return sum(t.is_alive() for t in self._threads)

    def stop(self, timeout: float = 30.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        stuck = [t.name for t in self._threads if t.is_alive()]
        if stuck:  # a call still inside its timeout: its lease expires, another worker retries
            log.warning("judge workers still finishing a call at stop: %s", stuck)
        if self._own_judge:
            self.judge.close()
        for wid in self.worker_ids:
            if not any(t.name == wid for t in self._threads if t.is_alive()):
                try:
                    self.buffer.release_claims(wid)
                except Exception:  # noqa: BLE001 - best effort; leases expire anyway
                    log.exception("release_claims(%s) failed", wid)
        if self._own_buffer and not stuck:
            self.buffer.close()

    def __enter__(self) -> JudgeService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _make(config: JudgeConfig) -> Judge:
    from openclaw.judge.backends import make_judge

    return make_judge(config)


def start_judge_service(config: JudgeConfig, buffer_dir: str | Path) -> JudgeService:
    """Start judge workers on `buffer_dir` in this process; returns a handle with `.stop()`."""
    return JudgeService(config, buffer_dir).start()
