"""Incremental detokenization and stop-string matching for one generated sequence.

Decoding a growing id list from scratch each step is O(n^2); instead we decode a short window
(prefix offset .. end) and emit only the new suffix, the technique TGI/vLLM use. A delta is held
back while it ends in U+FFFD (a multi-byte character split across tokens).
"""

from __future__ import annotations


class IncrementalDetokenizer:
    """Turns token ids into text deltas whose concatenation is the decoded text."""

    def __init__(self, tokenizer, skip_special_tokens: bool = True) -> None:
        self._tok = tokenizer
        self._skip = skip_special_tokens
        self._ids: list[int] = []
        self._prefix_offset = 0
        self._read_offset = 0
        self.text = ""

    def _decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids, skip_special_tokens=self._skip, clean_up_tokenization_spaces=False)

    def push(self, token_id: int) -> str:
        self._ids.append(token_id)
        prefix_text = self._decode(self._ids[self._prefix_offset:self._read_offset])
        new_text = self._decode(self._ids[self._prefix_offset:])
        if len(new_text) > len(prefix_text) and not new_text.endswith("\ufffd"):
            delta = new_text[len(prefix_text):]
            self._prefix_offset = self._read_offset
            self._read_offset = len(self._ids)
            self.text += delta
            return delta
        return ""

    def flush(self) -> str:
        """At the end of generation: emit whatever is still held back (even a broken char)."""
        if self._read_offset >= len(self._ids):
            return ""
        prefix_text = self._decode(self._ids[self._prefix_offset:self._read_offset])
        new_text = self._decode(self._ids[self._prefix_offset:])
        delta = new_text[len(prefix_text):] if new_text.startswith(prefix_text) else ""
        self._prefix_offset = self._read_offset = len(self._ids)
        self.text += delta
        return delta


class StopStringMatcher:
    """Finds the first stop string in a growing text and decides how much text is safe to emit.

    While stop strings are active, the last `max_len - 1` characters are withheld from the
    stream, because they may turn out to be the start of a stop string that must be trimmed.
    """

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = tuple(s for s in stops if s)
        self._max_len = max((len(s) for s in self.stops), default=0)

    def find(self, text: str, new_chars: int) -> tuple[int, str] | None:
        """Earliest (index, stop) whose match ends within the last `new_chars` characters."""
        if not self.stops or new_chars <= 0:
            return None
        start = max(0, len(text) - new_chars - self._max_len + 1)
        best: tuple[int, str] | None = None
        for stop in self.stops:
            idx = text.find(stop, start)
            if idx != -1 and (best is None or idx < best[0]):
                best = (idx, stop)
        return best

    def safe_len(self, text: str) -> int:
        """How many leading characters of `text` can be streamed without risk of un-sending."""
        if not self.stops:
            return len(text)
        return max(0, len(text) - (self._max_len - 1))
