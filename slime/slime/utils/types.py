"""The Sample: one unit of rollout data shared by rollout, trainer and plugins.

Field names follow upstream slime so plugins written for it keep working.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


@dataclass
class Sample:
    class Status(str, Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    index: int | None = None
    group_index: int | None = None
    prompt: str | list[dict[str, Any]] = ""
    tokens: list[int] = field(default_factory=list)  # prompt + response token ids
    response: str = ""
    response_length: int = 0
    # 1 for tokens the policy generated, 0 for observations inside a multi-turn response.
    # Covers response tokens only: len(loss_mask) == response_length.
    loss_mask: list[int] | None = None
    reward: float | dict[str, Any] | None = None
    label: str | None = None
    # Per response token, aligned 1:1 with the last `response_length` tokens. Never zero-padded:
    # observation tokens carry the log-prob the engine reported when scoring them (or are
    # excluded by loss_mask, with a real value from a recompute).
    rollout_log_probs: list[float] | None = None
    teacher_log_probs: list[float] | None = None
    weight_version: int | None = None
    session_id: str | None = None
    status: Status = Status.PENDING
    metadata: dict[str, Any] = field(default_factory=dict)
    # Set by a --rollout-sample-filter-path plugin: the sample stays in its group (it counts in the
    # group baseline and in the step's sample count) but contributes nothing to the loss.
    remove_sample: bool = False

    @property
    def prompt_length(self) -> int:
        return len(self.tokens) - self.response_length

    def validate(self) -> None:
        """Raise ValueError when the token/mask/log-prob alignment contract is broken."""
        if self.response_length > len(self.tokens):
            raise ValueError(f"response_length {self.response_length} > len(tokens) {len(self.tokens)}")
        for name in ("loss_mask", "rollout_log_probs", "teacher_log_probs"):
            value = getattr(self, name)
            if value is not None and len(value) != self.response_length:
                raise ValueError(f"len({name})={len(value)} != response_length={self.response_length}")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sample:
        data = dict(data)
        data["status"] = cls.Status(data.get("status", "pending"))
        return cls(**data)
