"""Off-policy control for train_async: how many weight versions behind each sample is.

staleness(sample) = current trainer version - sample.weight_version (the engine's version when
it finished the sample). With `--max-staleness N`:
  drop (default):  a whole prompt group is dropped when any of its samples is more than N
                   versions old (GRPO baselines need complete groups); counted in
                   `staleness/dropped` (samples);
  downweight:      every sample is kept; its advantages are scaled by 0.5 ** (staleness - N)
                   when staleness > N.
"""

from __future__ import annotations

from dataclasses import dataclass

from slime.utils.types import Sample

# Set by the default rollout on a sample whose engine versions only its base weights (SGLang) while
# the policy is a named adapter (--lora-adapter-name): the answer's weight_version is the base's and
# says nothing about the adapter that produced the sample.
UNREPORTED_VERSION = "weight_version_unreported"


def fill_unreported_versions(samples: list[Sample], start_version: int) -> int:
    """Give each sample whose engine could not say which adapter version produced it the version the
    engines held when the rollout began (the rollout manager's). Pushes only raise versions, so this
    is never newer than the truth: a push during the rollout makes such a sample count older than it
    is, never fresher. Returns how many were filled."""
    filled = 0
    for s in samples:
        if UNREPORTED_VERSION in s.metadata:
            s.weight_version = start_version
            filled += 1
    return filled


@dataclass
class StalenessResult:
    samples: list[Sample]
    weights: list[float] | None
    dropped: int
    lags: list[int]


def apply_staleness(samples: list[Sample], current_version: int, max_staleness: int | None,
                    policy: str = "drop", group_size: int = 1) -> StalenessResult:
    lags = [current_version - int(s.weight_version or 0) for s in samples]
    if max_staleness is None:
        return StalenessResult(samples, None, 0, lags)
    if policy == "downweight":
        weights = [0.5 ** max(0, lag - max_staleness) for lag in lags]
        return StalenessResult(samples, weights, 0, lags)
    if policy != "drop":
        raise ValueError(f"unknown staleness policy {policy!r}; choose drop or downweight")
    size = group_size if group_size >= 1 and len(samples) % group_size == 0 else 1
    kept: list[Sample] = []
    kept_lags: list[int] = []
    dropped = 0
    for start in range(0, len(samples), size):
        group, group_lags = samples[start:start + size], lags[start:start + size]
        if max(group_lags) > max_staleness:
            dropped += len(group)
        else:
            kept.extend(group)
            kept_lags.extend(group_lags)
    return StalenessResult(kept, None, dropped, kept_lags)
