"""Filters of generated groups: which ones a step trains on.

Dynamic sampling (DAPO), a group filter that makes the rollout generate more:

    --dynamic-sampling-filter-path slime.rollout.filters:check_reward_nonzero_std
    --over-sampling-batch-size N    # groups generated per round (>= --rollout-batch-size)

A group whose samples all earned the same reward has zero GRPO advantage: it costs a forward and
backward pass and teaches nothing. With this filter the rollout keeps generating rounds until it
has `--rollout-batch-size` groups with a reward spread (at most 50 rounds, then it stops with an
error naming the counts), and reports the dropped groups as `rollout/filtered/<reason>`.

The same test as a sample filter, which generates nothing more:

    --rollout-sample-filter-path slime.rollout.filters:remove_zero_std_groups

marks such groups' samples `remove_sample`: the step keeps its size and its other groups' update
is unchanged, and (on one rank) the removed rows are not run at all. What they lose is their
share of the KL and entropy terms, which carry no reward signal.
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


def remove_zero_std_groups(args: Any, groups: list[list[Any]]) -> None:
    """Rollout sample filter: remove (from the loss) every sample of a group whose rewards are all
    equal. Groups of one sample are left alone: their signal, if any, is not a group's spread."""
    for group in groups:
        if len(group) > 1 and not check_reward_nonzero_std(args, group).keep:
            for sample in group:
                sample.remove_sample = True
