"""Return types of rollout functions (slime's names)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slime.utils.types import Sample


@dataclass
class RolloutFnTrainOutput:
    samples: list[list[Sample]]  # groups of n_samples_per_prompt
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class RolloutFnEvalOutput:
    data: dict[str, dict[str, Any]]
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class DynamicFilterOutput:
    keep: bool
    reason: str | None = None


def normalize_rollout_output(out: Any) -> RolloutFnTrainOutput:
    """Accept slime's RolloutFnTrainOutput, or a bare list of groups / flat list of Samples."""
    if isinstance(out, RolloutFnTrainOutput):
        return out
    if hasattr(out, "samples"):
        return RolloutFnTrainOutput(samples=list(out.samples), metrics=dict(getattr(out, "metrics", {}) or {}))
    if isinstance(out, list):
        if out and isinstance(out[0], Sample):
            return RolloutFnTrainOutput(samples=[[s] for s in out])
        return RolloutFnTrainOutput(samples=[list(g) for g in out])
    raise TypeError(f"rollout function returned {type(out).__name__}; expected RolloutFnTrainOutput or list of groups")
