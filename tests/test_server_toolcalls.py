"""Tool calls end to end: a tiny model is trained (overfit, seconds on CPU) to answer one prompt
with a Hermes `<tool_call>` block, so a real model really emits it and the server must parse it
from real generated tokens, streaming included. The prompt it is trained on is rendered by the
server's own code, so it is exactly what the server sends the model."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest
from slime.utils.plugins import load_plugin_module

from openclaw.server import EngineConfig, ServerConfig, create_app, serve_in_background

_overfit = load_plugin_module(str(Path(__file__).resolve().parent / "helpers" / "overfit_model.py"))

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
ASK = [{"role": "user", "content": "What's the weather in Paris?"}]
REPLY = 'I will check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'


@pytest.fixture(scope="module")
def toolcall_model(tiny_model_path) -> Path:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    pair = (_overfit.rendered_prompt(tok, ASK, [WEATHER]), tok.encode(REPLY, add_special_tokens=False))
    return _overfit.overfit_model(tiny_model_path, "tiny-toolcall", [pair], max_steps=200)


@pytest.fixture(scope="module")
def client(toolcall_model):
    cfg = ServerConfig(engine=EngineConfig(model_path=str(toolcall_model)))
    with serve_in_background(create_app(cfg)) as srv:
        yield openai.OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=0)


def ask(client, **kw):
    args = dict(model="m", messages=ASK, tools=[WEATHER], temperature=0, max_tokens=48)
    args.update(kw)
    return client.chat.completions.create(**args)


def test_model_emitted_tool_call_is_parsed(client):
    r = ask(client)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "I will check."
    (call,) = choice.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}


def test_tool_call_streaming_does_not_leak_markup(client):
    chunks = list(ask(client, stream=True))
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "I will check." and "<tool" not in content
    calls = [tc for c in chunks if c.choices and c.choices[0].delta.tool_calls for tc in c.choices[0].delta.tool_calls]
    assert len(calls) == 1 and calls[0].index == 0 and calls[0].id.startswith("call_")
    assert calls[0].function.name == "get_weather" and json.loads(calls[0].function.arguments) == {"city": "Paris"}
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]


def test_tool_call_with_stream_helper(client):
    with client.chat.completions.stream(model="m", messages=ASK, tools=[WEATHER], temperature=0,
                                        max_tokens=48) as stream:
        final = stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}


def test_tool_choice_none_and_tool_result_round_trip(client):
    # Without tools in the prompt the model is off its training prompt: whatever it says, nothing
    # is parsed as a call.
    r = ask(client, tool_choice="none", max_tokens=8)
    assert r.choices[0].message.tool_calls is None and r.choices[0].finish_reason != "tool_calls"
    first = ask(client).choices[0].message
    history = ASK + [
        {"role": "assistant", "content": first.content,
         "tool_calls": [tc.model_dump() for tc in first.tool_calls]},
        {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": '{"temp_c": 21, "sky": "clear"}'},
    ]
    r2 = ask(client, messages=history, max_tokens=4)
    assert r2.usage.prompt_tokens > ask(client, max_tokens=1).usage.prompt_tokens + 20


def test_named_tool_choice_forces_the_call(client):
    other = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
    r = ask(client, tools=[WEATHER, other], tool_choice={"type": "function", "function": {"name": "get_time"}},
            max_tokens=12)
    (call,) = r.choices[0].message.tool_calls
    assert call.function.name == "get_time" and r.choices[0].finish_reason == "tool_calls"
    assert r.choices[0].message.content is None
    chunks = list(ask(client, tools=[WEATHER, other], max_tokens=12, stream=True,
                      tool_choice={"type": "function", "function": {"name": "get_time"}}))
    assert not any(c.choices[0].delta.content for c in chunks if c.choices)
    calls = [tc for c in chunks if c.choices and c.choices[0].delta.tool_calls for tc in c.choices[0].delta.tool_calls]
    assert [tc.function.name for tc in calls] == ["get_time"]
