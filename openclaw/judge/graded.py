"""A judged turn's graded score in [-1, 1]: how good the judge thinks the turn was, not only which
side it fell on.

The stored `score` is a sign (+1 / 0 / -1). Binary RL over signs learns nothing while a new user's
preference makes nearly every turn -1 (every advantage is 0), although the user's words still say
*how far* a reply missed ("almost, a touch shorter" is not "that's a wall of text"). The judges
already carry that degree; this reads it back from the stored judgement:

  * CPU judge (`extra.proba`, the head's class probabilities): P(+1) - P(-1), the expected label
    under the head. A decisive rule (`extra.rule`: silence, a tool error) is certain: its label.
  * LLM judge (m votes): the mean of the valid votes (a 2-of-3 verdict is less sure than 3-of-3).
  * anything else (a custom reward model, a judge without votes): the score, clipped to [-1, 1].

A judgement that is not a dict, or values that are not finite numbers, give 0 (no signal), the same
as `openclaw.bridge.turn_signal` treats an unreadable score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def _finite(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _clip(x: float) -> float:
    return max(-1.0, min(1.0, x))


def graded_score(judgement: Mapping[str, Any] | None) -> float:
    """The judgement's graded score in [-1, 1] (see the module docstring for each judge)."""
    if not isinstance(judgement, Mapping):
        return 0.0
    score = _finite(judgement.get("score")) or 0.0
    extra = judgement.get("extra") if isinstance(judgement.get("extra"), Mapping) else {}
    if extra.get("rule"):
        return _clip(score)  # a decisive rule is certain: its label is the grade
    proba = extra.get("proba")
    if isinstance(proba, Mapping):
        good, bad = _finite(proba.get("1")), _finite(proba.get("-1"))
        if good is not None and bad is not None:
            return _clip(good - bad)
    votes = [v for v in (_finite(x) for x in judgement.get("votes") or []) if v is not None]
    if votes and judgement.get("backend") == "llm":
        return _clip(sum(votes) / len(votes))
    return _clip(score)
