"""Reward-collapse guard: a rolling window of verdicts and a warning, with the reference's
troubleshooting advice, when they concentrate on one value (GRPO then has no signal)."""

from __future__ import annotations

import logging
import threading
from collections import Counter, deque
from dataclasses import dataclass

log = logging.getLogger("openclaw.judge.collapse")

ADVICE = (
    "PRM scores are collapsing (reward collapse). Troubleshooting:\n"
    "  - Verify `next_state` fields contain meaningful feedback signals\n"
    "  - Check judge model prompt template matches expected format\n"
    "  - Try increasing majority vote N: `--majority-vote-n 7`"
)


@dataclass(frozen=True)
class CollapseStats:
    window: int  # verdicts in the window
    shares: dict[str, float]  # "1" / "0" / "-1" -> share of the window
    invalid_share: float  # share of turns whose votes were all invalid
    collapsed: bool
    dominant: str | None


def _bucket(reward: float) -> str:
    return "1" if reward > 0 else "-1" if reward < 0 else "0"


class CollapseMonitor:
    """Thread-safe. `observe()` returns a warning message when the window has collapsed; it
    warns at most once per `window` verdicts so logs are not flooded."""

    def __init__(self, window: int = 200, threshold: float = 0.9, min_count: int | None = None) -> None:
        self.window = window
        self.threshold = threshold
        self.min_count = min_count if min_count is not None else min(window, 50)
        self._rewards: deque[str] = deque(maxlen=window)
        self._invalid: deque[bool] = deque(maxlen=window)
        self._since_warning = window  # warn as soon as the condition first holds
        self._lock = threading.Lock()
        self.warnings = 0

    def stats(self) -> CollapseStats:
        with self._lock:
            return self._stats()

    def _stats(self) -> CollapseStats:
        n = len(self._rewards)
        counts = Counter(self._rewards)
        shares = {k: (counts.get(k, 0) / n if n else 0.0) for k in ("1", "0", "-1")}
        dominant = max(shares, key=shares.get) if n else None
        collapsed = n >= self.min_count and dominant is not None and shares[dominant] > self.threshold
        invalid = sum(self._invalid) / n if n else 0.0
        return CollapseStats(n, shares, invalid, collapsed, dominant if collapsed else None)

    def observe(self, reward: float, all_invalid: bool = False) -> str | None:
        with self._lock:
            self._rewards.append(_bucket(reward))
            self._invalid.append(bool(all_invalid))
            self._since_warning += 1
            st = self._stats()
            if not st.collapsed or self._since_warning < self.window:
                return None
            self._since_warning = 0
            self.warnings += 1
        what = "neutral (0)" if st.dominant == "0" else f"{st.dominant}"
        msg = (f"judge verdicts concentrate: {st.shares[st.dominant]:.0%} of the last {st.window} turns are "
               f"{what} (threshold {self.threshold:.0%}; all-invalid votes {st.invalid_share:.0%}).\n{ADVICE}")
        log.warning(msg)
        return msg
