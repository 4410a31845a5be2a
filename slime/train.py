"""Synchronous RL training (slime's train.py):

    for rollout_id in range(start, num_rollout):
        rollout -> train -> push weights (every --update-weights-interval) -> save (every --save-interval)

Run locally:            python slime/train.py --hf-checkpoint M --prompt-data P.jsonl ...
Run on a Ray cluster:   ray job submit --address http://HEAD:8265 --working-dir . -- python slime/train.py ...
"""

from __future__ import annotations

import sys

import ray
from slime.ray.driver import Run, rollout_summary, setup
from slime.utils.arguments import ConfigError, parse_config
from slime.utils.metrics import StepTimer


def train(run: Run) -> None:
    cfg, args = run.cfg, run.args
    for rollout_id in range(run.start_rollout_id, run.num_rollout):
        timer = StepTimer()
        metrics: dict = {}
        with timer("rollout"):
            run.before_rollout()
            samples, rollout_metrics, state = ray.get(run.generate(rollout_id))
        run.data_states[rollout_id] = state
        metrics.update(rollout_metrics)
        metrics.update(rollout_summary(samples, args))
        if not cfg.debug.debug_rollout_only:
            with timer("train"):
                metrics.update(run.train_on(rollout_id, samples))
            if not cfg.debug.debug_train_only and run.weights.due(rollout_id):
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
    run = setup(cfg)
    try:
        train(run)
    finally:
        run.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
