"""Asynchronous (one-step off-policy) RL training: rollout k+1 is generated while the trainer
trains on rollout k; weights are pushed to the engines as soon as a step finishes (the engines
pause, swap and continue mid-rollout). `--max-staleness N` drops (or, with
`--staleness-policy downweight`, down-weights) samples more than N weight versions old; the
counts are logged as staleness/dropped, staleness/mean, staleness/max.

    python slime/train_async.py --hf-checkpoint M --prompt-data P.jsonl --max-staleness 1 ...
"""

from __future__ import annotations

import sys

import ray
from slime.ray.driver import Run, rollout_summary, setup
from slime.rollout.staleness import apply_staleness
from slime.utils.arguments import ConfigError, parse_config
from slime.utils.metrics import StepTimer, staleness_metrics


def train_async(run: Run) -> None:
    cfg, args = run.cfg, run.args
    if cfg.cluster.colocate:
        raise ValueError("train_async overlaps rollout and training: it cannot run with --colocate")
    start, end = run.start_rollout_id, run.num_rollout
    pending = run.generate(start) if start < end else None
    for rollout_id in range(start, end):
        timer = StepTimer()
        with timer("wait_rollout"):
            samples, rollout_metrics, state = ray.get(pending)
        pending = run.generate(rollout_id + 1) if rollout_id + 1 < end else None  # overlaps training
        run.data_states[rollout_id] = state
        metrics = dict(rollout_metrics)
        metrics.update(rollout_summary(samples, args))
        kept = apply_staleness(samples, run.weights.version, cfg.rollout.max_staleness, cfg.rollout.staleness_policy,
                               int(cfg.data.n_samples_per_prompt))
        metrics.update(staleness_metrics([run.weights.version - lag for lag in kept.lags], run.weights.version,
                                         dropped=kept.dropped))
        if kept.samples:
            with timer("train"):
                metrics.update(run.train_on(rollout_id, kept.samples, kept.weights))
        if run.weights.due(rollout_id):
            with timer("weight_sync"):
                run.sync_weights()
        metrics["weights/version"] = run.weights.version
        if run.should_save(rollout_id):
            with timer("save"):
                run.save(rollout_id)
        metrics.update(timer.metrics(tokens=int(metrics.get("rollout/response_tokens", 0))))
        run.logger.log(rollout_id, metrics)


def main(argv: list[str] | None = None) -> int:
    try:
        cfg = parse_config(argv)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if cfg.debug.debug_rollout_only or cfg.debug.debug_train_only:
        print("error: debug modes are synchronous; use slime/train.py", file=sys.stderr)
        return 2
    run = setup(cfg)
    try:
        train_async(run)
    finally:
        run.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
