"""Verdict parsing and majority vote for PRM scoring.

A judge completion ends with `\\boxed{1}` (good), `\\boxed{-1}` (bad) or `\\boxed{0}`
(neutral). m completions are aggregated by a thresholded majority vote: a label wins only
when it holds at least `threshold` of the VALID votes and no other label ties it; otherwise
the reward is 0. Invalid completions (no box, or a value outside {-1, 0, 1}) are kept as
`None` so they are visible in the stored votes, but they do not dilute the share.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

VALID_LABELS: tuple[int, ...] = (1, -1, 0)
DEFAULT_THRESHOLD = 0.6
# Tolerance for float thresholds like 0.6 * 5 that are not exact in binary.
_EPS = 1e-9

# `\boxed{ +1 }`, `\boxed{-1}`, also `\boxed{\text{1}}`-free plain forms only: judges that
# wrap the number in more LaTeX are counted invalid on purpose (ambiguous).
_BOXED_RE = re.compile(r"\\boxed\{\s*([^{}]*?)\s*\}")
_INT_RE = re.compile(r"^[+-]?\d+$")


def parse_verdict(text: str | None) -> int | None:
    """The verdict of one judge completion: the LAST `\\boxed{...}` wins.

    Returns 1, -1 or 0, or None when there is no box or the last box does not hold one of
    those integers (e.g. `\\boxed{2}`, `\\boxed{good}`, `\\boxed{}`).
    """
    if not text:
        return None
    matches = _BOXED_RE.findall(text)
    if not matches:
        return None
    raw = matches[-1].strip()
    if not _INT_RE.match(raw):
        return None
    value = int(raw)
    return value if value in VALID_LABELS else None


@dataclass(frozen=True)
class VoteResult:
    reward: float  # the aggregated label as a float (1.0, -1.0 or 0.0)
    votes: list[int | None]  # every vote, invalid ones as None
    counts: dict[int, int] = field(default_factory=dict)  # label -> count over valid votes
    n_valid: int = 0
    winner_share: float = 0.0  # share of the top label among valid votes (0 when none valid)
    all_invalid: bool = False  # flagged: no vote could be parsed
    reason: str = ""  # "majority" | "below_threshold" | "tie" | "all_invalid" | "no_votes"

    @property
    def label(self) -> int:
        return int(self.reward)


def validate_threshold(threshold: float) -> float:
    if not (0.0 < threshold <= 1.0):
        raise ValueError(f"majority-vote threshold must be in (0, 1], got {threshold}")
    return float(threshold)


def majority_vote(votes: list[int | None], threshold: float = DEFAULT_THRESHOLD) -> VoteResult:
    """Aggregate parsed votes. See the module docstring for the semantics."""
    threshold = validate_threshold(threshold)
    votes = list(votes)
    for v in votes:
        if v is not None and v not in VALID_LABELS:
            raise ValueError(f"vote {v!r} is not one of {VALID_LABELS} or None")
    if not votes:
        return VoteResult(0.0, votes, {}, 0, 0.0, all_invalid=True, reason="no_votes")
    valid = [v for v in votes if v is not None]
    if not valid:
        return VoteResult(0.0, votes, {}, 0, 0.0, all_invalid=True, reason="all_invalid")
    counts = Counter(valid)
    ranked = counts.most_common()
    top_label, top_count = ranked[0]
    share = top_count / len(valid)
    counts_d = {label: counts.get(label, 0) for label in VALID_LABELS}
    if len(ranked) > 1 and ranked[1][1] == top_count:
        return VoteResult(0.0, votes, counts_d, len(valid), share, reason="tie")
    if top_count + _EPS < threshold * len(valid):
        return VoteResult(0.0, votes, counts_d, len(valid), share, reason="below_threshold")
    return VoteResult(float(top_label), votes, counts_d, len(valid), share, reason="majority")
