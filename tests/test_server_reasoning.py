"""`--reasoning-parser`: the think block of real generated output goes to `reasoning_content`.

A random tiny model never writes `<think>`, so one is trained (overfit, seconds on CPU, cached) to
answer three prompts, rendered by the server's own code, in Qwen3's reasoning format: a think block
holding a `<tool_call>` it must not make, a think block followed by a real call, and (with a chat
template that opens the block in the prompt, as Qwen3-Thinking's does) an output holding only
`</think>`. The server then parses what the engine generated: the SmolLM2 tokenizer spells each
tag in three tokens, and the stream carries one token per chunk, so every tag arrives split
across chunks.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from slime.utils.plugins import load_plugin_module

from openclaw.server import EngineConfig, ServerConfig, create_app, serve_in_background
from openclaw.server.config import ConfigError, parse_config
from openclaw.server.reasoning import (
    REASONING_PARSERS,
    ReasoningSplitter,
    prompt_opens_think,
    reasoning_token_end,
    split_reasoning,
)

_overfit = load_plugin_module(str(Path(__file__).resolve().parent / "helpers" / "overfit_model.py"))

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'

# (messages, tools, reply the model is trained to write, thinking template?)
GREET = [{"role": "user", "content": "Say hi."}]
GREET_THOUGHT = f"The user greets me. I could call {CALL} but no."
GREET_REPLY = f"<think>\n{GREET_THOUGHT}\n</think>\n\nHello!<|im_end|>"
ASK = [{"role": "user", "content": "Weather in Paris?"}]
ASK_REPLY = f"<think>\nI need the weather.\n</think>\n\n{CALL}<|im_end|>"
PING = [{"role": "user", "content": "Ping."}]
PING_REPLY = "Pinging back.\n</think>\n\nPong!<|im_end|>"


def thinking_template(template: str) -> str:
    """The template with the generation prompt opening a think block (Qwen3-Thinking's layout)."""
    opened = template.replace("{{ '<|im_start|>assistant\n' }}", "{{ '<|im_start|>assistant\n<think>\n' }}")
    assert opened != template
    return opened


def build_reasoning_model(base: Path) -> Path:
    """The tiny model trained on the three replies (built once per machine, keyed by its data)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    thinking = AutoTokenizer.from_pretrained(base)
    thinking.chat_template = thinking_template(tok.chat_template)
    prompt = _overfit.rendered_prompt
    pairs = [(prompt(tok, GREET, [WEATHER]), tok.encode(GREET_REPLY, add_special_tokens=False)),
             (prompt(tok, ASK, [WEATHER]), tok.encode(ASK_REPLY, add_special_tokens=False)),
             (prompt(thinking, PING, None), tok.encode(PING_REPLY, add_special_tokens=False))]
    return _overfit.overfit_model(base, "tiny-reasoning", pairs, max_steps=400)


def with_thinking_template(model: Path, out: Path) -> Path:
    """A copy of `model` whose chat template opens the think block in the prompt."""
    from transformers import AutoTokenizer

    shutil.copytree(model, out)
    tok = AutoTokenizer.from_pretrained(model)
    tok.chat_template = thinking_template(tok.chat_template)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def reasoning_model(tiny_model_path: Path) -> Path:
    return build_reasoning_model(tiny_model_path)


def _client(model: Path, parser: str | None):
    cfg = ServerConfig(engine=EngineConfig(model_path=str(model), reasoning_parser=parser))
    return serve_in_background(create_app(cfg))


@pytest.fixture(scope="module")
def parsed(reasoning_model: Path):
    with _client(reasoning_model, "qwen3") as srv:
        yield openai.OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=0)


def ask(client: openai.OpenAI, messages: list[dict], **kw: Any) -> Any:
    args: dict[str, Any] = dict(model="m", messages=messages, temperature=0, max_tokens=64)
    args.update(kw)
    return client.chat.completions.create(**args)


def streamed(client: openai.OpenAI, messages: list[dict], **kw: Any) -> tuple[list[tuple[str, str]], list, list]:
    """(ordered (kind, text) deltas, tool-call deltas, finish reasons) of a streamed completion."""
    parts, calls, finishes = [], [], []
    for chunk in ask(client, messages, stream=True, **kw):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        thought = (delta.model_extra or {}).get("reasoning_content")
        if thought:
            parts.append(("reasoning", thought))
        if delta.content:
            parts.append(("content", delta.content))
        calls += delta.tool_calls or []
        if chunk.choices[0].finish_reason:
            finishes.append(chunk.choices[0].finish_reason)
    return parts, calls, finishes


def joined(parts: list[tuple[str, str]], kind: str) -> str:
    return "".join(text for k, text in parts if k == kind)


# ---- the parser's rules -------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "inside", "reasoning", "content"), [
    ("<think>\nabc\n</think>\n\nHello!", False, "abc", "Hello!"),
    ("  <think>abc</think>Hello!", False, "abc", "Hello!"),  # leading whitespace before the tag
    ("abc\n</think>\n\nHello!", True, "abc", "Hello!"),  # the prompt opened the block
    ("<think>abc</think>Hello!", True, "abc", "Hello!"),  # ... and the model opened it again
    ("<think>\nabc", False, "abc", ""),  # never closed: all reasoning
    ("abc", True, "abc", ""),
    ("Hello, no thinking.", False, None, "Hello, no thinking."),
    ("abc\n</think>\n\nHello!", False, None, "abc\n</think>\n\nHello!"),  # a stray close is content
    ("Sure. <think>x</think> done", False, None, "Sure. <think>x</think> done"),  # not at the start
    ("<think>a<think>b</think>c</think>d", False, "a<think>b", "c</think>d"),  # the first close ends it
    ("<think>a</think><think>b</think>ans", False, "a", "<think>b</think>ans"),  # one block only
    (f"<think>maybe {CALL}</think>\n\nok", False, f"maybe {CALL}", "ok"),
    ("<think></think>Hi", False, "", "Hi"),
    ("", False, None, ""),
    ("", True, "", ""),
    ("<thi", False, None, "<thi"),  # a tag that never completes is text
])
def test_split_rules(text: str, inside: bool, reasoning: str | None, content: str) -> None:
    got = split_reasoning(text, inside)
    assert (got.reasoning, got.content) == (reasoning, content)
    if reasoning is None:
        assert got.block_chars is None
    else:  # the block covers everything up to the answer's tag (or all of an unclosed block)
        close = text.find("</think>")
        assert got.block_chars == (close + len("</think>") if close >= 0 else len(text))


@pytest.mark.parametrize("text", [
    "<think>\nabc\n</think>\n\nHello!", "  <think> a b </think>  x  ", "abc</think>d", "<think>a<think>b</think>c",
    f"<think>I could {CALL}</think>\n\n{CALL}", "plain answer </think>", "<think>\nnever closed \n",
])
@pytest.mark.parametrize("inside", [False, True])
def test_stream_split_matches_whole_text_at_every_chunking(text: str, inside: bool) -> None:
    whole = split_reasoning(text, inside)
    for i in range(len(text) + 1):
        for j in range(i, len(text) + 1):
            splitter, got = ReasoningSplitter(inside), {"r": "", "c": ""}
            for piece in (text[:i], text[i:j], text[j:], None):
                r, c = splitter.feed(piece) if piece is not None else splitter.finish()
                got["r"] += r
                got["c"] += c
                assert "</think>" not in r  # the closing tag (or a piece of it) never leaks out
            assert (got["r"] if splitter.opened else None, got["c"]) == (whole.reasoning, whole.content), (i, j)
            assert splitter.block_chars() == whole.block_chars


def test_prompt_opens_think_only_at_the_very_end(reasoning_model: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(reasoning_model)
    history = [{"role": "user", "content": "hi"},
               {"role": "assistant", "content": "<think>\nold\n</think>\n\nHello!"},  # an echoed think block
               {"role": "user", "content": "what does <think> mean? <think>"}]
    plain = tok.apply_chat_template(history, add_generation_prompt=True, tokenize=False)
    assert not prompt_opens_think(plain)
    tok.chat_template = thinking_template(tok.chat_template)
    assert prompt_opens_think(tok.apply_chat_template(history, add_generation_prompt=True, tokenize=False))


def test_token_end_of_the_block_on_real_token_ids(reasoning_model: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(reasoning_model)
    text = "<think>\nI need the weather.\n</think>\n\nDone"
    ids = tok.encode(text, add_special_tokens=False) + [tok.convert_tokens_to_ids("<|im_end|>")]
    block = split_reasoning(text).block_chars
    end = reasoning_token_end(tok, ids, text, block)
    assert tok.decode(ids[:end]).endswith("</think>") and not tok.decode(ids[:end - 1]).endswith("</think>")
    assert tok.decode(ids[end:], skip_special_tokens=True) == "\n\nDone"
    # A token straddling the tag and the answer (">." here) belongs to the block.
    straddle = tok.encode("<think>a</think>.", add_special_tokens=False)
    assert tok.convert_ids_to_tokens(straddle[-1]) == ">."
    assert reasoning_token_end(tok, straddle, "<think>a</think>.", len("<think>a</think>")) == len(straddle)
    assert reasoning_token_end(tok, ids, "something else entirely", 10) is None  # ids that are not the text
    assert reasoning_token_end(tok, ids, text, 0) == 0


# ---- configuration ------------------------------------------------------------------------------
def test_unknown_parser_is_refused_at_start_with_the_known_names() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(["--reasoning-parser", "qwen4"], env={})
    assert all(name in str(exc.value) for name in REASONING_PARSERS) and "qwen4" in str(exc.value)
    with pytest.raises(ConfigError, match="qwen3-thinking"):
        EngineConfig(reasoning_parser="Qwen3")
    assert parse_config([], env={}).engine.reasoning_parser is None
    assert parse_config(["--reasoning-parser", "qwen3"], env={}).engine.reasoning_parser == "qwen3"


# ---- the server over HTTP -----------------------------------------------------------------------
def test_think_block_goes_to_reasoning_content_and_its_tool_call_is_not_made(parsed) -> None:
    r = ask(parsed, GREET, tools=[WEATHER])
    msg = r.choices[0].message
    assert msg.model_extra["reasoning_content"] == GREET_THOUGHT
    assert msg.content == "Hello!" and msg.tool_calls is None and r.choices[0].finish_reason == "stop"

    parts, calls, finishes = streamed(parsed, GREET, tools=[WEATHER])
    assert joined(parts, "reasoning") == GREET_THOUGHT and joined(parts, "content") == "Hello!"
    kinds = [k for k, _ in parts]
    assert kinds == sorted(kinds, key=lambda k: k == "content")  # all reasoning before any content
    assert len([k for k in kinds if k == "reasoning"]) > 5  # streamed as it came, not in one piece
    assert not any("think>" in text for _, text in parts) and calls == [] and finishes == ["stop"]


def test_tool_call_after_the_think_block_is_parsed(parsed) -> None:
    r = ask(parsed, ASK, tools=[WEATHER])
    msg = r.choices[0].message
    assert msg.model_extra["reasoning_content"] == "I need the weather." and msg.content is None
    (call,) = msg.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    assert r.choices[0].finish_reason == "tool_calls"

    parts, calls, finishes = streamed(parsed, ASK, tools=[WEATHER])
    assert joined(parts, "reasoning") == "I need the weather." and joined(parts, "content") == ""
    assert [c.function.name for c in calls] == ["get_weather"] and finishes == ["tool_calls"]


def test_output_cut_inside_the_think_block_is_all_reasoning(parsed) -> None:
    r = ask(parsed, GREET, tools=[WEATHER], max_tokens=8)
    msg, reasoning = r.choices[0].message, r.choices[0].message.model_extra["reasoning_content"]
    assert r.choices[0].finish_reason == "length" and msg.content is None and msg.tool_calls is None
    assert reasoning and GREET_THOUGHT.startswith(reasoning)
    parts, _, finishes = streamed(parsed, GREET, tools=[WEATHER], max_tokens=8)
    assert joined(parts, "reasoning") == reasoning and joined(parts, "content") == "" and finishes == ["length"]


def test_think_block_opened_by_the_prompt(reasoning_model: Path, tmp_path: Path) -> None:
    model = with_thinking_template(reasoning_model, tmp_path / "thinking")
    with _client(model, "qwen3") as srv:
        client = openai.OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=0)
        msg = ask(client, PING).choices[0].message
        assert msg.model_extra["reasoning_content"] == "Pinging back." and msg.content == "Pong!"
        parts, _, finishes = streamed(client, PING)
        assert joined(parts, "reasoning") == "Pinging back." and joined(parts, "content") == "Pong!"
        assert finishes == ["stop"]


def test_without_the_flag_the_raw_text_is_the_content(reasoning_model: Path) -> None:
    with _client(reasoning_model, None) as srv:
        r = httpx.post(srv.base_url + "/v1/chat/completions", timeout=60, json={
            "messages": GREET, "tools": [WEATHER], "temperature": 0, "max_tokens": 64})
        msg = r.json()["choices"][0]["message"]
        assert "reasoning_content" not in msg
        # Today's behaviour: the tool call inside the think block is parsed out of the raw text.
        assert msg["content"].startswith("<think>\nThe user greets me. I could call") and msg["tool_calls"]
