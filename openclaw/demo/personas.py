"""Simulated users with stated preferences.

Each persona has a rule that decides whether it accepts a reply, and replies in natural
language the way a person would ("too long, keep it short" / "thanks, perfect"). The rule
is the ground truth for measuring learning; it never sees the judge. It also demands that
the reply still answers the question (reference facts per prompt), so a policy that learns
to say short nonsense is scored as a failure, not a success.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = Path(__file__).parent / "data"


@dataclass(frozen=True)
class PromptItem:
    prompt: str
    facts: tuple[str, ...]  # any one of these (case-insensitive substring) shows the reply is on topic


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    on_topic: bool
    meets_preference: bool
    feedback: str  # what the simulated user says next


def load_prompts(name: str) -> list[PromptItem]:
    rows = [json.loads(line) for line in (DATA_DIR / name).read_text().splitlines() if line.strip()]
    return [PromptItem(r["prompt"], tuple(r["facts"])) for r in rows]


def words(text: str) -> int:
    return len(re.findall(r"\S+", text))


def on_topic(reply: str, item: PromptItem) -> bool:
    low = reply.lower()
    return any(fact.lower() in low for fact in item.facts)


@dataclass(frozen=True)
class BriefPersona:
    """Wants brief answers (at most `max_words` words) that still answer the question."""

    name: str = "brief"
    max_words: int = 25
    preference: str = "I like brief answers: one or two sentences, at most 25 words."

    def judge(self, reply: str, item: PromptItem, rng: random.Random) -> Verdict:
        topical = on_topic(reply, item)
        short = 0 < words(reply) <= self.max_words
        if short and topical:
            feedback = rng.choice(["Thanks, perfect.", "Great, that's exactly what I needed.",
                                   "Perfect, short and clear. Thanks!", "Nice, thank you."])
        elif not topical:
            feedback = rng.choice(["That doesn't answer my question at all. Please answer what I asked.",
                                   "No, that's off topic. I asked about something else."])
        else:
            # Phrased the way people complain; the judge (not this rule) decides what it means.
            feedback = rng.choice(["No, that's too long. I asked for a short answer: one or two sentences.",
                                   "That's not what I wanted, it's way too long. Keep it to one or two sentences.",
                                   "No, please keep it short: the answer should be one or two sentences.",
                                   "Too long, I asked you to keep it short. One or two sentences, please.",
                                   "Too long. I wanted a brief answer, under 25 words."])
        return Verdict(short and topical, topical, short, feedback)


PERSONAS = {"brief": BriefPersona()}
