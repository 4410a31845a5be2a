"""Pure parts of the server: config parsing, tool-call parsing, prompt rendering, RL control fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openclaw.server.banner import openclaw_provider_config, ready_banner
from openclaw.server.config import ConfigError, default_served_model_name, is_loopback, parse_config
from openclaw.server.errors import OpenAIError
from openclaw.server.hooks import RLControl
from openclaw.server.prompting import (
    IMAGE_PLACEHOLDER,
    normalize_messages,
    render_prompt,
    tool_mode,
    tools_system_block,
)
from openclaw.server.protocol import ChatCompletionRequest
from openclaw.server.rl_control import extract_rl_control
from openclaw.server.toolcalls import ToolCallStreamFilter, parse_forced_call, parse_tool_calls

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                            "parameters": {"type": "object",
                                                           "properties": {"city": {"type": "string"}}}}}


# ---- config -------------------------------------------------------------------------------------
def test_config_defaults_and_env_precedence():
    cfg = parse_config([], env={})
    assert (cfg.host, cfg.port, cfg.api_key, cfg.engine.backend, cfg.engine.model_path) == \
        ("127.0.0.1", 8000, None, "hf", None)
    env = {"OPENCLAW_HOST": "127.0.0.2", "OPENCLAW_PORT": "9001", "OPENCLAW_API_KEY": "k",
           "BASE_MODEL_PATH": "/m/base", "MODEL_PATH": "/m/other"}
    cfg = parse_config([], env=env)
    assert (cfg.host, cfg.port, cfg.api_key, cfg.engine.model_path) == ("127.0.0.2", 9001, "k", "/m/base")
    cfg = parse_config(["--port", "7000", "--model-path", "/m/flag", "--api-key", "f"], env=env)
    assert (cfg.port, cfg.engine.model_path, cfg.api_key) == (7000, "/m/flag", "f")
    assert parse_config([], env={"MODEL_PATH": "/m/other"}).engine.model_path == "/m/other"


def test_config_refuses_public_bind_without_key():
    with pytest.raises(ConfigError, match="without an API key"):
        parse_config(["--host", "0.0.0.0"], env={})
    with pytest.raises(ConfigError, match="without an API key"):
        parse_config([], env={"OPENCLAW_HOST": "0.0.0.0"})
    assert parse_config(["--host", "0.0.0.0", "--api-key", "s3cret"], env={}).api_key == "s3cret"
    assert parse_config(["--host", "::1"], env={}).host == "::1"
    assert is_loopback("localhost") and is_loopback("127.8.0.1") and not is_loopback("example.org")


def test_config_rl_flags_typed():
    cfg = parse_config(["--enable-rl-intercept", "--rl-buffer-dir", "/tmp/buf", "--rl-buffer-max-mb", "64",
                        "--session-idle-timeout", "30", "--judge-workers", "2", "--judge-model-path", "/j",
                        "--judge-backend", "llm"], env={})
    assert cfg.rl.enabled and cfg.rl.buffer_dir == Path("/tmp/buf")
    assert cfg.rl.intercept.buffer_max_mb == 64 and cfg.rl.intercept.session_idle_timeout == 30
    assert cfg.rl.judge is not None and (cfg.rl.judge.num_workers, cfg.rl.judge.prm_model_path) == (2, "/j")
    with pytest.raises(ConfigError, match="unrecognized argument: --bogus"):
        parse_config(["--bogus", "1"], env={})
    with pytest.raises(ConfigError, match=r"unrecognized argument: --rl-redact\b.*did you mean --rl-no-redact"):
        parse_config(["--enable-rl-intercept", "--rl-redact"], env={})
    with pytest.raises(ConfigError, match="OPENCLAW_PORT"):
        parse_config([], env={"OPENCLAW_PORT": "eighty"})


def test_served_model_name_and_banner(tmp_path):
    (tmp_path / "My-Model-7B").mkdir()
    assert default_served_model_name(str(tmp_path / "My-Model-7B")) == "My-Model-7B"
    emb = tmp_path / "smollm"
    emb.mkdir()
    (emb / "openclaw_source.json").write_text(json.dumps({"name": "SmolLM2-135M-Instruct"}))
    assert default_served_model_name(str(emb)) == "SmolLM2-135M-Instruct"
    cfg = openclaw_provider_config("http://127.0.0.1:8000", "m", None, 8192, 2048)
    provider = cfg["models"]["providers"]["openclaw-rl"]
    assert provider["baseUrl"] == "http://127.0.0.1:8000/v1" and provider["api"] == "openai-completions"
    assert provider["models"][0]["id"] == "m" and cfg["agents"]["defaults"]["model"]["primary"] == "openclaw-rl/m"
    text = ready_banner("http://127.0.0.1:8000", "m", "/p", "hf", "secret", 8192, 2048, False, None)
    assert "http://127.0.0.1:8000/v1" in text and "secret" not in text  # the key itself is never printed
    json.loads(text[text.index("{"):])  # the snippet is valid JSON


# ---- tool calls ---------------------------------------------------------------------------------
def test_parse_tool_calls_from_crafted_output():
    text = ('Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
            '<tool_call>{"name": "get_time", "arguments": "{\\"tz\\": \\"CET\\"}"}</tool_call>')
    content, calls = parse_tool_calls(text)
    assert content == "Let me check."
    assert [c.name for c in calls] == ["get_weather", "get_time"]
    assert json.loads(calls[0].arguments) == {"city": "Paris"} and json.loads(calls[1].arguments) == {"tz": "CET"}
    assert all(c.id.startswith("call_") and len(c.id) > 10 for c in calls) and calls[0].id != calls[1].id
    assert calls[0].to_openai()["type"] == "function"


def test_parse_tool_calls_keeps_broken_blocks_and_plain_text():
    assert parse_tool_calls("just text") == ("just text", [])
    content, calls = parse_tool_calls('<tool_call>{"name": oops}</tool_call>')
    assert calls == [] and content == '<tool_call>{"name": oops}</tool_call>'
    # Unterminated but complete JSON (generation stopped at </tool_call>) still parses.
    content, calls = parse_tool_calls('<tool_call>\n{"name": "f", "arguments": {}}\n')
    assert content is None and calls[0].name == "f" and calls[0].arguments == "{}"


def test_parse_forced_call_recovers_raw_arguments():
    prefill = '<tool_call>\n{"name": "get_weather", "arguments": '
    content, calls = parse_forced_call(prefill + '{"city": "Paris"}}', "get_weather")
    assert calls[0].name == "get_weather" and json.loads(calls[0].arguments) == {"city": "Paris"}
    content, calls = parse_forced_call(prefill + '{"city": Par', "get_weather")
    assert content is None and calls[0].name == "get_weather" and calls[0].arguments == '{"city": Par'


@pytest.mark.parametrize("cut", [1, 3, 5, 7, 11, 13])
def test_stream_filter_never_leaks_tool_markup(cut):
    text = 'Sure <b>ok</b>.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    filt = ToolCallStreamFilter()
    emitted = "".join(filt.feed(text[i:i + cut]) for i in range(0, len(text), cut))
    tail, calls = filt.finish()
    assert emitted == "Sure <b>ok</b>."  # the newline before the call is dropped, as in non-streaming
    assert "<tool" not in emitted + tail and tail == ""
    assert [c.name for c in calls] == ["get_weather"]


def test_stream_filter_releases_false_alarm_prefix():
    filt = ToolCallStreamFilter()
    assert filt.feed("a <tool") == "a"
    assert filt.feed("box> b") == " <toolbox> b"
    assert filt.feed(" <tool_") == ""
    assert filt.feed("x\n") == " <tool_x"
    assert filt.finish() == ("\n", [])


# ---- prompts ------------------------------------------------------------------------------------
class _ChatMLTokenizer:
    """SmolLM2's template logic (ChatML, no tools support) without loading a tokenizer."""

    chat_template = "{% for message in messages %}...{% endfor %}"

    def apply_chat_template(self, messages, add_generation_prompt, tokenize, tools=None, **kw):
        assert tools is None
        out = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        out += "<|im_start|>assistant\n" if add_generation_prompt else ""
        return self.encode(out, add_special_tokens=False) if tokenize else out  # render_prompt tokenises through it

    def encode(self, text, add_special_tokens):
        return list(text.encode())


def _req(**kw) -> ChatCompletionRequest:
    return ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "hi"}], **kw})


def test_normalize_flattens_content_and_maps_roles():
    req = ChatCompletionRequest.model_validate({"messages": [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                                     {"type": "text", "text": "what is it?"}]},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "42"}]},
    ]})
    msgs = normalize_messages(req.messages)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool"]
    assert msgs[1]["content"] == f"look\n{IMAGE_PLACEHOLDER}\nwhat is it?"
    assert msgs[2]["tool_calls"][0]["function"]["arguments"] == '{"x": 1}' and msgs[3]["content"] == "42"


def test_render_tools_hermes_style_for_template_without_tools():
    tok = _ChatMLTokenizer()
    req = ChatCompletionRequest.model_validate({"tools": [WEATHER], "messages": [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "warm"},
    ]})
    mode = tool_mode(req)
    tools = [t.model_dump(exclude_none=True) for t in req.tools]
    prompt = render_prompt(tok, normalize_messages(req.messages), tools, mode)
    assert prompt.text.startswith("<|im_start|>system\nYou are helpful.\n\n# Tools")
    assert json.dumps(tools[0]) in prompt.text and tools_system_block(tools) in prompt.text
    assert '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' \
        in prompt.text
    # Consecutive tool results share one user turn, each in a <tool_response> block.
    assert "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nwarm\n</tool_response>" \
        in prompt.text
    assert prompt.text.endswith("<|im_start|>assistant\n") and prompt.prefill == ""


def test_tool_choice_modes():
    assert not tool_mode(_req()).parse
    assert not tool_mode(_req(tools=[WEATHER], tool_choice="none")).parse
    auto = tool_mode(_req(tools=[WEATHER]))
    assert auto.parse and auto.prefill == "" and auto.forced_name is None
    named = tool_mode(_req(tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "get_weather"}}))
    assert named.forced_name == "get_weather" and named.prefill.startswith('<tool_call>\n{"name": "get_weather"')
    other = dict(WEATHER, function=dict(WEATHER["function"], name="other"))
    req_many = tool_mode(_req(tools=[WEATHER, other], tool_choice="required"))
    assert req_many.forced_name is None and req_many.prefill == '<tool_call>\n{"name": "'
    assert tool_mode(_req(tools=[WEATHER], tool_choice="required")).forced_name == "get_weather"
    # tool_choice "none" renders no tools into the prompt
    tok = _ChatMLTokenizer()
    p = render_prompt(tok, [{"role": "user", "content": "x"}], [WEATHER], tool_mode(_req(tools=[WEATHER], tool_choice="none")))
    assert "# Tools" not in p.text


def test_request_validation_rules():
    from pydantic import ValidationError

    for bad in ({"n": 2}, {"top_logprobs": 2}, {"tool_choice": "required"}, {"temperature": 3},
                {"stop": ["a", ""]}, {"tool_choice": {"type": "function", "function": {"name": "nope"}},
                                      "tools": [WEATHER]}):
        with pytest.raises(ValidationError):
            _req(**bad)
    assert _req(stop="x").stop_list() == ("x",)
    assert _req(max_tokens=5, max_completion_tokens=7).requested_max_tokens() == 7


# ---- RL control ---------------------------------------------------------------------------------
def test_rl_control_headers_win_and_body_keys_are_stripped():
    body = {"messages": [], "session_id": "from-body", "X-Turn-Type": "side", "x_session_done": True,
            "rl_opt_out": "0", "temperature": 0}
    control, clean = extract_rl_control({"X-Session-Id": "from-header"}, body)
    assert control == RLControl(session_id="from-header", turn_type="side", session_done=True, opt_out=False,
                                source={"session_id": "header", "turn_type": "body", "session_done": "body",
                                        "rl_opt_out": "body"})
    assert clean == {"messages": [], "temperature": 0} and "session_id" in body  # input untouched
    control, _ = extract_rl_control({"x-rl-opt-out": "1", "x-session-done": "true"}, {})
    assert control.opt_out and control.session_done and control.session_id is None


@pytest.mark.parametrize("headers,body", [
    ({"x-turn-type": "bogus"}, {}),
    ({"x-session-done": "maybe"}, {}),
    ({}, {"session_id": "a" * 1000}),
    ({}, {"session_id": "a\x00b"}),
    ({}, {"session_id": ["list"]}),
])
def test_rl_control_rejects_bad_values(headers, body):
    with pytest.raises(OpenAIError) as err:
        extract_rl_control(headers, body)
    assert err.value.status == 400 and err.value.param


def test_template_with_native_tools_support_gets_tools_directly(tiny_model_path):
    """A Qwen/Hermes-style template that renders `tools` itself receives them (and tool-call
    arguments as objects) instead of our system-prompt rendering."""
    from transformers import AutoTokenizer

    from openclaw.server.prompting import template_supports_tools

    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    assert not template_supports_tools(tok)  # SmolLM2's ChatML template ignores tools
    tok.chat_template = (
        "{% if tools %}<|im_start|>system\nTOOLS:{% for t in tools %} {{ t.function.name }}{% endfor %}<|im_end|>\n"
        "{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
        "{% for tc in m.tool_calls or [] %}CALL {{ tc.function.name }} {{ tc.function.arguments.city }}{% endfor %}"
        "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    assert template_supports_tools(tok)
    req = ChatCompletionRequest.model_validate({"tools": [WEATHER], "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "snow"}]})
    prompt = render_prompt(tok, normalize_messages(req.messages), [WEATHER], tool_mode(req))
    assert prompt.text.startswith("<|im_start|>system\nTOOLS: get_weather<|im_end|>")
    assert "CALL get_weather Oslo" in prompt.text and "<|im_start|>tool\nsnow" in prompt.text
    assert "# Tools" not in prompt.text
    assert prompt.input_ids == tok.encode(prompt.text, add_special_tokens=False)
