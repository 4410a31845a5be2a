"""Hint parsing and acceptance for on-policy distillation (OPD).

A hint vote is one judge completion: an accept/reject verdict (`\\boxed{1}` / `\\boxed{-1}`) and
optionally a hint between `[HINT_START]` and `[HINT_END]`. A hint is accepted only when a strict
majority of ALL votes accept with a hint of at least `min_chars` characters; the longest such
hint is kept (longer hints carry more of the feedback).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from openclaw.judge.prompts import HINT_END, HINT_START
from openclaw.judge.votes import parse_verdict

DEFAULT_MIN_HINT_CHARS = 10
MAX_HINT_CHARS = 600
_HINT_RE = re.compile(re.escape(HINT_START) + r"(.*?)" + re.escape(HINT_END), re.DOTALL)


@dataclass(frozen=True)
class HintVote:
    accept: bool | None  # None: unparseable completion
    hint: str | None


@dataclass(frozen=True)
class HintResult:
    hint: str | None  # the accepted hint, None when rejected
    votes: list[HintVote]
    n_accept: int
    reason: str  # "accepted" | "no_majority" | "too_short" | "no_votes"


def parse_hint_vote(text: str | None) -> HintVote:
    """One completion -> a vote. A hint without a box counts as accepting (the judge wrote one)."""
    text = text or ""
    matches = _HINT_RE.findall(text)
    hint = " ".join(matches[-1].split()) if matches else None
    verdict = parse_verdict(text)
    if verdict == 1:
        accept: bool | None = True
    elif verdict in (-1, 0):
        accept = False
    else:
        accept = True if hint else None
    return HintVote(accept=accept, hint=hint or None)


def aggregate_hints(votes: list[HintVote], min_chars: int = DEFAULT_MIN_HINT_CHARS) -> HintResult:
    if not votes:
        return HintResult(None, [], 0, "no_votes")
    accepting = [v for v in votes if v.accept and v.hint and len(v.hint) >= min_chars]
    n_accept = sum(1 for v in votes if v.accept)
    if 2 * n_accept <= len(votes):
        return HintResult(None, list(votes), n_accept, "no_majority")
    if 2 * len(accepting) <= len(votes):
        return HintResult(None, list(votes), n_accept, "too_short")
    best = max(accepting, key=lambda v: len(v.hint or ""))
    return HintResult((best.hint or "")[:MAX_HINT_CHARS], list(votes), n_accept, "accepted")
