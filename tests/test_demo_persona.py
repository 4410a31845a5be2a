"""Personas from verifiable instructions: every shipped persona loads and is decided by lm-eval's
own IFEval checkers (a compliant reply accepted, a violating one rejected), the on-topic rule
still gates acceptance, feedback varies and differs between verdicts, a user's persona file
loads and a broken one names its field, and `python -m openclaw.demo --persona` checks its
argument."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from openclaw.demo import ifeval
from openclaw.demo.personas import (
    DEFAULT_PERSONA,
    PERSONAS,
    PersonaError,
    PromptItem,
    load_persona,
    persona_names,
)

REPO = Path(__file__).resolve().parents[1]
SKY = PromptItem("Why is the sky blue?", ("scatter", "wavelength"))

# persona -> (a reply that follows its instructions, one that does not); both on topic.
REPLIES = {
    "brief": ("Air molecules scatter blue light more than red light.",
              "Sunlight is made of many colors. When it enters the atmosphere, air molecules scatter the short blue "
              "wavelengths much more strongly than the longer red ones, so blue light reaches us from every part "
              "of the sky."),
    "one_sentence": ("Dr. Rayleigh showed that air molecules scatter short blue wavelengths more than red ones.",
                     "Air molecules scatter blue light. Red light passes through."),
    "no_commas": ("Air molecules scatter blue light more than red light. So the sky looks blue.",
                  "Air molecules scatter blue light, so the sky looks blue."),
    "lowercase": ("the tiny molecules of air scatter blue sunlight much more strongly than red light, so we see "
                  "blue coming from every direction of the sky.",
                  "The tiny molecules of air scatter blue sunlight much more strongly than red light, so we see "
                  "blue coming from every direction of the sky."),
    "because": ("The sky looks blue because air molecules scatter blue light more than red light.",
                "Air molecules scatter blue light more than red light."),
    "no_vague": ("Air molecules scatter blue light more than red light, so the sky looks blue.",
                 "Air molecules scatter blue light. This is why the sky looks blue."),
    "signoff": ("Air molecules scatter blue light more than red light. Hope this helps!",
                "Air molecules scatter blue light more than red light. Hope this helps! Bye."),
    "bullets": ("* Sunlight holds every color.\n* Air molecules scatter short blue wavelengths most.\n"
                "* So blue light reaches us from all directions.",
                "* Sunlight holds every color.\n* Air molecules scatter short blue wavelengths most."),
}


def test_shipped_personas_are_many_and_of_different_kinds() -> None:
    names = persona_names()
    assert names[0] == DEFAULT_PERSONA == "brief" and len(names) >= 6
    assert set(names) == set(REPLIES)  # every shipped persona is exercised below
    kinds = {i.id for n in names for i in load_persona(n).instructions}
    assert len(kinds) >= 6 and kinds <= set(ifeval.instruction_ids())
    assert list(PERSONAS) == names and PERSONAS["brief"].name == "brief"
    default = load_persona("brief")
    assert [(i.id, i.kwargs) for i in default.instructions] == [
        ("length_constraints:number_words", {"num_words": 26, "relation": "less than"})]


@pytest.mark.parametrize("name", sorted(REPLIES))
def test_ifeval_checkers_decide_the_preference(name: str) -> None:
    persona, rng = load_persona(name), random.Random(0)
    good, bad = REPLIES[name]
    ok = persona.judge(good, SKY, rng)
    assert ok.accepted and ok.meets_preference and ok.on_topic, (name, persona.follows(good))
    miss = persona.judge(bad, SKY, rng)
    assert not miss.accepted and not miss.meets_preference and miss.on_topic, (name, persona.follows(bad))
    assert ok.feedback in persona.feedback.accepted and miss.feedback not in persona.feedback.accepted
    # The on-topic rule still gates acceptance: the same form without the reference facts is refused.
    off = persona.judge(good, PromptItem("What causes rain?", ("cloud", "condens")), rng)
    assert off.meets_preference and not off.on_topic and not off.accepted
    assert off.feedback in persona.feedback.off_topic


def test_the_checkers_are_lm_evals_own() -> None:
    from lm_eval.tasks.ifeval import instructions_registry

    persona = load_persona("no_commas")
    assert instructions_registry.INSTRUCTION_DICT["punctuation:no_comma"].__module__ == "lm_eval.tasks.ifeval.instructions"
    assert persona.follows("no commas here") == [True] and persona.follows("one, two") == [False]
    assert persona.follows("") == [False]  # IFEval's strict rule: an empty reply follows nothing
    # Sentences are counted with NLTK's Punkt English model, found offline (no download).
    assert ifeval.ensure_punkt().is_dir()
    one = load_persona("one_sentence")
    assert one.follows("Mr. Smith met Dr. Jones at 5 p.m. on Main St. yesterday.") == [True]


def test_feedback_is_varied_graded_and_differs_by_verdict() -> None:
    persona, rng = load_persona("brief"), random.Random(1)
    accepted = {persona.judge(REPLIES["brief"][0], SKY, rng).feedback for _ in range(200)}
    mild = {persona.judge("Air molecules scatter blue light. " * 6, SKY, rng).feedback for _ in range(200)}  # 30 words
    severe = {persona.judge("Air molecules scatter blue light. " * 30, SKY, rng).feedback for _ in range(200)}
    assert len(accepted) >= 3 and len(mild) >= 3 and len(severe) >= 3
    assert not accepted & (mild | severe) and not mild & severe  # a 150-word reply is told off harder
    # brief's complaints stay explicit (implicit ones stopped combine from learning: bench/HISTORY.md);
    # the other personas carry implicit ones
    caps = "Air Molecules Scatter Blue Light More Than Red Light In The Sky Today."
    shouted = {load_persona("lowercase").judge(caps, SKY, rng).feedback for _ in range(200)}
    assert "why are you shouting? all lowercase, please." in shouted
    for name in persona_names():
        p = load_persona(name)
        said = {p.judge(REPLIES[name][1], SKY, rng).feedback for _ in range(200)}
        assert len(said) >= 3, name


def _persona_file(tmp_path: Path, **changes: object) -> Path:
    data = json.loads((REPO / "openclaw/demo/data/personas/brief.json").read_text())
    data.update(name="mine", preference="Short and sweet, under 10 words.")
    data["instructions"][0]["kwargs"]["num_words"] = 11
    data.update(changes)
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(data))
    return path


def test_a_users_persona_file_loads(tmp_path: Path) -> None:
    persona = load_persona(str(_persona_file(tmp_path)))
    assert persona.name == "mine" and persona.source == str(tmp_path / "mine.json")
    assert persona.judge("Air molecules scatter blue light.", SKY, random.Random(0)).accepted
    assert not persona.judge("Air molecules scatter blue light much more strongly than red light does today.", SKY,
                             random.Random(0)).accepted  # 13 words: over this user's limit


@pytest.mark.parametrize("change, message", [
    ({"instructions": [{"id": "length_constraints:number_wordz", "kwargs": {}}]},
     "field 'instructions[0]': unknown IFEval instruction id 'length_constraints:number_wordz'"),
    ({"instructions": [{"id": "length_constraints:number_words", "kwargs": {"num_words": 5}}]},
     "field 'instructions[0]': length_constraints:number_words: missing argument(s) ['relation']"),
    ({"instructions": [{"id": "length_constraints:number_words",
                        "kwargs": {"num_words": 5, "relation": "less than", "max": 3}}]},
     "unknown argument(s) ['max']"),
    ({"instructions": [{"id": "length_constraints:number_words", "kwargs": {"num_words": 5, "relation": "about"}}]},
     "field 'instructions[0]'"),
    ({"feedback": {"accepted": ["Thanks."], "off_topic": [], "missed": {}}},
     "field 'feedback.accepted' needs at least 3 distinct phrasings"),
    ({"name": "Has Spaces"}, "field 'name'"),
    ({"preferences": "typo"}, "unknown field(s) ['preferences']"),
])
def test_a_broken_persona_file_names_the_field(tmp_path: Path, change: dict, message: str) -> None:
    path = _persona_file(tmp_path, **change)
    with pytest.raises(PersonaError) as err:
        load_persona(str(path))
    assert str(path) in str(err.value) and message in str(err.value)


def test_missed_feedback_must_cover_every_instruction(tmp_path: Path) -> None:
    data = json.loads((REPO / "openclaw/demo/data/personas/signoff.json").read_text())
    del data["feedback"]["missed"]["startend:end_checker"]
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    with pytest.raises(PersonaError, match=r"field 'feedback.missed' .*missing \['startend:end_checker'\]"):
        load_persona(str(path))


def test_unknown_persona_is_a_clear_error() -> None:
    with pytest.raises(PersonaError, match="unknown persona 'nobody': not a shipped persona \\(brief, "):
        load_persona("nobody")


def _demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openclaw.demo", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def test_demo_cli_persona_argument(tmp_path: Path) -> None:
    helped = _demo("--persona", str(_persona_file(tmp_path)), "--help")
    assert helped.returncode == 0 and "--persona" in helped.stdout and "one_sentence" in helped.stdout
    bad = _demo("--persona", "nobody", "--interactions", "1")
    assert bad.returncode == 2 and "--persona: unknown persona 'nobody'" in bad.stderr
    broken = _persona_file(tmp_path, feedback={"accepted": ["x"]})
    res = _demo("--persona", str(broken), "--interactions", "1")
    assert res.returncode == 2 and "field 'feedback" in res.stderr and str(broken) in res.stderr
