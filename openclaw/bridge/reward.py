"""Binary RL's reward signal: the judge's sign or graded score, and a baseline carried across steps.

Why: while a new user's preference makes nearly every turn -1, the batch-mean baseline gives every
advantage 0 (a batch of equal scores teaches nothing) and baseline 0 only pushes sampled tokens
down. Two remedies, chosen by openclaw-rl's flags (`openclaw.bridge.flags.add_rl_signal_arguments`):

  * `--openclaw-rl-score graded`: the reward is the judge's graded score (`openclaw.judge.graded`),
    so "almost, a touch shorter" scores above "that's a wall of text" and the batch has variance;
  * `--openclaw-rl-baseline running`: the baseline is a mean of past steps' rewards, carried across
    steps (and checkpoints, in the data source's state): a rare good turn among bad ones is a large
    positive advantage even when its whole batch is bad, and a batch better than the recent past is
    pushed up as a whole. The rollout then hands slime `reward - baseline` with slime's own
    baseline off (`--n-samples-per-prompt 1 --disable-rewards-normalization`); the raw reward stays
    in `Sample.metadata["raw_reward"]`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openclaw.bridge.flags import DEFAULT_RL_BASELINE, DEFAULT_RL_BASELINE_DECAY, DEFAULT_RL_SCORE


@dataclass(frozen=True)
class RlSignal:
    """openclaw-rl's reward flags, read once and checked against slime's grouping flags."""

    score: str = DEFAULT_RL_SCORE  # "sign" | "graded"
    baseline: str = DEFAULT_RL_BASELINE  # "slime" | "running"
    decay: float = DEFAULT_RL_BASELINE_DECAY

    @classmethod
    def from_args(cls, args: Any) -> RlSignal:
        # Another method's provider does not define these flags: it trains on the sign with slime's baseline.
        sig = cls(score=getattr(args, "openclaw_rl_score", DEFAULT_RL_SCORE),
                  baseline=getattr(args, "openclaw_rl_baseline", DEFAULT_RL_BASELINE),
                  decay=float(getattr(args, "openclaw_rl_baseline_decay", DEFAULT_RL_BASELINE_DECAY)))
        if sig.baseline == "running":
            group = int(getattr(args, "n_samples_per_prompt", 1) or 1)
            normalised = bool(getattr(args, "rewards_normalization", True))
            if group != 1 or normalised:
                # slime would centre each group again, which removes any baseline the rollout subtracted.
                raise ValueError(
                    "--openclaw-rl-baseline running replaces slime's group baseline: pass --n-samples-per-prompt 1 "
                    f"--disable-rewards-normalization (got --n-samples-per-prompt {group}, rewards normalisation "
                    f"{'on' if normalised else 'off'}); the turns per step are --rollout-batch-size")
        return sig


@dataclass
class RunningBaseline:
    """b <- decay * b + (1 - decay) * (the step's mean reward); the first step's baseline is its own
    mean (so the first update is the batch-mean one, not an all-negative push)."""

    decay: float = DEFAULT_RL_BASELINE_DECAY
    value: float | None = None
    steps: int = 0

    def centre(self, rewards: list[float]) -> tuple[list[float], float]:
        """(reward - b for each reward, b), b from the steps before this one; then b takes this step in."""
        if not rewards:
            return [], (self.value or 0.0)
        mean = sum(rewards) / len(rewards)
        used = mean if self.value is None else self.value
        self.value = mean if self.value is None else self.decay * self.value + (1.0 - self.decay) * mean
        self.steps += 1
        return [r - used for r in rewards], used

    def state_dict(self) -> dict[str, Any]:
        return {"value": self.value, "steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        value = state.get("value")
        self.value = None if value is None else float(value)
        self.steps = int(state.get("steps", 0))


def apply_running_baseline(samples: list[Any], baseline: RunningBaseline) -> dict[str, float]:
    """Centre each sample's reward by the running baseline (in place); the metrics of the step."""
    raw = [float(s.reward) for s in samples]
    centred, used = baseline.centre(raw)
    for s, r, c in zip(samples, raw, centred, strict=True):
        s.metadata = {**(s.metadata or {}), "raw_reward": r}
        s.reward = c
    m = {"rollout/reward_baseline": used, "rollout/reward_baseline_next": baseline.value or 0.0}
    if centred:
        m["rollout/advantage_mean"] = sum(centred) / len(centred)
    return m
