"""The embedded engine's running batch: the requests decoded together, as one left-padded KV cache.

Why one left-padded `DynamicCache` [B, heads, T, dim] with a 2-D attention mask and per-row
position ids: a decode step is then a single batched forward of [B, 1] tokens, exactly what
`model.generate` does. Per-request caches would need a gather/pad every step; this layout only
needs work when membership changes (merge on join, `index_select` on leave, and dropping leading
columns that are padding for every remaining row).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from openclaw.engines.hf_jobs import Job


@dataclass(eq=False)
class RunningBatch:
    rows: list[Job] = field(default_factory=list)
    cache: Any = None  # transformers DynamicCache
    mask: torch.Tensor | None = None  # [B, T] long
    next_pos: torch.Tensor | None = None  # [B] long
    last_tokens: torch.Tensor | None = None  # [B, 1] long
    padded: bool = False  # does any row of the running batch have left padding?

    def reset(self) -> None:
        self.rows, self.cache = [], None
        self.mask = self.next_pos = self.last_tokens = None

    def merge(self, rows: list[Job], cache: Any, mask: torch.Tensor, next_pos: torch.Tensor,
              last_tokens: torch.Tensor) -> None:
        """Add freshly prefilled rows (their own left-padded cache) to the batch."""
        if not self.rows:
            self.rows, self.cache, self.mask = list(rows), cache, mask
            self.next_pos, self.last_tokens = next_pos, last_tokens
            self.padded = not bool(mask.all())
            return
        width = max(self.mask.shape[1], mask.shape[1])
        for old_layer, new_layer in zip(self.cache.layers, cache.layers, strict=True):
            old_layer.keys = torch.cat([pad_left(old_layer.keys, width), pad_left(new_layer.keys, width)], dim=0)
            old_layer.values = torch.cat([pad_left(old_layer.values, width), pad_left(new_layer.values, width)], dim=0)
        self.mask = torch.cat([pad_left(self.mask, width, dim=1), pad_left(mask, width, dim=1)], dim=0)
        self.next_pos = torch.cat([self.next_pos, next_pos])
        self.last_tokens = torch.cat([self.last_tokens, last_tokens])
        self.rows.extend(rows)
        self.padded = not bool(self.mask.all())

    def remove_finished(self) -> None:
        """Drop the rows whose job is done, freeing their slots."""
        keep = [i for i, j in enumerate(self.rows) if not j.done]
        if len(keep) == len(self.rows):
            return
        if not keep:
            self.reset()
            return
        sel = torch.tensor(keep, device=self.mask.device)
        self.cache.batch_select_indices(sel)
        self.mask = self.mask[sel]
        self.next_pos = self.next_pos[sel]
        self.last_tokens = self.last_tokens[sel]
        self.rows = [self.rows[i] for i in keep]
        # Drop leading columns that are padding for every remaining row.
        first = int(self.mask.any(dim=0).nonzero()[0])
        if first > 0:
            self.mask = self.mask[:, first:]
            for layer in self.cache.layers:
                layer.keys = layer.keys[:, :, first:]
                layer.values = layer.values[:, :, first:]
        self.padded = not bool(self.mask.all())


def left_padded(prompts: list[tuple[int, ...]], pad_id: int,
                device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Prompts as one left-padded batch: ids, attention mask and position ids, each [B, T]."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros((len(prompts), width), dtype=torch.long, device=device)
    for i, prompt in enumerate(prompts):
        ids[i, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long, device=device)
        mask[i, width - len(prompt):] = 1
    return ids, mask, (mask.cumsum(-1) - 1).clamp_(min=0)


def pad_left(t: torch.Tensor, width: int, dim: int = 2) -> torch.Tensor:
    cur = t.shape[dim]
    if cur == width:
        return t
    shape = list(t.shape)
    shape[dim] = width - cur
    return torch.cat([t.new_zeros(shape), t], dim=dim)
