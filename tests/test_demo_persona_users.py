"""Simulated users of a persona over real HTTP (the tiny model behind the OpenAI server): each
session gets its start number (1, 2, ... across batches, distinct even with concurrent users),
and the user's answer is the persona's verdict on the live reply."""

from __future__ import annotations

import random

import pytest

from openclaw.demo.metrics import sessions_metric
from openclaw.demo.personas import PromptItem, load_persona
from openclaw.demo.users import SimulatedUsers
from openclaw.server import EngineConfig, ServerConfig, create_app, serve_in_background


@pytest.fixture(scope="module")
def server(tiny_model_path):
    with serve_in_background(create_app(ServerConfig(engine=EngineConfig(model_path=str(tiny_model_path))))) as srv:
        yield srv


def test_sessions_are_numbered_in_start_order_and_judged_by_the_persona(server) -> None:
    persona = load_persona("lowercase")
    prompts = [PromptItem("Why is the sky blue?", ("scatter",)), PromptItem("What causes rain?", ("cloud",))]
    users = SimulatedUsers(server.base_url, persona, prompts, seed=3, max_tokens=4)
    got = users.drive(4, concurrency=3) + users.drive(2, concurrency=2)
    assert sorted(i.started for i in got) == list(range(1, 7))
    assert [i.started for i in got[4:]] == [5, 6]  # a later batch starts after the earlier one
    fb = persona.feedback
    phrasings = set(fb.accepted) | set(fb.off_topic) | {p for _, m in fb.missed for p in m.mild + m.severe}
    for i in got:
        item = next(p for p in prompts if p.prompt == i.prompt)
        again = persona.judge(i.reply, item, random.Random(0))
        assert (i.accepted, i.on_topic, i.meets_preference) == (again.accepted, again.on_topic, again.meets_preference)
        assert i.feedback in phrasings
        assert i.record() == {"n": i.started, "accepted": i.accepted, "meets_preference": i.meets_preference,
                              "on_topic": i.on_topic}
    assert sessions_metric([i.record() for i in got]).sessions == 6
