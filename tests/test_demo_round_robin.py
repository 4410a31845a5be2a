"""The several-users scheduler (`openclaw.demo.trainer.RoundRobinTrainers`) on its own: workers step
different users at the same time, never one user's trainer twice at once, never a user without a
batch, and take the users in turn. The trainers here are stand-ins that record how they are
stepped (the real trainers are stepped by tests/test_demo_users.py)."""

from __future__ import annotations

import threading
from collections import Counter
from contextlib import nullcontext

from openclaw.demo.trainer import RoundRobinTrainers


class Recorder:
    """A trainer stand-in: counts its steps and notices a second step entering while one runs."""

    def __init__(self, log: Counter, overlaps: list[str], done: threading.Event, total: int,
                 meet: threading.Barrier | None = None) -> None:
        self.name = ""
        self._log, self._overlaps, self._done, self._total, self._meet = log, overlaps, done, total, meet
        self._running = threading.Lock()
        self._count_lock = threading.Lock()

    def step_once(self) -> object:
        if not self._running.acquire(blocking=False):
            self._overlaps.append(self.name)
            return None
        try:
            if self._meet is not None:
                self._meet.wait(timeout=60)  # passes only when another user's step runs at the same time
            with self._count_lock:
                self._log[self.name] += 1
            if sum(self._log.values()) >= self._total:
                self._done.set()
            return object()
        finally:
            self._running.release()

    def pause(self) -> nullcontext:
        return nullcontext()

    def stop(self, timeout: float = 0.0) -> None:
        pass


def _trainers(names: list[str], total: int, meet: threading.Barrier | None = None):
    log: Counter = Counter()
    overlaps: list[str] = []
    done = threading.Event()
    trainers = {}
    for name in names:
        t = Recorder(log, overlaps, done, total, meet)
        t.name = name
        trainers[name] = t
    return trainers, log, overlaps, done


def test_two_workers_train_two_users_at_once_and_never_one_user_twice() -> None:
    meet = threading.Barrier(2)
    trainers, log, overlaps, done = _trainers(["a", "b"], total=40, meet=meet)
    rr = RoundRobinTrainers(trainers, ready=lambda user: True, idle_wait_s=0.01, workers=2).start()
    try:
        assert done.wait(timeout=120), f"only {dict(log)} steps: two users' steps never ran at once"
    finally:
        meet.abort()  # a worker still waiting at the barrier (its partner stopped) lets go
        rr.stop()
    assert rr.error is None or isinstance(rr.error, threading.BrokenBarrierError)
    assert overlaps == [] and min(log["a"], log["b"]) >= 19


def test_users_are_taken_in_turn_and_a_user_without_a_batch_is_skipped() -> None:
    """One worker, so the order is observable: a, b, c in turn; "quiet" never has a batch and is
    never stepped; b has no batch for its first rounds, and once it has, it goes first (the user
    stepped least recently), not to the back of the line."""
    trainers, log, overlaps, done = _trainers(["a", "b", "c", "quiet"], total=30)
    order: list[str] = []
    for name, t in trainers.items():
        step = t.step_once
        t.step_once = lambda step=step, name=name: (order.append(name), step())[1]
    rr = RoundRobinTrainers(trainers, ready=lambda user: user != "quiet" and (user != "b" or len(order) >= 6),
                            idle_wait_s=0.01, workers=1).start()
    try:
        assert done.wait(timeout=120)
    finally:
        rr.stop()
    assert rr.error is None and overlaps == [] and log["quiet"] == 0
    assert order[:6] == ["a", "c"] * 3 and order[6:30] == ["b", "a", "c"] * 8, order[:30]
