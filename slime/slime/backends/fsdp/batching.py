"""Micro-batching and padding of variable-length samples.

With `--use-dynamic-batch-size` samples are grouped so that the *padded* size of each
micro-batch (rows x longest row) stays within `--max-tokens-per-gpu`; samples are sorted by
length first so that rows in a micro-batch have similar lengths and little padding is wasted.
Rows with the same prompt (a GRPO group) get micro-batches of their own (one, when the group fits
the budget), so that the shared-prompt forward runs the prompt once per micro-batch instead of
once per row (on CPU the prompt is most of a step's FLOPs: 8 rows of a ~380-token prompt and a
~10-token action cost ~3,100 tokens padded, ~460 shared).
Without it, fixed `--micro-batch-size` rows per micro-batch (in the given order).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class MicroBatch:
    indices: list[int]  # positions in the step's sample list
    input_ids: torch.Tensor  # [B, T] right-padded
    attention_mask: torch.Tensor  # [B, T]
    prompt_lengths: list[int]
    response_lengths: list[int]
    logits_offset: int = 0  # sequence position of the first logits row the forward returned

    @property
    def num_tokens(self) -> int:
        return int(self.attention_mask.sum())

    def shared_prompt_length(self) -> int:
        """P when every row (two or more) starts with the same P-token prompt and at least one row
        has a response; else 0. GRPO's n samples of one prompt are such a micro-batch."""
        if len(self.indices) < 2 or len(set(self.prompt_lengths)) != 1:
            return 0
        p = self.prompt_lengths[0]
        if p < 1 or p >= self.input_ids.shape[1]:
            return 0
        head = self.input_ids[:, :p]
        return p if bool((head == head[:1]).all()) else 0


def _pack_by_length(indices: list[int], lengths: list[int], max_tokens: int) -> list[list[int]]:
    """Longest first, greedily, so that len(group) * max(length in group) <= max_tokens (a single
    sample longer than the budget gets its own group)."""
    order = sorted(indices, key=lambda i: lengths[i], reverse=True)
    groups: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        new_longest = max(longest, lengths[i])
        if current and new_longest * (len(current) + 1) > max_tokens:
            groups.append(current)
            current, new_longest = [], lengths[i]
        current.append(i)
        longest = new_longest
    if current:
        groups.append(current)
    return groups


def partition_dynamic(lengths: list[int], max_tokens: int, keys: list[object] | None = None) -> list[list[int]]:
    """Group indices so that len(group) * max(length in group) <= max_tokens. Rows with equal
    `keys` (one prompt: a GRPO group) get micro-batches of their own, as few as the budget allows,
    so that each runs its prompt once; rows whose key is unique are packed together by length."""
    by_key: dict[object, list[int]] = {}
    for i in range(len(lengths)):
        by_key.setdefault(i if keys is None else keys[i], []).append(i)
    groups: list[list[int]] = []
    for rows in by_key.values():
        if len(rows) > 1:
            groups += _pack_by_length(rows, lengths, max_tokens)
    singles = [rows[0] for rows in by_key.values() if len(rows) == 1]
    return groups + _pack_by_length(singles, lengths, max_tokens)


def partition_fixed(n: int, micro_batch_size: int) -> list[list[int]]:
    size = max(1, micro_batch_size)
    return [list(range(s, min(n, s + size))) for s in range(0, n, size)]


def pad_micro_batch(indices: list[int], tokens: list[list[int]], response_lengths: list[int],
                    pad_id: int) -> MicroBatch:
    rows = [tokens[i] for i in indices]
    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, row in enumerate(rows):
        input_ids[r, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[r, : len(row)] = 1
    resp = [response_lengths[i] for i in indices]
    return MicroBatch(indices=indices, input_ids=input_ids, attention_mask=mask,
                      prompt_lengths=[len(tokens[i]) - resp[k] for k, i in enumerate(indices)],
                      response_lengths=resp)


def make_micro_batches(tokens: list[list[int]], response_lengths: list[int], pad_id: int, *,
                       dynamic: bool, max_tokens: int, micro_batch_size: int) -> list[MicroBatch]:
    lengths = [len(t) for t in tokens]
    if dynamic:
        prompts = [tuple(t[: len(t) - r]) for t, r in zip(tokens, response_lengths, strict=True)]
        groups = partition_dynamic(lengths, max_tokens, keys=prompts)
    else:
        groups = partition_fixed(len(tokens), micro_batch_size)
    return [pad_micro_batch(g, tokens, response_lengths, pad_id) for g in groups]
