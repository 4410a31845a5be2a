"""`--reasoning-parser`: a model's `<think> ... </think>` block -> `reasoning_content`.

The engines return raw text (SGLang's `/generate` too: its own parser only shapes its OpenAI
routes), so the server splits it, for every backend, with one state machine used for whole texts
and for streams, so both always agree on the same output.

Rules (Qwen3's format, as SGLang's `qwen3` parser reads it, with the differences noted):
  * A think block is recognised only at the start of the output (leading whitespace allowed);
    `<think>` later in the answer is the model writing about the tag and stays content.
  * Generation starts inside the block when the parser says so (`qwen3-thinking`,
    `deepseek-r1`) or when the rendered prompt ends with `<think>` (Qwen3-Thinking's template
    opens the block in the prompt, so the output holds only `</think>`). A `<think>` the model
    still writes there is dropped.
  * The block ends at the first `</think>`: a nested `<think>` inside it is reasoning text, a
    second `</think>` or a second block after it is content.
  * No `</think>`: everything after the opening is reasoning (cut by max_tokens, or the model
    stopped while thinking) and the answer is empty. Without an opening (and not started
    inside) the whole output is content, a stray `</think>` included.
  * A `<tool_call>` inside the block is reasoning, never a call (SGLang's newer qwen3 parser
    ends the block at an unclosed `<tool_call>`; here the call the model was thinking about is
    not made). Tool calls are parsed from the answer only.
  * Whitespace at both ends of the reasoning and before the answer is dropped (Qwen writes
    `<think>\\n...\\n</think>\\n\\n`).

`reasoning_token_end` maps the block back onto the generated token ids, for the RL intercept's
loss mask (`--rl-train-reasoning mask`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from openclaw.server.context_fit import smallest_fitting

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

# name -> whether generation starts inside the think block whatever the prompt says.
REASONING_PARSERS: dict[str, bool] = {
    "qwen3": False,
    "qwen3-thinking": True,
    "deepseek-r1": True,
}

_START, _THINK, _AFTER, _CONTENT = "start", "think", "after", "content"


def unknown_parser_message(name: str) -> str:
    return (f"--reasoning-parser {name!r} is not known; known: {', '.join(sorted(REASONING_PARSERS))} "
            "(the server splits the output itself, whatever the backend)")


def prompt_opens_think(prompt_text: str) -> bool:
    """The generation prompt leaves a think block open (Qwen3-Thinking's template ends it with
    `<think>\\n`). Only the very end counts: a `<think>` typed in a message is followed by the
    template's own end-of-turn and assistant header."""
    return prompt_text.rstrip().endswith(THINK_OPEN)


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `tag`."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0


class ReasoningSplitter:
    """Feeds raw output text (any chunking) and returns (reasoning, content) safe to emit now.
    Text that may be the start of a tag, and whitespace that may turn out to be trailing, is held
    back until the next delta (or `finish`) decides it."""

    def __init__(self, starts_inside: bool = False) -> None:
        self._starts_inside = starts_inside
        self._state = _START
        self._held = ""  # raw text not yet decided (a partial tag, leading whitespace)
        self._fed = 0  # raw characters fed so far
        self._r_started = False  # a non-whitespace reasoning character was emitted
        self._r_ws = ""  # reasoning whitespace held: dropped if `</think>` follows
        self.opened = False  # a think block exists (opened in the output or in the prompt)
        self.close_end: int | None = None  # raw offset just after `</think>`; None: not closed

    def _reason(self, text: str, closing: bool = False) -> str:
        text = self._r_ws + text
        self._r_ws = ""
        if not self._r_started:
            text = text.lstrip()
            self._r_started = bool(text)
        stripped = text.rstrip()
        if not closing:
            self._r_ws = text[len(stripped):]
        return stripped

    def feed(self, delta: str) -> tuple[str, str]:
        reasoning: list[str] = []
        content: list[str] = []
        buf = self._held + delta
        base = self._fed - len(self._held)  # raw offset of buf[0]
        self._fed += len(delta)
        self._held = ""
        while buf:
            if self._state == _START:
                rest = buf.lstrip()
                if rest.startswith(THINK_OPEN):
                    self.opened, self._state = True, _THINK
                    skip = len(buf) - len(rest) + len(THINK_OPEN)
                    base, buf = base + skip, buf[skip:]
                elif not rest or THINK_OPEN.startswith(rest):
                    self._held = buf
                    break
                elif self._starts_inside:
                    self.opened, self._state = True, _THINK
                else:
                    self._state = _CONTENT
            elif self._state == _THINK:
                idx = buf.find(THINK_CLOSE)
                if idx >= 0:
                    reasoning.append(self._reason(buf[:idx], closing=True))
                    skip = idx + len(THINK_CLOSE)
                    self.close_end = base + skip
                    base, buf = base + skip, buf[skip:]
                    self._state = _AFTER
                else:
                    keep = _partial_suffix(buf, THINK_CLOSE)
                    reasoning.append(self._reason(buf[: len(buf) - keep]))
                    self._held = buf[len(buf) - keep:]
                    break
            elif self._state == _AFTER:
                rest = buf.lstrip()
                if rest:
                    self._state = _CONTENT
                buf = rest
            else:
                content.append(buf)
                break
        return "".join(reasoning), "".join(content)

    def finish(self) -> tuple[str, str]:
        """At the end of generation: (reasoning, content) still held back."""
        held, self._held = self._held, ""
        if self._state == _START:
            if self._starts_inside:
                self.opened = True
                return self._reason(held, closing=True), ""
            return "", held
        if self._state == _THINK:
            return self._reason(held, closing=True), ""
        return "", held

    def block_chars(self) -> int | None:
        """Raw characters the think block covers from the start of the output (tags included;
        the whole output when it never closed); None without a block."""
        if not self.opened:
            return None
        return self.close_end if self.close_end is not None else self._fed


@dataclass(frozen=True)
class ReasoningSplit:
    reasoning: str | None  # None: the output has no think block
    content: str  # the answer
    block_chars: int | None  # see ReasoningSplitter.block_chars


def split_reasoning(text: str, starts_inside: bool = False) -> ReasoningSplit:
    splitter = ReasoningSplitter(starts_inside)
    r1, c1 = splitter.feed(text)
    r2, c2 = splitter.finish()
    reasoning = r1 + r2 if splitter.opened else None
    return ReasoningSplit(reasoning=reasoning, content=c1 + c2, block_chars=splitter.block_chars())


def reasoning_token_end(tokenizer: Any, output_ids: Sequence[int], text: str, block_chars: int,
                        skip_special_tokens: bool = True) -> int | None:
    """How many leading output tokens the think block spans: the fewest whose decoded text
    covers `text[:block_chars]` (a token that straddles `</think>` and the answer counts as
    reasoning). None when the ids do not decode to the text (the block cannot be placed).

    Binary search over prefix decodes (a decoded prefix only grows: the tag is ASCII, so once it
    is complete no later byte changes it): O(n log n), not one decode per token."""
    want = text[:block_chars]
    ids = list(output_ids)

    def covers(k: int) -> bool:
        return tokenizer.decode(ids[:k], skip_special_tokens=skip_special_tokens,
                                clean_up_tokenization_spaces=False).startswith(want)

    if not want:
        return 0
    if not covers(len(ids)):
        return None
    return smallest_fitting(len(ids), covers)  # covers(0) is False: `want` is not empty
