"""The trainer of the demo: slime's FSDP train actor driven in a background thread.

It is slime's synchronous loop (rollout -> train -> push weights) without Ray, so the demo fits
in one process on two cores: the rollout function, data source and loss are the method folders'
plugins, loaded from the same flags as the launch scripts; weights reach the serving engine
through its `/update_weights_from_disk` (pause, load, flush, continue), as in production.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("openclaw.demo")


@dataclass
class StepRecord:
    step: int
    samples: int
    weight_version: int
    seconds: float
    metrics: dict[str, float]
    samples_data: list[Any] = field(default_factory=list, repr=False)  # the Samples trained on


@dataclass
class TrainerState:
    steps: list[StepRecord] = field(default_factory=list)
    trained_samples: int = 0
    skipped: int = 0
    error: BaseException | None = None


class BackgroundTrainer:
    """`start()` the loop; `pause()` (a context manager) holds it between steps, e.g. to evaluate."""

    def __init__(self, argv: list[str], engine_url: str) -> None:
        from slime.backends.fsdp import ActorConfig, FSDPTrainActor
        from slime.backends.fsdp.train_loop import build_loss_call
        from slime.utils.arguments import parse_config
        from slime.utils.plugins import load_plugin, load_rollout_fn
        from slime.utils.weight_sync import WeightVersions

        self.args = parse_config(argv).to_namespace()
        self.engine_url = engine_url
        self.args.rollout_engine_urls = [engine_url]
        self.actor = FSDPTrainActor(ActorConfig.from_args(self.args), self.args)
        self.loss_call = build_loss_call(self.args)
        self.data_source = load_plugin(self.args.data_source_path, "data_source")(self.args)
        self.rollout_fn = load_rollout_fn(self.args.rollout_function_path, self.args)
        self.sync_root = Path(tempfile.mkdtemp(prefix="openclaw-demo-weights-"))
        self.versions = WeightVersions(root=self.sync_root)
        self.state = TrainerState()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="openclaw-demo-trainer", daemon=True)

    @property
    def model(self) -> Any:
        return self.actor.model

    @property
    def weight_version(self) -> int:
        return self.versions.version

    def start(self) -> BackgroundTrainer:
        self._thread.start()
        return self

    def pause(self) -> threading.Lock:
        """`with trainer.pause(): ...` runs between two steps (never during one)."""
        return self._lock

    def step_once(self) -> StepRecord | None:
        """One rollout (waits for judged turns) -> train -> push weights. None: nothing to train yet."""
        from slime.backends.fsdp.train_loop import train_rollout
        from slime.rollout.base_types import normalize_rollout_output
        from slime.utils.weight_sync import push_to_engines

        try:
            out = normalize_rollout_output(self.rollout_fn(len(self.state.steps), self.data_source))
        except TimeoutError:
            return None
        samples = [s for g in out.samples for s in g]
        self.state.skipped += int(sum(v for k, v in out.metrics.items() if k.startswith("rollout/buffer_skipped/")))
        if not samples:
            return None
        t0 = time.perf_counter()
        with self._lock:
            metrics = train_rollout(self.actor, self.args, samples, self.loss_call)
            folder = self.versions.next_folder()
            self.actor.save_hf(folder)
            push_to_engines([self.engine_url], folder, self.versions.version + 1)
            self.versions.committed(folder)
        metrics.update({k: float(v) for k, v in out.metrics.items() if isinstance(v, (int, float))})
        rec = StepRecord(step=len(self.state.steps), samples=len(samples), weight_version=self.versions.version,
                         seconds=time.perf_counter() - t0, metrics=metrics, samples_data=samples)
        self.state.steps.append(rec)
        self.state.trained_samples += len(samples)
        return rec

    def _run(self) -> None:
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
        shutil.rmtree(self.sync_root, ignore_errors=True)
        close = getattr(self.data_source, "close", None)
        if close is not None and not self._thread.is_alive():
            close()
