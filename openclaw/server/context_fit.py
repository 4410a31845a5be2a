"""Fitting a prompt that is longer than the model's context window.

Agent clients send more than a small model can read: the OpenClaw CLI's default agent prompt
is ~13k tokens (system prompt + tool schemas) against the embedded model's 8,192. Rather than
answer every such turn with a 400, the server drops content by a fixed rule until the prompt plus
the completion budget fits, in this order (each step only if the previous one was not enough):

  1. **oldest history** — whole earlier messages, oldest first (an assistant message goes together
     with the tool results that answer it). The current turn (the last user message and all after
     it) and system messages are kept;
  2. **tool schemas** — each tool keeps its name and the first line of its description, its
     parameter schema is dropped;
  3. **the middle of the system prompt** — the longest system message keeps its head and tail,
     the middle is replaced by a one-line marker saying how much was omitted. The cut is a whole
     number of SYSTEM_CUT_STEP characters: an agent's next turn (same system prompt, another
     message) then gets the same cut, so its prompt starts with the previous turn's tokens and the
     engine's prefix cache prefills only what is new, instead of the whole window again.

If the current turn alone still does not fit, the request is refused with OpenAI's 400
`context_length_exceeded`. Requests that fit are never touched. A trimmed turn is logged
(a counted warning) and its report — what was dropped, token counts before and after — is stored
in the turn record's `metadata["context_fit"]`; the stored `prompt_ids` are the trimmed prompt
the model actually read, so the record's log-probs stay exact.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from openclaw.intercept.messages import is_internal_context
from openclaw.server.errors import OpenAIError
from openclaw.server.prompting import RenderedPrompt, ToolMode

log = logging.getLogger("openclaw.server")

# A trimmed request reserves this much of the window for the completion when it names no budget.
DEFAULT_RESERVE_FRACTION = 4  # context_len // 4
SYSTEM_MARKER = "\n\n[... {n} characters of the system prompt omitted by the server to fit the model's context window ...]\n\n"
TOOL_DESCRIPTION_CHARS = 120
SYSTEM_CUT_STEP = 2048  # characters (~500 tokens): at most this much more is cut than the fit needs

_trimmed_total = 0  # requests this process trimmed (counted in each warning)


@dataclass(frozen=True)
class ContextFit:
    prompt: RenderedPrompt
    report: dict[str, Any] | None  # None: the prompt fit as sent


Render = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None], RenderedPrompt]


def fit_to_context(render: Render, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                   mode: ToolMode, prompt: RenderedPrompt, *, context_len: int, requested: int | None,
                   default_max_tokens: int) -> ContextFit:
    """`prompt` is `render(messages, tools)`, the request as sent (`render` is the server's own
    rendering, so trimmed prompts are tokenised exactly like untrimmed ones). Returns it unchanged
    when it fits with the completion budget; else the trimmed prompt and its report. What cannot
    fit: the messages alone over the window raise the 400 here; messages that fit but leave no
    room for the requested `max_tokens` are returned unchanged for the caller's max_tokens 400."""
    n0 = len(prompt.input_ids)
    if n0 < context_len and (requested is None or n0 + requested <= context_len):
        return ContextFit(prompt, None)
    if requested is not None and requested >= context_len:
        return ContextFit(prompt, None)  # no trimming helps: the caller's max_tokens check answers
    reserve = requested if requested is not None else min(default_max_tokens, context_len // DEFAULT_RESERVE_FRACTION)
    budget = context_len - reserve

    system_idx = [i for i, m in enumerate(messages) if m.get("role") == "system"]
    units = _history_units(messages)
    report: dict[str, Any] = {"original_prompt_tokens": n0, "context_len": context_len,
                              "reserved_completion_tokens": reserve, "dropped_messages": 0,
                              "tool_schemas_dropped": False, "system_chars_dropped": 0}

    # 1. oldest history: the fewest whole units whose removal fits (or all of them).
    def without_units(k: int) -> list[dict[str, Any]]:
        gone = {i for unit in units[:k] for i in unit}
        return [m for i, m in enumerate(messages) if i not in gone]

    k = smallest_fitting(len(units), lambda k: len(render(without_units(k), tools).input_ids) <= budget)
    msgs = without_units(k)
    report["dropped_messages"] = sum(len(u) for u in units[:k])
    best = render(msgs, tools)

    # 2. tool schemas
    cur_tools = tools
    if len(best.input_ids) > budget and tools and mode.parse:
        cur_tools = [_tool_stub(t) for t in tools]
        report["tool_schemas_dropped"] = True
        best = render(msgs, cur_tools)

    # 3. the middle of the longest system message
    if len(best.input_ids) > budget and system_idx:
        sys_pos = max((i for i, m in enumerate(msgs) if m.get("role") == "system"),
                      key=lambda i: len(msgs[i].get("content") or ""))
        text = msgs[sys_pos].get("content") or ""

        def cut_middle(n: int) -> list[dict[str, Any]]:
            keep = len(text) - n
            head, tail = keep - keep // 2, keep // 2
            out = list(msgs)
            out[sys_pos] = dict(msgs[sys_pos], content=text[:head] + SYSTEM_MARKER.format(n=n) + text[len(text) - tail:])
            return out

        steps = -(-len(text) // SYSTEM_CUT_STEP)
        cut = min(len(text), SYSTEM_CUT_STEP * smallest_fitting(
            steps, lambda k: len(render(cut_middle(min(len(text), k * SYSTEM_CUT_STEP)), cur_tools).input_ids) <= budget))
        msgs = cut_middle(cut)
        report["system_chars_dropped"] = cut
        best = render(msgs, cur_tools)

    if len(best.input_ids) > budget:
        if n0 < context_len:
            return ContextFit(prompt, None)  # the messages fit; max_tokens is what is too large
        raise OpenAIError(400, f"This model's maximum context length is {context_len} tokens. However, your messages "
                               f"resulted in {n0} tokens, and even after the server dropped all earlier history, the "
                               f"tool schemas and the system prompt's middle they need {len(best.input_ids)} tokens "
                               f"plus {reserve} for the completion. Please shorten the last message or request fewer "
                               "completion tokens.", param="messages", code="context_length_exceeded")
    report["prompt_tokens"] = len(best.input_ids)
    global _trimmed_total
    _trimmed_total += 1
    log.warning("prompt of %d tokens trimmed to %d to fit the %d-token context (%d messages, tool schemas %s, "
                "%d system chars dropped; %d trimmed requests so far)", n0, len(best.input_ids), context_len,
                report["dropped_messages"], "dropped" if report["tool_schemas_dropped"] else "kept",
                report["system_chars_dropped"], _trimmed_total)
    return ContextFit(best, report)


def _history_units(messages: list[dict[str, Any]]) -> list[list[int]]:
    """Indices of droppable earlier messages, grouped: a message plus the tool results after it.
    Everything from the last real user message on (the current turn) is kept, and so are system
    messages and OpenClaw's trailing internal-context message."""
    current = max((i for i, m in enumerate(messages) if m.get("role") == "user" and not is_internal_context(m)),
                  default=len(messages))
    units: list[list[int]] = []
    for i, m in enumerate(messages[:current]):
        role = m.get("role")
        if role == "system":
            continue
        if role == "tool" and units:
            units[-1].append(i)
        else:
            units.append([i])
    return units


def _tool_stub(tool: dict[str, Any]) -> dict[str, Any]:
    fn = tool.get("function") or {}
    desc = str(fn.get("description") or "").strip().split("\n", 1)[0][:TOOL_DESCRIPTION_CHARS]
    stub: dict[str, Any] = {"name": fn.get("name", "")}
    if desc:
        stub["description"] = desc
    return {"type": tool.get("type", "function"), "function": stub}


def smallest_fitting(upper: int, fits: Callable[[int], bool]) -> int:
    """The smallest n in [0, upper] with fits(n) (fits is monotone), or upper if none fits."""
    lo, hi = 0, upper
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo
