"""Dynamic-sampling filters (DAPO): which generated groups a step trains on.

    --dynamic-sampling-filter-path slime.rollout.filters:check_reward_nonzero_std
    --over-sampling-batch-size N    # groups generated per round (>= --rollout-batch-size)

A group whose samples all earned the same reward has zero GRPO advantage: it costs a forward and
backward pass and teaches nothing. With this filter the rollout keeps generating rounds until it
has `--rollout-batch-size` groups with a reward spread (at most 50 rounds, then it stops with an
error naming the counts), and reports the dropped groups as `rollout/filtered/<reason>`.
"""

from __future__ import annotations

from typing import Any

from slime.rollout.base_types import DynamicFilterOutput
from slime.utils.plugins import extract_reward


def check_reward_nonzero_std(args: Any, group: list[Any]) -> DynamicFilterOutput:
    rewards = [float(extract_reward(s.reward, getattr(args, "reward_key", None))) for s in group]
    if len(rewards) > 1 and max(rewards) > min(rewards):
        return DynamicFilterOutput(keep=True)
    return DynamicFilterOutput(keep=False, reason=f"reward_all_{rewards[0]:g}" if rewards else "empty_group")
