"""Message helpers for session identification: canonical forms, OpenClaw's internal-context
carrier, its runtime line, conversation fingerprints and next-state extraction."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from openclaw.buffer.records import content_text

INTERNAL_BEGIN = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"
INTERNAL_END = "<<<END_OPENCLAW_INTERNAL_CONTEXT>>>"
_INTERNAL_BLOCK = re.compile(re.escape(INTERNAL_BEGIN) + r"[\s\S]*?(?:" + re.escape(INTERNAL_END) + r"|\Z)")
# OpenClaw's first user message of a session carries
#   "Runtime: agent=main | session=agent:main:explicit:ID | sessionId=ID | host=..."
# Printable ASCII only (no spaces, no `|`): user text can imitate the line, and a control
# character in a session id must never reach the buffer (which rejects it).
_RUNTIME_SESSION = re.compile(r"(?:^|[\s|])sessionId=([\x21-\x7b\x7d\x7e]{1,256})")
# A leading think block in an assistant message. The reply is indexed as the client was served it
# (answer only, with --reasoning-parser; raw text without); clients echo it with the reasoning
# dropped, or put back in front of the answer: both must fingerprint like the answer.
_LEADING_THINK = re.compile(r"\A\s*<think>.*?</think>", re.DOTALL)


# Utility calls the OpenClaw CLI (npm `openclaw` 2026.9.6) makes besides agent turns, recognised by
# text it always sends: its compaction summariser's system prompt (SUMMARIZATION_SYSTEM_PROMPT,
# also used for split-turn and branch summaries) and the memory-core plugin's pre-compaction flush
# (system prompt section and user prompt; the flush runs in its own `internal-session-effects`
# session). Their replies are housekeeping, not the agent's behaviour: they are `side` turns.
OPENCLAW_COMPACTION_SUMMARY = "openclaw_compaction_summary"
OPENCLAW_MEMORY_FLUSH = "openclaw_memory_flush"
_UTILITY_SYSTEM_MARKERS = (
    ("You are a context summarization assistant.", OPENCLAW_COMPACTION_SUMMARY),
    ("Pre-compaction memory flush turn.", OPENCLAW_MEMORY_FLUSH),
)
_UTILITY_USER_PREFIXES = (("Pre-compaction memory flush.", OPENCLAW_MEMORY_FLUSH),)


def openclaw_utility_kind(messages: list[dict[str, Any]]) -> str | None:
    """Which OpenClaw utility call a request is (see above), or None for an ordinary turn. Only
    the system prompt (the client's own text) and the start of the last user message count, so a
    user quoting the phrases mid-conversation does not turn their turn into a side turn."""
    sys_text = system_text(messages)
    for marker, kind in _UTILITY_SYSTEM_MARKERS:
        if marker in sys_text:
            return kind
    user = last_user_text(messages).lstrip()
    for prefix, kind in _UTILITY_USER_PREFIXES:
        if user.startswith(prefix):
            return kind
    return None


def is_internal_context(msg: dict[str, Any]) -> bool:
    """OpenClaw's synthetic trailing user message: only an internal-context block. It is sent
    once and never kept in later history, so it is neither history nor a next state."""
    if msg.get("role") != "user":
        return False
    text = content_text(msg.get("content"))
    return INTERNAL_BEGIN in text and not _INTERNAL_BLOCK.sub("", text).strip()


def strip_internal(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if isinstance(m, dict) and not is_internal_context(m)]


def runtime_session_id(messages: list[dict[str, Any]]) -> str | None:
    """The `sessionId=` of OpenClaw's runtime line, searched in user and system messages."""
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in ("user", "system"):
            continue
        text = content_text(m.get("content"))
        if "sessionId=" not in text:
            continue
        text = _INTERNAL_BLOCK.sub("", text)
        found = _RUNTIME_SESSION.search(text)
        if found:
            return found.group(1)
    return None


def _canon_args(args: Any) -> str:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return args.strip()
    return json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def message_digest(msg: dict[str, Any]) -> bytes:
    """A message's identity for continuity: role, stripped text, tool calls by name+arguments.
    Tool-call ids are left out (OpenClaw rewrites them), as are `name` and other extras.
    (Hashes the UTF-8 text directly: a JSON encoding of an 8k-token history costs ~10x more.)"""
    role = msg.get("role")
    if role == "developer":
        role = "system"
    text = content_text(msg.get("content"))
    if INTERNAL_BEGIN in text:
        text = _INTERNAL_BLOCK.sub("", text)
    if role == "assistant" and "<think>" in text:
        text = _LEADING_THINK.sub("", text, count=1)
    text = text.strip()
    h = hashlib.blake2b(str(role).encode(), digest_size=16)
    h.update(b"\x00")
    h.update(text.encode("utf-8", "surrogatepass"))
    calls = msg.get("tool_calls")
    if calls:
        canon = []
        for tc in calls:
            if isinstance(tc, dict):
                fn = tc.get("function") or {}
                canon.append([fn.get("name"), _canon_args(fn.get("arguments"))])
        h.update(b"\x00")
        h.update(json.dumps(canon, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return h.digest()


def reply_message(content: str | None, tool_calls: list[dict[str, Any]] | None) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content or ""}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return msg


def chain_hashes(messages: list[dict[str, Any]], *, skip_system: bool, start: bytes = b"") -> list[bytes]:
    """h[i] = fingerprint of the first i+1 (optionally non-system) messages, chained from
    `start`. Incremental, so every prefix of a long history is fingerprinted in one pass."""
    out: list[bytes] = []
    h = start
    for m in messages:
        if skip_system and m.get("role") in ("system", "developer"):
            continue
        h = hashlib.blake2b(h + message_digest(m), digest_size=16).digest()
        out.append(h)
    return out


def system_fingerprint(messages: list[dict[str, Any]]) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for m in messages:
        if m.get("role") in ("system", "developer"):
            h.update(message_digest(m))
    return h.digest()


def next_state_from(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The next state a request carries for the previous turn: the messages after its last
    assistant message (the user's reply, or the tool results of an agent tool loop); with no
    assistant message (a client that sends no history), its last user message."""
    msgs = [m for m in strip_internal(messages) if m.get("role") not in ("system", "developer")]
    last_asst = max((i for i, m in enumerate(msgs) if m.get("role") == "assistant"), default=None)
    tail = msgs[last_asst + 1 :] if last_asst is not None else [m for m in msgs if m.get("role") == "user"][-1:]
    tail = [m for m in tail if m.get("role") in ("user", "tool")]
    if not tail:
        return None
    role = "tool" if all(m.get("role") == "tool" for m in tail) else "user"
    text = "\n\n".join(content_text(m.get("content")) for m in tail)
    return {"role": role, "content": text, "messages": tail}


def last_user_text(messages: list[dict[str, Any]]) -> str:
    for m in reversed(strip_internal(messages)):
        if m.get("role") == "user":
            return content_text(m.get("content"))
    return ""


def system_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(content_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer"))
