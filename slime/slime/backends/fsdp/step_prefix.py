"""The prefix every row of a step starts with, run once per step instead of once per micro-batch.

Agent prompts open with the same system prompt and few-shot turns on every sample (gui-rl: 280
of ~370 prompt tokens), and a step has one micro-batch per GRPO group, so the shared-prompt
forward (one prompt pass per group) still runs that opening once per group. Here it runs once
per step: its KV tensors are detached into leaves that every micro-batch's forward reads; each
micro-batch's backward adds its share of the gradient into the leaves, and `backward()` then runs
the prefix pass's own backward once with the sum. The result is the same computation as running
the prefix in every micro-batch (up to fp rounding), with its forward and backward FLOPs divided
by the number of micro-batches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

# Below this many shared tokens the saving does not pay for the extra pass and the retained graph.
MIN_STEP_PREFIX_TOKENS = 16


def common_prefix_length(tokens: Sequence[Sequence[int]], response_lengths: Sequence[int]) -> int:
    """Tokens all rows share, capped one short of the shortest prompt: every micro-batch must still
    run at least one prompt token itself (it needs the logits of its last prompt position)."""
    if not tokens:
        return 0
    cap = min(len(t) - r for t, r in zip(tokens, response_lengths, strict=True)) - 1
    first = tokens[0]
    n = 0
    while n < cap and all(t[n] == first[n] for t in tokens[1:]):
        n += 1
    return max(0, n)


@dataclass
class StepPrefix:
    length: int
    outputs: list[tuple[torch.Tensor, torch.Tensor]]  # the prefix pass's per-layer (key, value)
    leaves: list[tuple[torch.Tensor, torch.Tensor]]  # detached copies the micro-batches read

    def cache(self, rows: int):
        """A fresh KV cache holding the prefix for `rows` rows (the leaves are never written)."""
        from transformers import DynamicCache

        cache = DynamicCache(ddp_cache_data=self.leaves)
        if rows > 1:
            cache.batch_repeat_interleave(rows)
        return cache

    def backward(self) -> None:
        """Push the gradient the micro-batches left on the leaves through the prefix pass, once."""
        outputs, grads = [], []
        for out_kv, leaf_kv in zip(self.outputs, self.leaves, strict=True):
            for out, leaf in zip(out_kv, leaf_kv, strict=True):
                if leaf.grad is not None and out.requires_grad:
                    outputs.append(out)
                    grads.append(leaf.grad)
        if outputs:
            torch.autograd.backward(outputs, grads)


def run_step_prefix(model: torch.nn.Module, prefix_ids: Sequence[int], device: torch.device) -> StepPrefix:
    """Run the prefix (batch 1). Under torch.no_grad() the leaves need no gradient."""
    from torch.distributed.fsdp import FSDPModule
    from transformers import DynamicCache

    if isinstance(model, FSDPModule):
        # FSDP2 frees the gathered weights after each forward and gathers them again only from the
        # hooks on a forward's own outputs; the prefix's backward starts from its KV tensors, after
        # the micro-batches, and would read freed storage (an illegal memory access on an H100).
        raise ValueError("the step prefix cannot run under FSDP2: its backward would read parameters "
                         "FSDP2 has already freed (use --disable-step-prefix-forward)")

    ids = torch.tensor([list(prefix_ids)], dtype=torch.long, device=device)
    cache = DynamicCache()
    model(input_ids=ids, attention_mask=torch.ones_like(ids), past_key_values=cache, use_cache=True, logits_to_keep=1)
    outputs = [(layer.keys, layer.values) for layer in cache.layers]
    grad = torch.is_grad_enabled()
    leaves = [(k.detach().requires_grad_(grad), v.detach().requires_grad_(grad)) for k, v in outputs]
    return StepPrefix(length=len(prefix_ids), outputs=outputs, leaves=leaves)
