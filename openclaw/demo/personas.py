"""Simulated users whose preferences are verifiable instructions.

A persona is data (`data/personas/<name>.json`, or any JSON file a user writes): what the user
would tell the agent (`preference`), the IFEval instructions that decide whether a reply meets
it (ids and arguments as in IFEval's own data, checked by lm-eval's checkers: `ifeval.py`), and
how the user talks back (several phrasings per verdict, some implicit, some graded by how badly
the reply missed). The persona's verdict is the ground truth for measuring learning; it never
sees the judge. Acceptance also demands that the reply still answers the question (reference
facts per prompt), so a policy that learns to say nonsense in the right form is scored as a
failure, not a success.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openclaw.demo import ifeval

DATA_DIR = Path(__file__).parent / "data"
PERSONA_DIR = DATA_DIR / "personas"
DEFAULT_PERSONA = "brief"
MIN_PHRASINGS = 3  # per verdict: never one fixed template the judge could key on


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


# How badly a reply missed, for graded feedback only (acceptance is IFEval's checkers alone).
MEASURES = {
    "words": lambda text: len(re.findall(r"\w+", text)),  # IFEval's count_words
    "commas": lambda text: text.count(","),
    "capitals": lambda text: sum(c.isupper() for c in text),
    "sentences": lambda text: len(re.findall(r"[.!?]+(?:\s|$)", text.strip() + " ")),
    "lines": lambda text: len([ln for ln in text.splitlines() if ln.strip()]),
}


class PersonaError(ValueError):
    """A persona that cannot be loaded; the message names the file and the field."""


@dataclass(frozen=True)
class MissedFeedback:
    """What the user says when one instruction is not followed: `mild` phrasings, and `severe` ones
    when `measure(reply) > severe_above` (e.g. 150 words where 25 were asked)."""

    mild: tuple[str, ...]
    severe: tuple[str, ...] = ()
    measure: str | None = None
    severe_above: float | None = None

    def pick(self, reply: str, rng: random.Random) -> str:
        if self.measure is not None and self.severe_above is not None and MEASURES[self.measure](reply) > self.severe_above:
            return rng.choice(self.severe)
        return rng.choice(self.mild)


@dataclass(frozen=True)
class Feedback:
    accepted: tuple[str, ...]
    off_topic: tuple[str, ...]
    missed: tuple[tuple[str, MissedFeedback], ...]  # (instruction id, phrasings), in the persona's order

    def for_missed(self, instruction_id: str) -> MissedFeedback:
        return dict(self.missed)[instruction_id]


@dataclass(frozen=True)
class Persona:
    """A simulated user. `judge` is its verdict on one reply; `follows` its instructions alone."""

    name: str
    preference: str  # what the user would tell the agent
    instructions: tuple[ifeval.Instruction, ...]
    feedback: Feedback = field(repr=False)
    source: str = ""  # the file it was loaded from
    notes: str = ""

    def follows(self, reply: str) -> list[bool]:
        """Per instruction, IFEval's strict verdict."""
        return ifeval.follows(self.instructions, reply)

    def judge(self, reply: str, item: PromptItem, rng: random.Random) -> Verdict:
        topical = on_topic(reply, item)
        per = self.follows(reply)
        met = all(per)
        if met and topical:
            text = rng.choice(self.feedback.accepted)
        elif not topical:
            text = rng.choice(self.feedback.off_topic)
        else:
            # The user complains about the first thing that is wrong, the way people do.
            missed = next(ins.id for ins, ok in zip(self.instructions, per, strict=True) if not ok)
            text = self.feedback.for_missed(missed).pick(reply, rng)
        return Verdict(met and topical, topical, met, text)

    def to_dict(self) -> dict[str, Any]:
        """What results.json records about the persona."""
        return {"name": self.name, "preference": self.preference, "source": self.source,
                "instructions": [{"id": i.id, "kwargs": i.kwargs} for i in self.instructions]}


# --- loading ---------------------------------------------------------------------------------

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


def _phrasings(value: Any, where: str, src: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise PersonaError(f"persona file {src}: field '{where}' must be a list of non-empty strings")
    if len(set(value)) < MIN_PHRASINGS:
        raise PersonaError(f"persona file {src}: field '{where}' needs at least {MIN_PHRASINGS} distinct phrasings "
                           f"(got {len(set(value))}): a fixed template is something the judge could key on")
    return tuple(value)


def _missed(value: Any, where: str, src: str) -> MissedFeedback:
    if isinstance(value, list):
        return MissedFeedback(_phrasings(value, where, src))
    if not isinstance(value, dict):
        raise PersonaError(f"persona file {src}: field '{where}' must be a list of phrasings or an object with "
                           "'mild', 'severe', 'measure', 'severe_above'")
    unknown = set(value) - {"mild", "severe", "measure", "severe_above"}
    if unknown:
        raise PersonaError(f"persona file {src}: field '{where}' has unknown key(s) {sorted(unknown)}")
    for key in ("mild", "severe", "measure", "severe_above"):
        if key not in value:
            raise PersonaError(f"persona file {src}: field '{where}.{key}' is missing")
    if value["measure"] not in MEASURES:
        raise PersonaError(f"persona file {src}: field '{where}.measure' must be one of {sorted(MEASURES)}, "
                           f"got {value['measure']!r}")
    if not isinstance(value["severe_above"], (int, float)) or isinstance(value["severe_above"], bool):
        raise PersonaError(f"persona file {src}: field '{where}.severe_above' must be a number")
    return MissedFeedback(_phrasings(value["mild"], f"{where}.mild", src),
                          _phrasings(value["severe"], f"{where}.severe", src),
                          value["measure"], float(value["severe_above"]))


def persona_from_dict(data: Any, src: str) -> Persona:
    """Validate a persona's JSON object; PersonaError names `src` and the offending field."""
    if not isinstance(data, dict):
        raise PersonaError(f"persona file {src}: must hold a JSON object")
    unknown = set(data) - {"name", "preference", "instructions", "feedback", "notes"}
    if unknown:
        raise PersonaError(f"persona file {src}: unknown field(s) {sorted(unknown)}")
    for key in ("name", "preference", "instructions", "feedback"):
        if key not in data:
            raise PersonaError(f"persona file {src}: field '{key}' is missing")
    name = data["name"]
    if not isinstance(name, str) or not _NAME.match(name):
        raise PersonaError(f"persona file {src}: field 'name' must be lowercase letters, digits, '-' or '_' "
                           f"(it names output folders), got {name!r}")
    if not isinstance(data["preference"], str) or not data["preference"].strip():
        raise PersonaError(f"persona file {src}: field 'preference' must be a non-empty string")
    raw = data["instructions"]
    if not isinstance(raw, list) or not raw:
        raise PersonaError(f"persona file {src}: field 'instructions' must be a non-empty list")
    instructions = []
    for k, entry in enumerate(raw):
        where = f"instructions[{k}]"
        if not isinstance(entry, dict) or set(entry) - {"id", "kwargs"} or "id" not in entry:
            raise PersonaError(f"persona file {src}: field '{where}' must be an object with 'id' and 'kwargs'")
        kwargs = entry.get("kwargs", {})
        if not isinstance(kwargs, dict):
            raise PersonaError(f"persona file {src}: field '{where}.kwargs' must be an object")
        try:
            instructions.append(ifeval.validate(entry["id"], kwargs))
        except ifeval.InstructionError as exc:
            raise PersonaError(f"persona file {src}: field '{where}': {exc}") from None
    ids = [i.id for i in instructions]
    if len(set(ids)) != len(ids):
        raise PersonaError(f"persona file {src}: field 'instructions' lists an instruction id twice")
    fb = data["feedback"]
    if not isinstance(fb, dict):
        raise PersonaError(f"persona file {src}: field 'feedback' must be an object")
    for key in ("accepted", "off_topic", "missed"):
        if key not in fb:
            raise PersonaError(f"persona file {src}: field 'feedback.{key}' is missing")
    if set(fb) - {"accepted", "off_topic", "missed"}:
        raise PersonaError(f"persona file {src}: field 'feedback' has unknown key(s) "
                           f"{sorted(set(fb) - {'accepted', 'off_topic', 'missed'})}")
    accepted = _phrasings(fb["accepted"], "feedback.accepted", src)
    off_topic = _phrasings(fb["off_topic"], "feedback.off_topic", src)
    if not isinstance(fb["missed"], dict):
        raise PersonaError(f"persona file {src}: field 'feedback.missed' must map each instruction id to phrasings")
    if set(fb["missed"]) != set(ids):
        raise PersonaError(f"persona file {src}: field 'feedback.missed' must have exactly one entry per instruction "
                           f"id: missing {sorted(set(ids) - set(fb['missed']))}, "
                           f"unknown {sorted(set(fb['missed']) - set(ids))}")
    missed = tuple((i, _missed(fb["missed"][i], f"feedback.missed.{i}", src)) for i in ids)
    every_missed = {p for _, m in missed for p in m.mild + m.severe}
    if every_missed & set(accepted):
        raise PersonaError(f"persona file {src}: field 'feedback.accepted' shares phrasings with 'feedback.missed'")
    notes = data.get("notes", "")
    if not isinstance(notes, str):
        raise PersonaError(f"persona file {src}: field 'notes' must be a string")
    return Persona(name, data["preference"].strip(), tuple(instructions), Feedback(accepted, off_topic, missed),
                   src, notes)


def persona_names() -> list[str]:
    """The shipped personas, the default first."""
    names = sorted(p.stem for p in PERSONA_DIR.glob("*.json"))
    return [DEFAULT_PERSONA] + [n for n in names if n != DEFAULT_PERSONA]


def load_persona(name_or_path: str) -> Persona:
    """A shipped persona by name, or a user's persona JSON file by path."""
    if _NAME.match(name_or_path) and (PERSONA_DIR / f"{name_or_path}.json").is_file():
        path = PERSONA_DIR / f"{name_or_path}.json"
    else:
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise PersonaError(f"unknown persona {name_or_path!r}: not a shipped persona "
                               f"({', '.join(persona_names())}) and not a persona file")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise PersonaError(f"persona file {path}: not valid JSON: {exc}") from None
    return persona_from_dict(data, str(path))


class _ShippedPersonas(Mapping[str, Persona]):
    """name -> Persona for the shipped personas, loaded on first use (the old `PERSONAS` dict)."""

    def __getitem__(self, name: str) -> Persona:
        if name not in persona_names():
            raise KeyError(name)
        return load_persona(name)

    def __iter__(self) -> Iterator[str]:
        return iter(persona_names())

    def __len__(self) -> int:
        return len(persona_names())


PERSONAS: Mapping[str, Persona] = _ShippedPersonas()

__all__ = ["DEFAULT_PERSONA", "PERSONAS", "Persona", "PersonaError", "PromptItem", "Verdict", "load_persona",
           "load_prompts", "on_topic", "persona_from_dict", "persona_names", "words"]
