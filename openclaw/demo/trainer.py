"""The trainer of the demo: slime's training loop, in-process, in a background thread.

The loop is the trainer's own (`slime.ray.loop.sync_step`: `collect_rollout` -> `train_on` ->
`finish_step`, the step `slime/train.py` runs), brought up by `setup(where="local")` without Ray so
the demo fits in one process on two cores: one FSDP rank, the rollout manager over the serving
engine (`--rollout-backend external`), the method folders' plugins from the same flags as the
launch scripts; weights reach the engine through its `/update_weights_from_disk` (pause, load,
flush, continue), as in production. This module only adds what the demo needs around it: a
thread, a pause between steps (to evaluate), and a record of each step.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("openclaw.demo")


@dataclass
class StepRecord:
    step: int
    samples: int
    weight_version: int
    seconds: float
    metrics: dict[str, float]
    ended_at: float  # wall time (time.time) after the step's weight push: its version is served from then on
    samples_data: list[Any] = field(default_factory=list, repr=False)  # the Samples trained on


@dataclass
class TrainerState:
    steps: list[StepRecord] = field(default_factory=list)
    trained_samples: int = 0
    skipped: int = 0
    error: BaseException | None = None


class BackgroundTrainer:
    """`start()` the loop; `pause()` (a context manager) holds it between steps, e.g. to evaluate."""

    def __init__(self, argv: list[str]) -> None:
        from slime.ray.setup import setup
        from slime.utils.arguments import parse_config

        self.run = setup(parse_config(argv), where="local", echo_steps=False)  # the demo prints its own progress
        # Kept past stop(): the demo evaluates the trained model after the loop has shut down.
        self._actor = self.run.train.actor
        self._data_source = self.run.rollout.m.data_source
        self.state = TrainerState()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="openclaw-demo-trainer", daemon=True)

    @property
    def args(self) -> Any:
        return self.run.args

    @property
    def actor(self) -> Any:
        return self._actor

    @property
    def model(self) -> Any:
        return self.actor.model

    @property
    def data_source(self) -> Any:
        return self._data_source

    @property
    def weight_version(self) -> int:
        return self.run.weights.version

    def start(self) -> BackgroundTrainer:
        self._thread.start()
        return self

    def pause(self) -> threading.Lock:
        """`with trainer.pause(): ...` runs between two steps (never during one)."""
        return self._lock

    def step_once(self) -> StepRecord | None:
        """One step of the trainer's loop. None: no judged turns to train on yet (the rollout's
        --buffer-wait-timeout expired)."""
        from slime.ray.loop import sync_step

        run, rollout_id = self.run, self.run.start_rollout_id + len(self.state.steps)
        step = sync_step(run, rollout_id, hold=self._lock, may_be_empty=True)
        metrics, samples = step.metrics, step.samples
        self.state.skipped += int(sum(v for k, v in metrics.items() if k.startswith("rollout/buffer_skipped/")))
        if not step.trained:
            return None
        rec = StepRecord(step=len(self.state.steps), samples=len(samples), weight_version=run.weights.version,
                         seconds=float(metrics.get("time/train", 0.0)) + float(metrics.get("time/weight_sync", 0.0)),
                         metrics={k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))},
                         ended_at=time.time(), samples_data=samples)
        self.state.steps.append(rec)
        self.state.trained_samples += len(samples)
        return rec

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self.step_once()
        except BaseException as exc:  # noqa: BLE001 - surfaced to the main thread via state.error
            log.exception("trainer failed")
            self.state.error = exc

    def stop(self, timeout: float = 600.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if not self._thread.is_alive():
            self.run.shutdown()


class RoundRobinTrainers:
    """Several users' trainers (one `BackgroundTrainer` each, `--buffer-user U --lora-adapter-name U`)
    stepped in turn by `workers` threads. A worker takes the next user in round-robin order whose
    trainer is idle and `ready(user)` (a batch of their judged turns is waiting), so a user who
    stops talking costs nothing and the others get the time, and no user's trainer is ever stepped
    by two workers at once. With torch at one thread per thread of work, a second worker trains a
    second user on the core the first one leaves idle (the users wait for their trainers, so the
    serving engine is mostly idle while they train)."""

    def __init__(self, trainers: dict[str, BackgroundTrainer], ready: Callable[[str], bool],
                 idle_wait_s: float = 0.5, workers: int = 1) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.trainers = trainers
        self._ready = ready
        self._idle_wait_s = idle_wait_s
        self._stop = threading.Event()
        self._turn = deque(trainers)  # least recently stepped first
        self._busy: set[str] = set()
        self._lock = threading.Lock()
        self.error: BaseException | None = None
        self._threads = [threading.Thread(target=self._loop, name=f"openclaw-demo-users-trainer-{i}", daemon=True)
                         for i in range(min(workers, len(trainers)))]

    def start(self) -> RoundRobinTrainers:
        for thread in self._threads:
            thread.start()
        return self

    @contextmanager
    def pause(self) -> Iterator[None]:
        """Hold every user's trainer between two steps (e.g. to evaluate all adapters at one point)."""
        with ExitStack() as stack:
            for trainer in self.trainers.values():
                stack.enter_context(trainer.pause())
            yield

    def _take(self) -> str | None:
        """The user stepped least recently among those with an idle trainer and a batch waiting
        (marked busy, and moved to the back of the turn), or None. A user passed over keeps their
        place, so being busy or quiet for a while never costs a turn."""
        with self._lock:
            for user in self._turn:
                if user not in self._busy and self._ready(user):
                    self._turn.remove(user)
                    self._turn.append(user)
                    self._busy.add(user)
                    return user
        return None

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                user = self._take()
                if user is None:
                    self._stop.wait(self._idle_wait_s)  # nobody has a batch: wait for the users to talk
                    continue
                try:
                    self.trainers[user].step_once()
                finally:
                    with self._lock:
                        self._busy.discard(user)
        except BaseException as exc:  # noqa: BLE001 - surfaced to the main thread via .error
            log.exception("a user's trainer failed")
            if self.error is None:
                self.error = exc
            self._stop.set()

    def stop(self, timeout: float = 600.0) -> None:
        self._stop.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout)
        for trainer in self.trainers.values():
            trainer.stop(timeout)
