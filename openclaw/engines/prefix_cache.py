"""Keys and values of recent prompts, reused by later prompts that start with the same tokens.

RL rollouts send the same prompt many times (a GRPO group's n samples) and different prompts
with a long shared opening (a track's instructions and worked examples). On a CPU the prompt's
forward is most of a short episode's cost (SmolLM2-135M: ~0.5 s for 390 tokens, against ~0.04 s
per generated token), so the engine keeps the KV of recently prefilled prompts and runs only the
part of a new prompt after its longest cached prefix. SGLang's radix cache does the same on GPU.

Plain LRU over whole prompts, bounded by a token budget; a lookup compares the new prompt with
every entry. That is linear in the number of entries, which the budget keeps small (a few dozen);
a radix tree would only pay off with thousands. Entries hold tensors computed by the weights
that were loaded when they were stored: the engine clears the cache whenever it swaps weights. A
prompt served with a LoRA adapter (lora_rows.py) has other KV than the same prompt on the base, so
every entry belongs to a space (the adapter's name; "" for the base) and only matches in it.
Only the engine's scheduler thread uses an instance, so it takes no lock.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch

# Below this many shared tokens a hit saves less than the copy of its KV costs.
MIN_REUSED_TOKENS = 16


@dataclass(frozen=True)
class CachedPrompt:
    space: str
    ids: tuple[int, ...]
    layers: tuple[tuple[torch.Tensor, torch.Tensor], ...]  # per layer: keys, values [1, heads, len(ids), dim]


@dataclass
class PrefixCacheStats:
    lookups: int = 0
    hits: int = 0
    prompt_tokens: int = 0  # prompt tokens of every lookup
    reused_tokens: int = 0  # of those, the tokens whose forward a hit skipped

    def as_dict(self) -> dict[str, float]:
        return {"lookups": self.lookups, "hits": self.hits, "prompt_tokens": self.prompt_tokens,
                "reused_tokens": self.reused_tokens,
                "reused_fraction": self.reused_tokens / self.prompt_tokens if self.prompt_tokens else 0.0}


def common_prefix_len(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):  # prompts of different lengths
        if x != y:
            break
        n += 1
    return n


class PrefixKVCache:
    """LRU of prompts' KV, at most `max_tokens` tokens in all."""

    def __init__(self, max_tokens: int) -> None:
        if max_tokens < 1:
            raise ValueError(f"prefix cache size must be >= 1 token, got {max_tokens}")
        self.max_tokens = max_tokens
        self._entries: OrderedDict[tuple[str, tuple[int, ...]], CachedPrompt] = OrderedDict()
        self._tokens = 0
        self.stats = PrefixCacheStats()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def tokens(self) -> int:
        return self._tokens

    def lookup(self, ids: tuple[int, ...], space: str = "") -> tuple[CachedPrompt | None, int]:
        """The entry of `space` sharing the longest prefix with `ids`, and how many of its tokens to reuse.

        At most len(ids) - 1: the prompt's last token is always run, since its logits sample the
        first output token."""
        self.stats.lookups += 1
        self.stats.prompt_tokens += len(ids)
        best, best_n = None, 0
        for entry in self._entries.values():
            if entry.space != space:
                continue
            n = common_prefix_len(entry.ids, ids)
            if n > best_n:
                best, best_n = entry, n
        reuse = min(best_n, len(ids) - 1)
        if best is None or reuse < MIN_REUSED_TOKENS:
            return None, 0
        self._entries.move_to_end((space, best.ids))
        self.stats.hits += 1
        self.stats.reused_tokens += reuse
        return best, reuse

    def count_shared_forward(self, ids: tuple[int, ...], copies: int) -> None:
        """Count `copies` more requests for `ids` that reuse another request's whole forward (the
        engine runs identical prompts admitted together once)."""
        self.stats.prompt_tokens += len(ids) * copies
        self.stats.reused_tokens += len(ids) * copies

    def store(self, ids: tuple[int, ...], layers: list[tuple[torch.Tensor, torch.Tensor]], space: str = "") -> None:
        """Keep `layers` (copied) as the KV of `ids` in `space`, evicting the least recently used entries."""
        key = (space, ids)
        if key in self._entries:
            self._entries.move_to_end(key)
            return
        if len(ids) > self.max_tokens or len(ids) < MIN_REUSED_TOKENS:
            return
        while self._tokens + len(ids) > self.max_tokens:
            _, old = self._entries.popitem(last=False)
            self._tokens -= len(old.ids)
        self._entries[key] = CachedPrompt(space, ids, tuple((k.clone(), v.clone()) for k, v in layers))
        self._tokens += len(ids)

    def clear(self) -> None:
        self._entries.clear()
        self._tokens = 0

    def clear_space(self, space: str) -> None:
        """Drop the entries of one space (an adapter that was replaced or unloaded)."""
        for key in [k for k in self._entries if k[0] == space]:
            self._tokens -= len(self._entries.pop(key).ids)
