"""openclaw-combine's rollout: binary RL + OPD from live conversations.

    --data-source-path      openclaw.bridge.BufferDataSource
    --rollout-function-path openclaw-combine/openclaw_combine_rollout.py:generate_rollout
    --custom-loss-function-path openclaw-combine/combine_loss.py:combine_loss

Mixing rules, per judged main turn (signal kinds of `openclaw.bridge.turn_signal`):
    hint and score  -> reward = score, teacher log-probs under the hinted prompt
    hint only       -> reward = 0 (score 0),  teacher log-probs under the hinted prompt
    score only      -> reward = score, teacher log-probs = the rollout log-probs (OPD term exactly 0)
    neither         -> not trainable (counted as rollout/buffer_skipped/no_signal, consumed)
Every sample is built the same way whatever the caller does with it: there is no eval mode.
"""

from __future__ import annotations

import asyncio
from typing import Any

from slime.rollout.base_types import RolloutFnTrainOutput

from openclaw.bridge import as_groups, drain
from openclaw.bridge.teacher import add_teacher


def generate_rollout(args: Any, rollout_id: int, data_source: Any, evaluation: bool = False) -> RolloutFnTrainOutput:
    if evaluation:
        raise ValueError("a live buffer has no eval set: evaluate checkpoints with openclaw-test/run_eval.sh")
    samples, metrics = drain(args, data_source, "combine")
    if samples:
        metrics.update(asyncio.run(add_teacher(args, samples, copy_without_hint=True)))
    return RolloutFnTrainOutput(samples=as_groups(args, samples), metrics=metrics)
