"""The toy method's rollout: the bridge's drain under the method named by --openclaw-method."""

from __future__ import annotations

from typing import Any

from slime.rollout.base_types import RolloutFnTrainOutput

from openclaw.bridge import as_groups, drain


def generate_rollout(args: Any, rollout_id: int, data_source: Any, evaluation: bool = False) -> RolloutFnTrainOutput:
    samples, metrics = drain(args, data_source, args.openclaw_method)
    return RolloutFnTrainOutput(samples=as_groups(args, samples), metrics=metrics)
