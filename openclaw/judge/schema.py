"""Typed inputs and outputs of a judge, independent of the backend."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class JudgeInput:
    response: str  # the assistant reply being graded
    next_state: str  # what came after it (user message, tool output, environment)
    next_state_role: str = "user"
    prompt: Any = None  # optional context: message list or text
    turn_id: Any = None  # buffer id, carried through untouched


@dataclass
class JudgeResult:
    reward: float  # aggregated verdict: 1.0, -1.0 or 0.0
    votes: list[int | None]  # every PRM vote (None = unparseable)
    backend: str
    rationale: str | None = None  # one representative judge completion / explanation
    vote_reason: str = ""  # see votes.VoteResult.reason
    all_invalid: bool = False
    hint: str | None = None  # accepted OPD hint, None when rejected or not requested
    hint_votes: list[dict[str, Any]] = field(default_factory=list)
    hint_reason: str = ""
    timings: dict[str, float] = field(default_factory=dict)  # seconds: score_s, hint_s, total_s
    extra: dict[str, Any] = field(default_factory=dict)  # backend specifics (probabilities, rule)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class JudgeFailure:
    """A turn the backend could not judge (every call failed, or no completion held a verdict):
    recorded, retried later; never turned into a reward of 0."""

    error: str
    invalid_votes: int = 0  # unparseable judge completions behind this failure (counted by workers)


class Judge(Protocol):
    """What a worker needs from a backend. Implementations must bound their own time."""

    name: str

    def judge_batch(self, items: list[JudgeInput]) -> list[JudgeResult | JudgeFailure]: ...

    def close(self) -> None: ...


class Stopwatch:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0
