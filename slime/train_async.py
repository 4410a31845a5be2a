"""Asynchronous (one-step off-policy) RL training: rollout k+1 is generated while the trainer
trains on rollout k; weights are pushed to the engines as soon as a step finishes (the engines
pause, swap and continue mid-rollout). `--max-staleness N` drops (or, with
`--staleness-policy downweight`, down-weights) samples more than N weight versions old; the
counts are logged as staleness/dropped, staleness/mean, staleness/max.

    python slime/train_async.py --hf-checkpoint M --prompt-data P.jsonl --max-staleness 1 ...
"""

from __future__ import annotations

import sys

from slime.ray.driver import Run, collect_rollout, finish_step, setup
from slime.rollout.staleness import apply_staleness
from slime.utils.arguments import ConfigError, parse_config
from slime.utils.metrics import StepTimer, staleness_metrics


def train_async(run: Run) -> None:
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


# The second public page's form (`train_async.py --rollout-dir --checkpoint-dir --method --gpus`) is
# the OpenClaw method launcher's: slime never imports openclaw, so it is refused here with the way to it.
PAGE_FLAGS = ("--rollout-dir", "--checkpoint-dir", "--method", "--gpus")


def _page_form(argv: list[str]) -> str | None:
    used = [f for f in PAGE_FLAGS if any(a == f or a.startswith(f + "=") for a in argv)]
    if not used:
        return None
    return (f"{' '.join(used)}: the second public page's train_async.py is openclaw-combine/train_async.py "
            "(python openclaw-combine/train_async.py --rollout-dir ./rollouts --checkpoint-dir ./checkpoints "
            "--method combine --gpus 2,3): it trains a method (binary/opd/combine) on a server's recorded rollouts. "
            "slime/train_async.py is the generic trainer: --rl-buffer-dir with the method's data source, --save DIR, "
            "--actor-num-gpus-per-node N")


def main(argv: list[str] | None = None) -> int:
    page = _page_form(list(sys.argv[1:] if argv is None else argv))
    if page:
        print(f"error: {page}", file=sys.stderr)
        return 2
    try:
        cfg = parse_config(argv, check_files=True)
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
