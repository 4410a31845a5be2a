"""The one training loop, over a run brought up any way (`slime.ray.setup.setup`: Ray, local, torchrun).

    mode="sync"   per rollout: rollout -> train -> push weights, save, evaluate, log (when due):
                  slime/train.py, slime/train_grpo.py; a job that drives the loop itself calls
                  `sync_step` once per step
    mode="async"  rollout k+1 is generated while the trainer trains on rollout k (slime/train_async.py);
                  weights are pushed as soon as a step finishes, and samples more than --max-staleness
                  weight versions old are dropped (or down-weighted with --staleness-policy downweight),
                  counted as staleness/dropped, staleness/mean, staleness/max

`train_main` is the training scripts' command line: parse, set up on Ray, run the loop, shut down.
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Literal

from slime.ray.driver import Run, collect_rollout, finish_step, log_step
from slime.ray.setup import setup
from slime.rollout.staleness import apply_staleness
from slime.utils.arguments import ConfigError, parse_config
from slime.utils.metrics import StepTimer, staleness_metrics
from slime.utils.types import Sample

Mode = Literal["sync", "async"]
MODES: tuple[Mode, ...] = ("sync", "async")


@dataclass
class StepResult:
    rollout_id: int
    samples: list[Sample]
    metrics: dict[str, Any]
    trained: bool  # False: nothing went into the weights (--debug-rollout-only, or an empty rollout)


def sync_step(run: Run, rollout_id: int, *, hold: AbstractContextManager[Any] | None = None,
              may_be_empty: bool = False) -> StepResult:
    """One synchronous step: rollout, train, then the step's tail (`finish_step`).

    hold: held around training and the tail (a lock), so that a caller can act between two steps.
    may_be_empty: for a data source fed live, which can come back empty or give up waiting
    (TimeoutError): such a step trains nothing and logs nothing, instead of failing.
    """
    debug = run.cfg.debug
    timer = StepTimer()
    try:
        with timer("rollout"):
            run.before_rollout()
            samples, metrics = collect_rollout(run, rollout_id)
    except TimeoutError:
        if not may_be_empty:
            raise
        return StepResult(rollout_id, [], {}, trained=False)
    if debug.debug_rollout_only:
        log_step(run, rollout_id, metrics, timer)
        return StepResult(rollout_id, samples, metrics, trained=False)
    if may_be_empty and not samples:
        return StepResult(rollout_id, samples, metrics, trained=False)
    with hold if hold is not None else nullcontext():
        with timer("train"):
            metrics.update(run.train_on(rollout_id, samples))
        finish_step(run, rollout_id, metrics, timer, sync=not debug.debug_train_only)
    return StepResult(rollout_id, samples, metrics, trained=True)


def run_loop(run: Run, *, mode: Mode = "sync") -> None:
    """Every remaining rollout of the run, from `run.start_rollout_id` to `run.num_rollout`."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: one of {', '.join(MODES)}")
    if mode == "async":
        _async_loop(run)
        return
    for rollout_id in range(run.start_rollout_id, run.num_rollout):
        sync_step(run, rollout_id)


def _async_loop(run: Run) -> None:
    cfg = run.cfg
    if cfg.cluster.colocate:
        raise ValueError("train_async overlaps rollout and training: it cannot run with --colocate")
    start, end = run.start_rollout_id, run.num_rollout
    pending = run.generate(start) if start < end else None
    for rollout_id in range(start, end):
        timer = StepTimer()
        with timer("wait_rollout"):
            samples, metrics = collect_rollout(run, rollout_id, pending)
        pending = run.generate(rollout_id + 1) if rollout_id + 1 < end else None  # overlaps training
        kept = apply_staleness(samples, run.weights.version, cfg.rollout.max_staleness, cfg.rollout.staleness_policy,
                               int(cfg.data.n_samples_per_prompt))
        metrics.update(staleness_metrics([run.weights.version - lag for lag in kept.lags], run.weights.version,
                                         dropped=kept.dropped))
        if kept.samples:
            with timer("train"):
                metrics.update(run.train_on(rollout_id, kept.samples, kept.weights))
        finish_step(run, rollout_id, metrics, timer)


def train_main(argv: list[str] | None = None, *, mode: Mode = "sync") -> int:
    """A training script's command line on Ray: 2 with the reason on stderr when it is refused."""
    try:
        cfg = parse_config(argv, check_files=True)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if mode == "async" and (cfg.debug.debug_rollout_only or cfg.debug.debug_train_only):
        print("error: debug modes are synchronous; use slime/train.py", file=sys.stderr)
        return 2
    run = setup(cfg)
    try:
        run_loop(run, mode=mode)
    finally:
        run.shutdown()
    return 0
