"""The seam between the OpenAI server and the RL intercept.

The server parses the RL control fields (headers first, then the same keys in the JSON body,
which are stripped before the request is validated and generated), runs the generation, then
awaits `TurnObserver.on_turn` *before* the response is delivered (non-streaming: before the
JSON body; streaming: before the final chunk and `[DONE]`), so a reply the client sees always
has a durable record. Without `--enable-rl-intercept` the observer is None.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

# Header name -> body key. Header wins when both are present.
RL_CONTROL_FIELDS: dict[str, str] = {
    "x-session-id": "session_id",
    "x-turn-type": "turn_type",
    "x-session-done": "session_done",
    "x-rl-opt-out": "rl_opt_out",
}
# Body spellings accepted for each key (stripped from the body before validation).
RL_BODY_ALIASES: dict[str, tuple[str, ...]] = {
    "session_id": ("session_id", "x_session_id", "X-Session-Id"),
    "turn_type": ("turn_type", "x_turn_type", "X-Turn-Type"),
    "session_done": ("session_done", "x_session_done", "X-Session-Done"),
    "rl_opt_out": ("rl_opt_out", "x_rl_opt_out", "X-RL-Opt-Out"),
}


@dataclass
class RLControl:
    session_id: str | None = None
    turn_type: str | None = None  # "main" | "side" | None (decided by the intercept)
    session_done: bool = False
    opt_out: bool = False
    source: dict[str, str] = field(default_factory=dict)  # key -> "header" | "body"
    # Who sent it (the request's Identity, openclaw.httpapi.identity): sessions are per user.
    user_id: str = "default"


@dataclass
class CompletedTurn:
    request_id: str
    control: RLControl
    messages: list[dict[str, Any]]  # as received, after content flattening and role mapping
    tools: list[dict[str, Any]] | None
    served_model: str
    prompt_ids: list[int]
    output_ids: list[int]
    output_logprobs: list[float]  # 1:1 with output_ids, always computed when an observer is set
    text: str  # raw decoded model output
    content: str | None  # assistant content after reasoning and tool-call extraction
    tool_calls: list[dict[str, Any]] | None  # OpenAI shape
    finish_reason: str  # OpenAI finish_reason
    weight_version: int
    created_at: float
    finished_at: float
    metadata: dict[str, Any] = field(default_factory=dict)  # merged into the record's metadata (e.g. context_fit)
    # --reasoning-parser: the think block's text (None: the output had none) and the range of
    # output tokens it spans, tags included (None also when it could not be placed on the tokens).
    # `content` never holds it; `text` and the token ids always do.
    reasoning_content: str | None = None
    reasoning_span: tuple[int, int] | None = None


class TurnObserver(Protocol):
    async def on_turn(self, turn: CompletedTurn) -> None:
        """Persist the turn durably. Raising makes the server answer 503 (nothing half-stored)."""
        ...

    async def aclose(self) -> None: ...


def redact_attached_text(observer: Any, text: Any) -> Any:
    """Free text a client attaches to a stored turn later (a feedback comment) goes through the
    intercept's redaction, session memory included, before it is stored. Anything but a string is
    returned as is, for the caller's own validation to refuse."""
    redact = getattr(observer, "redact_attached_text", None)
    if redact is None or not isinstance(text, str):
        return text
    return redact(text)
