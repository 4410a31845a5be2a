"""Hermes/Qwen tool calls: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` in model
output -> OpenAI `tool_calls`, for a finished text and incrementally for a stream.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


@dataclass(frozen=True)
class ParsedToolCall:
    name: str
    arguments: str  # a JSON string, as OpenAI returns it
    id: str = field(default_factory=new_call_id)

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def _call_from_json(raw: str) -> ParsedToolCall | None:
    try:
        obj = json.loads(raw.strip())
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        arguments = args  # already a JSON string (some models emit it that way)
    else:
        arguments = json.dumps(args, ensure_ascii=False)
    return ParsedToolCall(name=obj["name"], arguments=arguments)


def parse_tool_calls(text: str) -> tuple[str | None, list[ParsedToolCall]]:
    """Split model output into (content, tool calls). A block whose JSON does not parse is kept
    in the content verbatim (better to show the user the text than to drop it)."""
    calls: list[ParsedToolCall] = []
    kept: list[str] = []
    pos = 0
    for m in _BLOCK.finditer(text):
        call = _call_from_json(m.group(1))
        if call is None:
            continue
        kept.append(text[pos:m.start()])
        pos = m.end()
        calls.append(call)
    if not calls:
        return (text or None), calls
    kept.append(text[pos:])
    content = "".join(kept).strip()
    return (content or None), calls


def parse_forced_call(text: str, name: str) -> tuple[str | None, list[ParsedToolCall]]:
    """For a named `tool_choice` the prompt was prefilled with the call's opening, so the
    output is a call to `name` even when the model's JSON is broken; the arguments are then
    returned as the raw text (OpenAI documents that arguments may be invalid JSON)."""
    content, calls = parse_tool_calls(text)
    if calls:
        return content, calls
    m = _BLOCK.search(text)
    body = m.group(1) if m else text
    marker = body.find('"arguments"')
    raw = body[marker:].split(":", 1)[1] if marker >= 0 and ":" in body[marker:] else body
    raw = raw.strip()
    if raw.endswith("}"):  # drop the outer object's closing brace
        raw = raw[:-1].rstrip()
    return None, [ParsedToolCall(name=name, arguments=raw or "{}")]


class ToolCallStreamFilter:
    """Passes content deltas through until a `<tool_call>` starts, then buffers the rest, so no
    tool-call markup ever leaks into streamed content. A trailing partial tag (e.g. `<tool_`)
    is held back until the next delta shows whether it is one."""

    def __init__(self) -> None:
        self._pending = ""  # held-back text that might be the start of a tag
        self.buffered: str | None = None  # text from the first <tool_call> on

    @property
    def in_tool_call(self) -> bool:
        return self.buffered is not None

    def feed(self, delta: str) -> str:
        """Returns the content safe to emit now."""
        if self.buffered is not None:
            self.buffered += delta
            return ""
        text = self._pending + delta
        idx = text.find(TOOL_CALL_OPEN)
        if idx >= 0:
            self.buffered = text[idx:]
            self._pending = ""
            return text[:idx].rstrip()
        keep = _partial_tag_suffix(text, TOOL_CALL_OPEN)
        # Trailing whitespace is held too: if a call follows, it is dropped (as in the
        # non-streaming content, which is stripped), otherwise it goes out with the next text.
        emit = text[: len(text) - keep]
        stripped = emit.rstrip()
        self._pending = emit[len(stripped):] + text[len(text) - keep:]
        return stripped

    def finish(self) -> tuple[str, list[ParsedToolCall]]:
        """At end of generation: (content still to emit, parsed tool calls)."""
        if self.buffered is None:
            tail, self._pending = self._pending, ""
            return tail, []
        content, calls = parse_tool_calls(self.buffered)
        return (content or ""), calls


def _partial_tag_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `tag`."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0
