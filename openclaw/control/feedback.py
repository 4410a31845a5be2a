"""Explicit feedback: a user's rating of one served turn, and how it outranks the judge.

The rule (documented in README.md, applied by the bridge through `effective_signal`):
  * a rating is a reward in [-1, 1]: `up` = +1, `down` = -1, stars 1..5 linearly
    (1 -> -1, 2 -> -0.5, 3 -> 0, 4 -> +0.5, 5 -> +1);
  * when a turn has both, the explicit rating is its reward and the judge's score is ignored;
  * a non-empty comment is the turn's OPD hint (it replaces the judge's hint);
  * the last rating of a turn wins; each replacement is counted (`changes`, counter
    `feedback_changed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openclaw.buffer import TrajectoryBuffer
from openclaw.control.viewer import ADMIN_VIEW, Viewer

THUMBS = {"up": 1.0, "down": -1.0}
MAX_COMMENT_CHARS = 4000  # a hint is a sentence or two; a page of text is a mistake, not a hint


class FeedbackError(ValueError):
    """A rating or target the caller got wrong; `param` names the field, `status` the HTTP status."""

    def __init__(self, message: str, param: str | None, status: int = 400, code: str = "invalid_value") -> None:
        super().__init__(message)
        self.param = param
        self.status = status
        self.code = code


def rating_score(rating: Any) -> tuple[str, float]:
    """(canonical rating, reward) for `up`/`down` or an integer 1..5 (also as a decimal string)."""
    if isinstance(rating, str) and rating.strip().lower() in THUMBS:
        key = rating.strip().lower()
        return key, THUMBS[key]
    if isinstance(rating, bool):
        raise FeedbackError("'rating' must be 'up', 'down' or an integer 1-5, not a boolean", "rating")
    try:
        stars = int(rating)
    except (TypeError, ValueError):
        stars = None
    if stars is None or str(stars) != str(rating).strip() or not 1 <= stars <= 5:
        raise FeedbackError(f"'rating' must be 'up', 'down' or an integer 1-5, got {rating!r}", "rating")
    return str(stars), (stars - 3) / 2.0


@dataclass(frozen=True)
class FeedbackTarget:
    """Which turn: a chat completion id, or a session id + turn index."""

    completion_id: str | None = None
    session_id: str | None = None
    turn_index: int | None = None

    def describe(self) -> str:
        if self.completion_id is not None:
            return f"completion '{self.completion_id}'"
        return f"turn {self.turn_index} of session '{self.session_id}'"


def submit_feedback(buffer: TrajectoryBuffer, target: FeedbackTarget, rating: Any,
                    comment: str | None = None, viewer: Viewer = ADMIN_VIEW) -> dict[str, Any]:
    """Validate, find the turn, store the rating durably. Returns the stored row (with
    `changes`, its session id as `viewer` names it). FeedbackError 400 for a bad
    rating/comment/target, 404 for an unknown turn or one of another user's sessions (the same
    answer: `viewer` learns nothing of other users' turns)."""
    canonical, score = rating_score(rating)
    if comment is not None:
        if not isinstance(comment, str):
            raise FeedbackError("'comment' must be a string", "comment")
        comment = comment.strip() or None
        if comment is not None and len(comment) > MAX_COMMENT_CHARS:
            raise FeedbackError(f"'comment' is longer than {MAX_COMMENT_CHARS} characters", "comment")
    if target.completion_id is not None:
        turn = buffer.find_turn(request_id=target.completion_id)
        param = "id"
    elif target.session_id is not None and target.turn_index is not None:
        turn = buffer.find_turn(session_id=viewer.stored(target.session_id), turn_index=target.turn_index)
        param = "session_id"
    else:
        raise FeedbackError("name the turn: 'id' (a chat completion id), or 'session_id' and 'turn_index'", "id")
    if turn is None or not viewer.owns(turn[1]):
        raise FeedbackError(f"No stored turn for {target.describe()} (never served with the RL intercept on, "
                            "opted out, or purged).", param, status=404, code="turn_not_found")
    row = buffer.put_feedback(turn, canonical, score, comment)
    return {**row, "session_id": viewer.shown(row["session_id"])}


@dataclass(frozen=True)
class EffectiveSignal:
    """A turn's training signal after the precedence rule: reward, hint, and where each came from."""

    score: float
    hint: str | None
    score_source: str  # "feedback" | "judge"
    hint_source: str | None  # "feedback" | "judge" | None


def effective_signal(judge_score: float, judge_hint: str | None, feedback: dict[str, Any] | None) -> EffectiveSignal:
    """The precedence rule of the module docstring."""
    if not feedback:
        return EffectiveSignal(judge_score, judge_hint, "judge", "judge" if judge_hint else None)
    comment = feedback.get("comment")
    if comment:
        return EffectiveSignal(float(feedback["score"]), comment, "feedback", "feedback")
    return EffectiveSignal(float(feedback["score"]), judge_hint, "feedback", "judge" if judge_hint else None)
