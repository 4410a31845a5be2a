"""What the tracks' environments share: the turn budget and record of an episode, the result of a
step run in the sandbox, and the process bonus of a reward."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from openclaw.sandbox import ExecResult

A = TypeVar("A")


class Ended(Protocol):
    """A step's result: whether the episode is over after it."""

    done: bool


R = TypeVar("R", bound=Ended)


@dataclass(eq=False)
class EpisodeEnv(Generic[R]):
    """A turn-budgeted episode: `step` acts on one model turn (the track's `act`), and the episode
    ends at the track's own end or after `max_steps` turns, whichever comes first."""

    max_steps: int = field(default=20, kw_only=True)
    steps: int = field(default=0, init=False)
    done: bool = field(default=False, init=False)
    history: list[R] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")

    def restart(self) -> None:
        self.steps, self.done, self.history = 0, False, []

    async def act(self, model_text: str) -> R:
        """The track's response to one model turn."""
        raise NotImplementedError

    async def step(self, model_text: str) -> R:
        if self.done:
            raise RuntimeError("step() after the episode ended; call reset()")
        self.steps += 1
        result = await self.act(model_text)
        if self.steps >= self.max_steps:
            result.done = True
        self.done = result.done
        self.history.append(result)
        return result


@dataclass
class SandboxStep(Generic[A]):
    """One turn of an episode whose actions run in the sandbox."""

    observation: str
    done: bool
    action: A
    exec_result: ExecResult | None = None
    step_score: float = 0.0  # the rule-based process score of this turn (--prm-step-coef)


def process_bonus(step_scores: Sequence[float], prm_step_coef: float) -> float:
    """prm_step_coef * the mean per-step process score (0 without steps or coefficient)."""
    return prm_step_coef * (sum(step_scores) / len(step_scores)) if step_scores and prm_step_coef else 0.0
