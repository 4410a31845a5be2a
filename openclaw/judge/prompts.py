"""Judge prompts: role-aware PRM scoring and hindsight-hint extraction.

The next state of a turn is what came after the assistant's reply: the user's next message,
the output of a tool the assistant called, or an environment observation. The judge must read
them differently (a user's "no, I meant X" is a complaint; a tool's non-zero exit is a
failure), so the prompt names the role explicitly.
"""

from __future__ import annotations

from typing import Any

HINT_START = "[HINT_START]"
HINT_END = "[HINT_END]"
# Long inputs are cut so one turn cannot blow the judge's context; the END of a next state
# (where tracebacks and the user's last words are) matters most, the START of a response.
MAX_RESPONSE_CHARS = 4000
MAX_NEXT_STATE_CHARS = 3000
MAX_PROMPT_CHARS = 2000

_ROLE_DESCRIPTIONS: dict[str, tuple[str, str]] = {
    "user": (
        "the user's next message",
        "Read it as the user's reaction. Thanks, acceptance, or building on the answer means the "
        "reply was good. A correction (\"no, I meant ...\"), a complaint, a request to redo or retry, "
        "or restating the same request means it was bad. A new, unrelated request, silence, or an "
        "ambiguous reply carries no signal.",
    ),
    "tool": (
        "the output of the tool call the assistant made",
        "Read it as the outcome of the assistant's action. Output showing the action worked means "
        "good. An error, a traceback, a non-zero exit code, 'command not found', a permission or "
        "timeout failure, or output showing the action did something other than intended means bad. "
        "Empty or uninformative output carries no signal.",
    ),
    "environment": (
        "the environment's observation after the assistant's action",
        "Judge whether the observation shows progress (good), a failure or error (bad), or nothing "
        "informative (neutral).",
    ),
}


def normalize_role(role: str | None) -> str:
    """Map chat roles to the three judge roles; unknown roles count as environment."""
    r = (role or "user").strip().lower()
    if r in ("user", "human"):
        return "user"
    if r in ("tool", "function", "ipython", "tool_result"):
        return "tool"
    return "environment"


def _clip_head(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "\n...[truncated]"


def _clip_tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "[truncated]...\n" + text[-limit:]


def _message_line(m: dict) -> str:
    content = m.get("content")
    if isinstance(content, list):
        content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return f"{m.get('role', '?')}: {content or ''}"


def prompt_to_text(prompt: Any) -> str:
    """A chat prompt (list of messages) or plain string, as text for the judge."""
    if isinstance(prompt, list):
        return "\n".join(_message_line(m) for m in prompt if isinstance(m, dict))
    return "" if prompt is None else str(prompt)


def _judge_messages(system: str, prompt: Any, reply_heading: str, response: str, what: str, next_state: str,
                    ask: str) -> list[dict[str, str]]:
    """The system prompt, then one user message: the conversation so far (if any), the reply under
    `reply_heading`, the next state described as `what`, and the `ask`, each clipped to its limit."""
    parts = []
    context = prompt_to_text(prompt)
    if context:
        parts.append(f"## Conversation so far (context)\n{_clip_tail(context, MAX_PROMPT_CHARS)}")
    parts.append(f"## {reply_heading}\n{_clip_head(response or '', MAX_RESPONSE_CHARS)}")
    ns = next_state if (next_state or "").strip() else "(empty: nothing came back)"
    parts.append(f"## Next state ({what})\n{_clip_tail(ns, MAX_NEXT_STATE_CHARS)}")
    parts.append(ask)
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


def build_prm_messages(
    response: str, next_state: str, next_state_role: str | None = "user", prompt: Any = None
) -> list[dict[str, str]]:
    """Chat messages asking for a `\\boxed{1|-1|0}` verdict on the assistant's reply."""
    what, how = _ROLE_DESCRIPTIONS[normalize_role(next_state_role)]
    system = (
        "You are a process reward model. You grade one reply of an AI assistant by looking at what "
        f"happened next: {what}.\n{how}\n"
        "Think briefly, then end with exactly one verdict: \\boxed{1} (good), \\boxed{-1} (bad) or "
        "\\boxed{0} (no clear signal)."
    )
    return _judge_messages(system, prompt, "Assistant reply being graded", response, what, next_state,
                           "Grade the assistant reply. End with \\boxed{1}, \\boxed{-1} or \\boxed{0}.")


def build_hint_messages(
    response: str, next_state: str, next_state_role: str | None = "user", prompt: Any = None
) -> list[dict[str, str]]:
    """Chat messages asking whether the next state carries hindsight worth a hint (OPD)."""
    what = _ROLE_DESCRIPTIONS[normalize_role(next_state_role)][0]
    system = (
        "You help train an AI assistant from hindsight. Given the assistant's reply and what happened "
        f"next ({what}), decide whether the next state reveals information that would have let the "
        "assistant write a better reply (a correction, a missing requirement, a preference, an error "
        "and its cause). If it does, write a short hint (one or two sentences, addressed to the "
        f"assistant, no more than 60 words) between {HINT_START} and {HINT_END}, then \\boxed{{1}}. "
        "If it does not (pure thanks, an unrelated new request, silence), write \\boxed{-1} and no hint."
    )
    return _judge_messages(system, prompt, "Assistant reply", response, what, next_state,
                           f"Answer with {HINT_START}...{HINT_END} and \\boxed{{1}}, or only \\boxed{{-1}}.")
