"""Micro-batching and padding of variable-length samples.

With `--use-dynamic-batch-size` samples are grouped so that the *padded* size of each
micro-batch (rows x longest row) stays within `--max-tokens-per-gpu`; samples are sorted by
length first so that rows in a micro-batch have similar lengths and little padding is wasted.
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


def partition_dynamic(lengths: list[int], max_tokens: int) -> list[list[int]]:
    """Group indices so that len(group) * max(length in group) <= max_tokens (a single sample
    longer than the budget gets its own group)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
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
    groups = partition_dynamic(lengths, max_tokens) if dynamic else partition_fixed(len(tokens), micro_batch_size)
    return [pad_micro_batch(g, tokens, response_lengths, pad_id) for g in groups]
