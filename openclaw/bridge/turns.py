"""One judged buffer turn -> one trainer `Sample`, and what signal the turn carries.

A turn's signal is the judge's score (non-zero: binary RL), an accepted textual hint (OPD), both
or neither; each method trains on its own kinds (`trainable_kinds`: its `Method.trains_on`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from slime.utils.types import Sample

from openclaw.control.feedback import effective_signal
from openclaw.judge.graded import graded_score
from openclaw.methods import KINDS as KINDS  # the signal kinds, re-exported for the bridge's users
from openclaw.methods import Method, get_method, method_names

METHODS = method_names()


def trainable_kinds(method: str | Method) -> frozenset[str]:
    """Which signal kinds a method trains on (its `Method.trains_on`)."""
    return get_method(method).trains_on


@dataclass(frozen=True)
class TurnSignal:
    score: float
    hint: str | None
    source: str = "judge"  # where the score came from: "judge" | "feedback"
    hint_source: str | None = None  # "judge" | "feedback" | None

    @property
    def kind(self) -> str:
        if self.hint and self.score != 0:
            return "hint+score"
        if self.hint:
            return "hint"
        if self.score != 0:
            return "score"
        return "none"


def turn_signal(rec: Any, graded: bool = False) -> TurnSignal:
    """The judge's score and hint, overridden by the user's explicit feedback when the turn has
    one (`openclaw.control.feedback`: the rating is the reward, a comment is the hint).
    `graded`: the judge's graded score in [-1, 1] (`openclaw.judge.graded`) instead of its sign,
    so a turn the judge scored 0 but leaned on one side ("almost, a touch shorter") carries signal."""
    j = rec.judgement or {}
    try:
        score = float(j.get("score", 0.0) or 0.0)
    except (TypeError, ValueError):
        score = 0.0
    if not math.isfinite(score):
        score = 0.0
    if graded:
        score = graded_score(j)
    hint = j.get("hint")
    hint = hint.strip() if isinstance(hint, str) and hint.strip() else None
    signal = effective_signal(score, hint, rec.feedback)
    return TurnSignal(score=signal.score, hint=signal.hint, source=signal.score_source, hint_source=signal.hint_source)


def next_state_text(rec: Any) -> str:
    ns = rec.next_state or {}
    content = ns.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "")


def loss_mask_of(rec: Any) -> list[int]:
    """1 for every response token but those the intercept left out of the loss
    (`metadata["loss_mask_zero_spans"]`: the think block under `--rl-train-reasoning mask`)."""
    n = len(rec.response_ids)
    mask = [1] * n
    for span in (rec.metadata or {}).get("loss_mask_zero_spans") or ():
        start, end = max(0, int(span[0])), min(n, int(span[1]))
        mask[start:end] = [0] * max(0, end - start)
    return mask


def turn_to_sample(rec: Any, reward: float) -> Sample:
    """One buffer turn -> one Sample: ids and log-probs exactly as recorded. A turn recorded
    without log-probs (imported text) gets `rollout_log_probs=None`: `drain` fills them from the
    current policy (openclaw.bridge.behaviour) before the sample reaches the trainer."""
    prompt_ids, response_ids = list(rec.prompt_ids), list(rec.response_ids)
    signal = turn_signal(rec)
    recorded = len(rec.response_logprobs) == len(response_ids) and bool(response_ids)
    sample = Sample(
        index=int(rec.turn_id), group_index=int(rec.turn_id), prompt=list(rec.messages),
        tokens=prompt_ids + response_ids, response=rec.response_text or "", response_length=len(response_ids),
        loss_mask=loss_mask_of(rec), reward=float(reward),
        rollout_log_probs=[float(x) for x in rec.response_logprobs] if recorded else None,
        weight_version=int(rec.weight_version or 0), session_id=rec.session_id, status=Sample.Status.COMPLETED,
        metadata={"turn_id": int(rec.turn_id), "score": signal.score, "hint": signal.hint, "kind": signal.kind,
                  "graded_score": graded_score(rec.judgement), "score_source": signal.source, "hint_source": signal.hint_source,
                  "next_state": next_state_text(rec), "tools": rec.tools,
                  "imported": bool((rec.metadata or {}).get("imported"))},
    )
    sample.validate()
    return sample
