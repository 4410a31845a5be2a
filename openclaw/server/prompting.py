"""OpenAI messages -> the model's prompt token ids.

Two steps: `normalize_messages` (content lists flattened to text, `developer` -> `system`,
`function` -> `tool`; this is also what the RL intercept records), then `render_prompt`, which
uses the tokenizer's chat template. Templates that know about tools (Qwen, Hermes, ...) get
`tools=` directly; templates that ignore them (SmolLM2's ChatML) get the tools rendered
Hermes/Qwen style into the system prompt, assistant tool calls as `<tool_call>` blocks and tool
results as `<tool_response>` blocks, the format our parser reads back.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from openclaw.engines.tokenizer_lock import tokenizer_lock
from openclaw.server.protocol import (
    ChatCompletionRequest,
    ImagePart,
    Message,
    NamedToolChoice,
    TextPart,
)
from openclaw.server.toolcalls import TOOL_CALL_OPEN

IMAGE_PLACEHOLDER = "[image omitted: this model reads text only]"
AUDIO_PLACEHOLDER = "[audio omitted: this model reads text only]"
FILE_PLACEHOLDER = "[file omitted: this model reads text only]"

HERMES_TOOLS_HEADER = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
HERMES_TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


def flatten_content(content: Any) -> str:
    """A string, or OpenAI content parts joined with newlines (non-text parts -> a note)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    pieces: list[str] = []
    for part in content:
        if isinstance(part, TextPart):
            pieces.append(part.text)
        elif isinstance(part, ImagePart):
            pieces.append(IMAGE_PLACEHOLDER)
        elif getattr(part, "type", "") == "input_audio":
            pieces.append(AUDIO_PLACEHOLDER)
        elif getattr(part, "type", "") == "file":
            pieces.append(FILE_PLACEHOLDER)
        elif getattr(part, "type", "") == "refusal":
            pieces.append(part.refusal)
    return "\n".join(pieces)


def normalize_messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        role = {"developer": "system", "function": "tool"}.get(m.role, m.role)
        msg: dict[str, Any] = {"role": role, "content": flatten_content(m.content)}
        if m.name is not None:
            msg["name"] = m.name
        if m.tool_calls:
            msg["tool_calls"] = [
                {"id": tc.id, "type": "function",
                 "function": {"name": tc.function.name, "arguments": _args_str(tc.function.arguments)}}
                for tc in m.tool_calls
            ]
        if m.tool_call_id is not None:
            msg["tool_call_id"] = m.tool_call_id
        out.append(msg)
    return out


def _args_str(arguments: str | dict[str, Any]) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _args_obj(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def template_supports_tools(tokenizer: Any) -> bool:
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # named templates: the default one, or a "tool_use" one
        return "tool_use" in template or "tools" in str(template.get("default", ""))
    return isinstance(template, str) and "tools" in template


def tools_system_block(tools: list[dict[str, Any]]) -> str:
    lines = "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools)
    return HERMES_TOOLS_HEADER + lines + HERMES_TOOLS_FOOTER


def _render_tools_inline(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Rewrite tool-related messages into plain system/user/assistant text (Qwen2.5's layout)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m["role"]
        if role == "assistant" and m.get("tool_calls"):
            blocks = [
                f"{TOOL_CALL_OPEN}\n"
                + json.dumps({"name": tc["function"]["name"], "arguments": _args_obj(tc["function"]["arguments"])},
                             ensure_ascii=False)
                + "\n</tool_call>"
                for tc in m["tool_calls"]
            ]
            text = "\n".join(([m["content"]] if m["content"] else []) + blocks)
            out.append({"role": "assistant", "content": text})
        elif role == "tool":
            block = f"<tool_response>\n{m['content']}\n</tool_response>"
            if out and out[-1].get("_tool_group"):
                out[-1]["content"] += "\n" + block  # consecutive results share one user turn
            else:
                out.append({"role": "user", "content": block, "_tool_group": True})
        else:
            out.append({"role": role, "content": m["content"]})
    for m in out:
        m.pop("_tool_group", None)
    if tools:
        block = tools_system_block(tools)
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": (out[0]["content"] + "\n\n" + block).lstrip()}
        else:
            out.insert(0, {"role": "system", "content": block})
    return out


def _for_native_template(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Templates with tool support expect arguments as objects (they `tojson` them)."""
    out = []
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [
                {**tc, "function": {**tc["function"], "arguments": _args_obj(tc["function"]["arguments"])}}
                for tc in m["tool_calls"]
            ]
        out.append(m)
    return out


@dataclass(frozen=True)
class ToolMode:
    parse: bool  # parse <tool_call> blocks out of the output
    forced_name: str | None = None  # named tool_choice
    prefill: str = ""  # text placed at the start of the assistant turn (and of the output)


def _forced(name: str) -> ToolMode:
    # The prompt ends with the call's opening, so the model only writes the arguments.
    return ToolMode(parse=True, forced_name=name,
                    prefill=f'{TOOL_CALL_OPEN}\n{{"name": {json.dumps(name)}, "arguments": ')


def tool_mode(req: ChatCompletionRequest) -> ToolMode:
    if not req.tools or req.tool_choice == "none":
        return ToolMode(parse=False)
    if isinstance(req.tool_choice, NamedToolChoice):
        return _forced(req.tool_choice.function.name)
    if req.tool_choice == "required":
        if len(req.tools) == 1:  # only one way to satisfy "required"
            return _forced(req.tools[0].function.name)
        # Open the block and let the model pick the name.
        return ToolMode(parse=True, prefill=f'{TOOL_CALL_OPEN}\n{{"name": "')
    return ToolMode(parse=True)


@dataclass(frozen=True)
class RenderedPrompt:
    text: str
    input_ids: list[int]
    prefill: str


class PromptTooLong(ValueError):
    """The rendered prompt has at least `at_least` tokens (known without tokenising it)."""

    def __init__(self, at_least: int) -> None:
        super().__init__(f"the prompt has at least {at_least} tokens")
        self.at_least = at_least


@functools.cache
def max_token_bytes(tokenizer: Any) -> int:
    """The most UTF-8 bytes any one token's text spells (its vocabulary form, an upper bound on the
    text bytes it covers: byte-level 'Ġ' is 2 bytes for 1, SentencePiece '▁' 3 for 1)."""
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    return max((len(p.encode("utf-8", "replace")) for p in pieces if p), default=1)


def render_prompt(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                  mode: ToolMode, *, allow_control_tokens: bool = False,
                  token_budget: int | None = None) -> RenderedPrompt:
    """Apply the chat template (with a generation prompt) and tokenize. `tools` are the request's
    tools as plain dicts; they are rendered only when `mode.parse` (tool_choice != none).

    Control tokens (`<|im_end|>`, `<|im_start|>`, ...) typed inside messages or tools are encoded as
    plain text, so text cannot forge a turn boundary; only the template's own are real tokens
    (transformers' `sanitize_control_tokens`). `allow_control_tokens` encodes the whole rendered text
    as is (the old behaviour, for clients that send pre-rendered turns on purpose).

    With `token_budget`, a text that must exceed it (by length alone: no token spells more than
    `max_token_bytes`) raises PromptTooLong before any tokenising: a 30 MB body costs a length check.
    """
    active_tools = tools if mode.parse else None
    if template_supports_tools(tokenizer):
        chat, extra = _for_native_template(messages), {"tools": active_tools or None}
    else:
        chat, extra = _render_tools_inline(messages, active_tools), {}
    text = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False, **extra) + mode.prefill
    if token_budget is not None and len(text) // max_token_bytes(tokenizer) > token_budget:
        raise PromptTooLong(len(text) // max_token_bytes(tokenizer))
    with tokenizer_lock(tokenizer):
        if allow_control_tokens:
            # The template already contains BOS/special tokens where the model wants them.
            ids = list(tokenizer.encode(text, add_special_tokens=False))
        else:
            ids = list(tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True,
                                                     return_dict=False, sanitize_control_tokens=True, **extra))
            if mode.prefill:  # our own text (a tool call's opening), after the generation prompt's newline
                ids += tokenizer.encode(mode.prefill, add_special_tokens=False)
    return RenderedPrompt(text=text, input_ids=ids, prefill=mode.prefill)


def user_prompt_ids(tokenizer: Any, text: str) -> list[int]:
    """One user message rendered as the server renders a chat turn (no tools)."""
    return render_prompt(tokenizer, [{"role": "user", "content": text}], None, ToolMode(parse=False)).input_ids
