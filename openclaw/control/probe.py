"""The capability probe: fixed general-knowledge questions with their accepted answers.

The promotion gate's canary asks them of every candidate model (general knowledge must survive
training); the main job and the evaluation suite report the same accuracy.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

PROBE_FILE = Path(__file__).resolve().parent / "data" / "capability_probe.jsonl"


@dataclass(frozen=True)
class ProbeItem:
    question: str
    answers: tuple[str, ...]


def load_probe(path: Path = PROBE_FILE) -> list[ProbeItem]:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return [ProbeItem(r["question"], tuple(a.lower() for a in r["answers"])) for r in rows]


def probe_correct(reply: str, item: ProbeItem) -> bool:
    """An expected answer appears as a whole word (a plural allowed): "0" is not found in
    "-18.0000000000001", nor "lion" in "million" or "ice" in "device"."""
    low = reply.lower()
    return any(re.search(rf"(?<![a-z0-9]){re.escape(a)}s?(?![a-z0-9])", low) for a in item.answers)
