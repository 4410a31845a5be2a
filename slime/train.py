"""Synchronous RL training (slime's train.py):

    for rollout_id in range(start, num_rollout):
        rollout -> train -> push weights (every --update-weights-interval) -> save (every --save-interval)

Run locally:            python slime/train.py --hf-checkpoint M --prompt-data P.jsonl ...
Run on a Ray cluster:   ray job submit --address http://HEAD:8265 --working-dir . -- python slime/train.py ...
"""

from __future__ import annotations

import sys

from slime.ray.driver import Run, collect_rollout, finish_step, log_step, setup
from slime.utils.arguments import ConfigError, parse_config
from slime.utils.metrics import StepTimer


def train(run: Run) -> None:
    debug = run.cfg.debug
    for rollout_id in range(run.start_rollout_id, run.num_rollout):
        timer = StepTimer()
        with timer("rollout"):
            run.before_rollout()
            samples, metrics = collect_rollout(run, rollout_id)
        if debug.debug_rollout_only:
            log_step(run, rollout_id, metrics, timer)
            continue
        with timer("train"):
            metrics.update(run.train_on(rollout_id, samples))
        finish_step(run, rollout_id, metrics, timer, sync=not debug.debug_train_only)


def main(argv: list[str] | None = None) -> int:
    try:
        cfg = parse_config(argv, check_files=True)
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
