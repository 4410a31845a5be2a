"""DAPO's dynamic sampling: the filter keeps only groups whose rewards differ, loaded the way the
rollout loads it (--dynamic-sampling-filter-path, bound to args by the plugin adapter)."""

from __future__ import annotations

import argparse

from slime.rollout.filters import check_reward_nonzero_std
from slime.rollout.sglang_rollout import _keep
from slime.utils.plugins import load_plugin
from slime.utils.types import Sample


def group(*rewards: float) -> list[Sample]:
    return [Sample(index=i, prompt="p", reward=r) for i, r in enumerate(rewards)]


def test_groups_with_a_reward_spread_are_kept_and_flat_ones_dropped_with_a_reason():
    args = argparse.Namespace(reward_key=None)
    assert check_reward_nonzero_std(args, group(0.0, 1.0, 0.0)).keep
    flat = check_reward_nonzero_std(args, group(1.0, 1.0, 1.0))
    assert not flat.keep and flat.reason == "reward_all_1"
    assert not check_reward_nonzero_std(args, group(0.0)).keep  # one sample has no spread


def test_dict_rewards_use_the_reward_key():
    args = argparse.Namespace(reward_key="acc")
    kept = check_reward_nonzero_std(args, [Sample(index=0, reward={"acc": 0.0}), Sample(index=1, reward={"acc": 1.0})])
    assert kept.keep


def test_the_rollout_loop_keeps_and_drops_groups_through_the_loaded_filter():
    from slime.rollout.plugins_io import load_optional

    args = argparse.Namespace(reward_key=None,
                              dynamic_sampling_filter_path="slime.rollout.filters:check_reward_nonzero_std")
    assert load_plugin(args.dynamic_sampling_filter_path, "filter") is check_reward_nonzero_std
    loaded = load_optional(args, "dynamic_sampling_filter_path", "filter")
    assert _keep(loaded, args, group(0.0, 1.0)) == (True, None)
    assert _keep(loaded, args, group(0.0, 0.0)) == (False, "reward_all_0")
    assert _keep(None, args, group(0.0, 0.0)) == (True, None)
