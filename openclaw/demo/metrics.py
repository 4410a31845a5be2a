"""The main job's numbers beyond the table: the reference project's personalization metric and
bootstrap confidence intervals.

**Sessions to k consecutive accepted** (the reference's metric, k = 3). Each simulated-user
interaction is one session. Sessions are numbered 1, 2, ... in the order they were STARTED:
the order in which the user's first request of the session was sent to the server
(`SimulatedUsers` takes the number just before sending, in its single event loop, so the
numbering is total even with 8 users talking at once). A session counts as accepted when the
persona's verdict on its live reply accepts it. The metric is the number of the session that
completes the first run of k consecutive accepted sessions (1-based), or, when no run of k
exists among the N sessions held, "not reached (> N)": a censored value, never a guess.
With concurrent users a session may finish after a later-numbered one; the start order is used
because it is fixed when the session begins (the policy version it meets is the one live at
that moment), while the finish order depends on reply lengths.

**Bootstrap CIs** over held-out prompts: percentile intervals of the mean from `resamples`
resamples of the prompts with replacement (numpy, fixed seed), and for a before/after delta the
paired bootstrap (the same resampled prompts on both sides), since both points answer the same
prompts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

CONSECUTIVE = 3
BOOTSTRAP_SEED = 20260519
BOOTSTRAP_RESAMPLES = 5000


@dataclass(frozen=True)
class SessionsToConsecutive:
    value: int | None  # the 1-based session number, or None when not reached (censored)
    sessions: int  # how many sessions were observed
    k: int = CONSECUTIVE

    @property
    def reached(self) -> bool:
        return self.value is not None

    def __str__(self) -> str:
        return str(self.value) if self.value is not None else f"not reached (> {self.sessions})"

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "sessions": self.sessions, "k": self.k, "text": str(self)}


def sessions_to_consecutive(accepted: Sequence[bool], k: int = CONSECUTIVE) -> SessionsToConsecutive:
    """`accepted` in session (start) order."""
    if k < 1:
        raise ValueError("k must be >= 1")
    run = 0
    for i, ok in enumerate(accepted, start=1):
        run = run + 1 if ok else 0
        if run == k:
            return SessionsToConsecutive(i, len(accepted), k)
    return SessionsToConsecutive(None, len(accepted), k)


def sessions_metric(sessions: Sequence[dict[str, Any]], k: int = CONSECUTIVE) -> SessionsToConsecutive:
    """From results.json's `sessions` records ({"n": start number, "accepted": bool, ...}),
    in any order; the start numbers must be distinct."""
    ordered = sorted(sessions, key=lambda s: int(s["n"]))
    numbers = [int(s["n"]) for s in ordered]
    if len(set(numbers)) != len(numbers):
        raise ValueError("session start numbers must be distinct")
    return sessions_to_consecutive([bool(s["accepted"]) for s in ordered], k)


@dataclass(frozen=True)
class Interval:
    """A point estimate with its 95% bootstrap interval, in percentage points."""

    estimate: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        return f"{self.estimate:.1f} [{self.low:.1f}, {self.high:.1f}]"

    def signed(self) -> str:
        return f"{self.estimate:+.1f} [{self.low:+.1f}, {self.high:+.1f}]"

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def _percentile_interval(stats: np.ndarray, estimate: float, n: int, level: float) -> Interval:
    lo, hi = np.percentile(stats, [50 * (1 - level), 50 * (1 + level)])
    return Interval(float(estimate), float(lo), float(hi), n)


def bootstrap_mean(values: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                   level: float = 0.95) -> Interval:
    """Mean of `values` (0/1 per prompt -> a rate; scaled by 100) with a percentile bootstrap CI."""
    x = 100.0 * np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("no values to bootstrap")
    idx = np.random.default_rng(seed).integers(0, x.size, size=(resamples, x.size))
    return _percentile_interval(x[idx].mean(axis=1), x.mean(), x.size, level)


def paired_bootstrap_delta(before: Sequence[float], after: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES,
                           seed: int = BOOTSTRAP_SEED, level: float = 0.95) -> Interval:
    """after - before (in points) over the same items, resampling items jointly."""
    b, a = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    if b.shape != a.shape or b.size == 0:
        raise ValueError(f"paired bootstrap needs two equal-length non-empty samples, got {b.size} and {a.size}")
    d = 100.0 * (a - b)
    idx = np.random.default_rng(seed).integers(0, d.size, size=(resamples, d.size))
    return _percentile_interval(d[idx].mean(axis=1), d.mean(), d.size, level)


def _per_item(point: dict[str, Any], key: str, examples: str = "examples") -> list[float] | None:
    rows = point.get(examples) or []
    if not rows or any(key not in r for r in rows):
        return None
    return [float(bool(r[key])) for r in rows]


def _paired(before: dict[str, Any], after: dict[str, Any], key: str, examples: str = "examples") -> dict[str, Any] | None:
    b, a = _per_item(before, key, examples), _per_item(after, key, examples)
    if b is None or a is None or len(b) != len(a):
        return None
    return {"before": bootstrap_mean(b).to_dict(), "after": bootstrap_mean(a).to_dict(),
            "delta": paired_bootstrap_delta(b, a).to_dict()}


def learning_metrics(points: Sequence[dict[str, Any]], sessions: Sequence[dict[str, Any]] | None) -> dict[str, Any]:
    """Everything the report shows about one run, from results.json's `points` (EvalPoint dicts)
    and `sessions`. A field the run did not record (older results.json) is None."""
    before, after = points[0], points[-1]
    out: dict[str, Any] = {
        "acceptance": _paired(before, after, "accepted"),
        "on_topic": _paired(before, after, "on_topic"),
        "capability": _paired(before, after, "correct", "probe_examples"),
        "delta": {k: after[k] - before[k] for k in ("acceptance", "preference", "on_topic", "capability")},
        "kl_to_base": after.get("kl_to_base"),
        "sessions_to_3": sessions_metric(sessions).to_dict() if sessions else None,
    }
    return out


__all__ = ["BOOTSTRAP_RESAMPLES", "BOOTSTRAP_SEED", "CONSECUTIVE", "Interval", "SessionsToConsecutive",
           "bootstrap_mean", "learning_metrics", "paired_bootstrap_delta", "sessions_metric",
           "sessions_to_consecutive"]
