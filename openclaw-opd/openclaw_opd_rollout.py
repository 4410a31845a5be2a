"""openclaw-opd's rollout: on-policy distillation (OPD) from live conversations.

    --data-source-path      openclaw.bridge.BufferDataSource
    --rollout-function-path openclaw-opd/openclaw_opd_rollout.py:generate_rollout
    --extra-args-provider-path openclaw-opd/openclaw_opd_args.py
    --advantage-estimator on_policy_distillation --use-rollout-logprobs

The judge reads the next state (the user's reply) and, when it says what should change, accepts
a textual *hint*. The teacher is the policy itself shown that hint (privileged hindsight, as in
SDFT/SDPO): the hint goes in front of the turn's last user message and the engine returns the
log-probs of the *sampled* response under that prompt (`openclaw.bridge.teacher`). The
token-level advantage is ``teacher_logp - old_logp``, positive where the hint makes the sampled
token more likely.

Turns without an accepted hint carry no OPD signal: OPD does not train on them. They are
counted (`rollout/buffer_skipped/no_hint`) and consumed for this consumer only; consumption is
per consumer id, so openclaw-combine (its own consumer) still trains on their scores.
"""

from __future__ import annotations

import asyncio
from typing import Any

from slime.rollout.base_types import RolloutFnTrainOutput

from openclaw.bridge import as_groups, drain
from openclaw.bridge.teacher import add_teacher


def generate_rollout(args: Any, rollout_id: int, data_source: Any, evaluation: bool = False) -> RolloutFnTrainOutput:
    """slime's rollout contract: hinted turns with teacher log-probs."""
    if evaluation:
        raise ValueError("a live buffer has no eval set: evaluate checkpoints with openclaw-test/run_eval.sh")
    samples, metrics = drain(args, data_source, "opd")
    if samples:
        metrics.update(asyncio.run(add_teacher(args, samples, copy_without_hint=False)))
    return RolloutFnTrainOutput(samples=as_groups(args, samples), metrics=metrics)
