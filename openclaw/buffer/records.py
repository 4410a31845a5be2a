"""The turn record: one model call captured by the RL intercept, as stored in the buffer."""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from typing import Any

# Record states. A trainable main turn walks AWAITING -> READY -> JUDGED (-> consumed, which is
# per consumer and kept in its own table). Non-trainable turns (side turns, redacted turns,
# opted-out never reach disk) go straight to CLOSED: kept for export/inspection, never judged
# or trained. JUDGE_FAILED: the judge gave up after max attempts (kept, counted, never trained).
AWAITING = "awaiting_next_state"
READY = "ready"
JUDGED = "judged"
CLOSED = "closed"
JUDGE_FAILED = "judge_failed"
STATES = (AWAITING, READY, JUDGED, CLOSED, JUDGE_FAILED)

TURN_TYPES = ("main", "side")


class RecordError(ValueError):
    """A record that violates the buffer's invariants (rejected before anything is written)."""


@dataclass
class TurnRecord:
    """One turn. Fields up to `metadata` are written by the producer (the intercept); the rest
    are filled in by the buffer when a record is read back."""

    session_id: str
    turn_index: int | None  # None: the buffer assigns the session's next index
    turn_type: str  # "main" | "side"
    messages: list[dict[str, Any]]  # the request's messages (already redacted)
    tools: list[dict[str, Any]] | None = None
    prompt_ids: list[int] = field(default_factory=list)  # exact ids the engine consumed
    response_ids: list[int] = field(default_factory=list)
    response_logprobs: list[float] = field(default_factory=list)  # 1:1 with response_ids
    response_text: str = ""  # raw decoded output
    content: str | None = None  # assistant content after tool-call extraction
    tool_calls: list[dict[str, Any]] | None = None
    model: str = ""
    weight_version: int = 0
    created_at: float = 0.0
    finished_at: float = 0.0
    request_id: str = ""
    trainable: bool = True
    next_state: dict[str, Any] | None = None  # {"role", "content", "messages"}
    metadata: dict[str, Any] = field(default_factory=dict)
    user_id: str = "default"  # whose session (openclaw.buffer.users); "default" before there were users
    # --- set by the buffer on read ---
    turn_id: int | None = None
    state: str | None = None
    judgement: dict[str, Any] | None = None
    judge_attempts: int = 0
    judge_error: str | None = None
    # The user's explicit rating ({"rating", "score", "comment", "changes", ...}) or None;
    # it outranks the judge (openclaw.control.feedback).
    feedback: dict[str, Any] | None = None

    def validate(self) -> None:
        if not isinstance(self.session_id, str) or not self.session_id:
            raise RecordError("session_id must be a non-empty string")
        if "\x00" in self.session_id:
            raise RecordError("session_id must not contain NUL")
        if not isinstance(self.user_id, str) or not self.user_id:
            raise RecordError("user_id must be a non-empty string")
        if self.turn_type not in TURN_TYPES:
            raise RecordError(f"turn_type must be one of {TURN_TYPES}, got {self.turn_type!r}")
        if self.turn_index is not None and (not isinstance(self.turn_index, int) or self.turn_index < 0):
            raise RecordError("turn_index must be a non-negative int (or None: assigned by the buffer)")
        if not isinstance(self.messages, list):
            raise RecordError("messages must be a list")
        # Log-probs are 1:1 with response ids or absent; never padded (a zero is a fake signal).
        if self.response_logprobs and len(self.response_logprobs) != len(self.response_ids):
            raise RecordError(
                f"response_logprobs ({len(self.response_logprobs)}) must align 1:1 with "
                f"response_ids ({len(self.response_ids)})"
            )
        if any(not math.isfinite(x) or x > 0.0 for x in self.response_logprobs):
            raise RecordError("response_logprobs must be finite and <= 0")
        if self.trainable:
            if self.turn_type != "main":
                raise RecordError("only main turns can be trainable")
            if not self.response_ids:
                raise RecordError("a trainable turn needs response_ids")
            if not self.prompt_ids:
                raise RecordError("a trainable turn needs prompt_ids")

    @property
    def prompt_text(self) -> str:
        """The last user-visible prompt message (what the reference format calls `prompt`)."""
        for m in reversed(self.messages):
            if m.get("role") in ("user", "tool"):
                return content_text(m.get("content"))
        return ""

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def content_text(content: Any) -> str:
    """Flatten OpenAI message content (a string or a list of parts) to text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    out.append(text)
            elif isinstance(part, str):
                out.append(part)
        return "".join(out)
    return str(content)


# Token ids and log-probs are stored as packed little-endian arrays: 4 bytes per id instead of
# ~6 as JSON text, and no parse cost when a trainer reads 8k-token prompts.
def pack_ids(ids: list[int]) -> bytes:
    a = array("i", ids)
    if a.itemsize != 4:  # pragma: no cover - every platform we run on has 4-byte C int
        a = array("l", ids)
    return a.tobytes()


def _unpack(blob: bytes | None, typecode: str) -> list:
    if not blob:
        return []
    a = array(typecode)
    a.frombytes(blob)
    return a.tolist()


def unpack_ids(blob: bytes | None) -> list[int]:
    return _unpack(blob, "i")


def pack_floats(xs: list[float]) -> bytes:
    return array("d", xs).tobytes()  # float64: the engine's values round-trip exactly


def unpack_floats(blob: bytes | None) -> list[float]:
    return _unpack(blob, "d")
