"""openclaw-rl's rollout: binary RL from live conversations.

    --data-source-path      openclaw.bridge.BufferDataSource
    --rollout-function-path openclaw-rl/openclaw_buffer_rollout.py:generate_rollout
    --extra-args-provider-path openclaw-rl/openclaw_rl_args.py

A rollout drains `rollout_batch_size * n_samples_per_prompt` judged main turns whose judge score
is non-zero from the trajectory buffer (`openclaw.bridge.drain`: wait, turn -> Sample with the
recorded ids and log-probs, consumer position committed with the checkpoint) and trains on them
with reward = the judge's score (+1 / -1; `--openclaw-rl-score graded`: its graded score in
[-1, 1]), or `--custom-rm-path` when given. The baseline: slime's (consecutive turns form GRPO
groups of `--n-samples-per-prompt`: the batch mean), or with `--openclaw-rl-baseline running` a
mean of past steps' rewards carried across steps, subtracted here (`openclaw.bridge.reward`).
"""

from __future__ import annotations

from typing import Any

from slime.rollout.base_types import RolloutFnTrainOutput

# The data source lives in the library; the name stays importable from here for old flag values
# (`--data-source-path openclaw-rl/openclaw_buffer_rollout.py:BufferDataSource`).
from openclaw.bridge import BufferDataSource, as_groups, drain
from openclaw.bridge.reward import apply_running_baseline

__all__ = ["BufferDataSource", "generate_rollout"]


def generate_rollout(args: Any, rollout_id: int, data_source: Any, evaluation: bool = False) -> RolloutFnTrainOutput:
    """slime's rollout contract; binary RL (reward = judge score, or --custom-rm-path)."""
    if evaluation:
        raise ValueError("a live buffer has no eval set: evaluate checkpoints with openclaw-test/run_eval.sh")
    samples, metrics = drain(args, data_source, "rl")
    if data_source.signal.baseline == "running":
        metrics.update(apply_running_baseline(samples, data_source.reward_baseline))
    return RolloutFnTrainOutput(samples=as_groups(args, samples), metrics=metrics)
