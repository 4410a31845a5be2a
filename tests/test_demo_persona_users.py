"""Simulated users of a persona over real HTTP (the tiny model behind the OpenAI server): each
session gets its start number (1, 2, ... across batches, distinct even with concurrent users),
and the user's answer is the persona's verdict on the live reply. One check needs a server that
closes a connection at a chosen moment (a race with uvicorn's keep-alive timer cannot be timed in a
test): a stdlib HTTP server that does exactly that."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

from openclaw.demo.metrics import sessions_metric
from openclaw.demo.personas import PromptItem, load_persona
from openclaw.demo.users import SimulatedUsers
from openclaw.server import EngineConfig, ServerConfig, create_app, serve_in_background

_json_http = load_plugin_module(str(Path(__file__).resolve().parent / "helpers" / "json_http.py"))


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


class _OneRequestPerConnection(_json_http.JsonHandler):
    """Answers the first request of a connection and keeps it open, then drops the next request
    on it unanswered: what a client sees when a server closes an idle keep-alive connection just
    as the client's next request goes out."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.read_body()
        self.send_json({"choices": [{"message": {"role": "assistant", "content": "Rain falls from clouds."}}]})

    def handle(self) -> None:
        self.handle_one_request()
        self.rfile.readline()  # a second request on this connection: closed without an answer


def test_users_survive_a_server_closing_idle_connections(http_server: Callable[[type], str]) -> None:
    """Each session's two requests (question, then the feedback that ends it) and the next session's
    go out one after another; none may ride a connection the server has finished with."""
    prompts = [PromptItem("What causes rain?", ("cloud",))]
    users = SimulatedUsers(http_server(_OneRequestPerConnection), load_persona("brief"), prompts, seed=0, max_tokens=4)
    got = users.drive(3, concurrency=1)
    assert [i.reply for i in got] == ["Rain falls from clouds."] * 3
    assert all(i.accepted for i in got)  # 4 words, on topic: the brief persona accepts it
