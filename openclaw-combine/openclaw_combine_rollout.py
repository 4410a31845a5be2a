"""Binary RL + OPD from live conversations: the rollout side of openclaw-combine.

Mixing rules, per judged main turn (signal kinds of openclaw-rl's `turn_signal`):
    hint and score  -> reward = score, teacher log-probs under the hinted prompt
    hint only       -> reward = 0 (score 0),  teacher log-probs under the hinted prompt
    score only      -> reward = score, teacher log-probs = the rollout log-probs (OPD term exactly 0)
    neither         -> not trainable (counted as rollout/buffer_skipped/no_signal, consumed)
Every sample is built the same way whatever the caller does with it: there is no eval mode.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(_ROOT / "openclaw-rl"))
sys.path.append(str(_ROOT / "openclaw-opd"))

import openclaw_buffer_rollout as base  # noqa: E402
import openclaw_opd_rollout as opd  # noqa: E402
from slime.rollout.base_types import RolloutFnTrainOutput  # noqa: E402


def generate_rollout(args: Any, rollout_id: int, data_source: Any, evaluation: bool = False) -> RolloutFnTrainOutput:
    if evaluation:
        raise ValueError("a live buffer has no eval set: evaluate checkpoints with openclaw-test/run_eval.sh")
    samples, metrics = base.drain(args, data_source, "combine")
    if samples:
        metrics.update(asyncio.run(opd.add_teacher(args, samples, copy_without_hint=True)))
    return RolloutFnTrainOutput(samples=base.as_groups(args, samples), metrics=metrics)
