"""Masked reductions over padded [B, T] per-token tensors.

Layout used throughout ``slime.algorithms``: per-token values are right-padded to
``[batch, max_response_len]`` and come with an explicit ``mask`` of the same shape
(1 for response tokens that count, 0 for padding and for masked observations).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Reducer = Callable[[torch.Tensor], torch.Tensor]


def _mask(mask: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    if mask.shape != like.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} != values shape {tuple(like.shape)}")
    return mask.to(like.dtype if like.is_floating_point() else torch.float32)


def masked_sum(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    m = _mask(mask, values)
    # where() instead of multiply so a NaN/inf in a padded slot cannot leak into the sum.
    masked = torch.where(m > 0, values * m, torch.zeros_like(values))
    return masked.sum() if dim is None else masked.sum(dim=dim)


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean over masked entries (0 when nothing is masked in, instead of NaN)."""
    m = _mask(mask, values)
    count = m.sum() if dim is None else m.sum(dim=dim)
    return masked_sum(values, mask, dim) / count.clamp_min(1.0)


def per_sample_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B, T] -> [B]: each sample's mean over its own masked tokens."""
    return masked_mean(values, mask, dim=-1)


def sum_of_sample_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """slime's reduction: sum over samples of each sample's masked token mean.

    Every sample weighs the same regardless of its length. Divide by the number of samples in
    the (global) batch to get a mean; ``make_reducer`` does that for you.
    """
    return per_sample_mean(values, mask).sum()


def make_reducer(
    mask: torch.Tensor,
    *,
    per_token: bool = False,
    num_samples: float | None = None,
    num_tokens: float | None = None,
) -> Reducer:
    """A closure ``x[B, T] -> scalar`` used for the loss and every metric of one micro-batch.

    per_token=False (slime default): mean over samples of per-sample token means.
    per_token=True (``--calculate-per-token-loss``): mean over all masked tokens.
    num_samples / num_tokens: denominators for gradient accumulation. Pass the global batch's
    totals so that summing the micro-batch losses gives the global mean; default: this batch's.
    """
    n_samples = float(mask.shape[0]) if num_samples is None else float(num_samples)
    n_tokens = float(mask.sum().item()) if num_tokens is None else float(num_tokens)

    def reduce(values: torch.Tensor) -> torch.Tensor:
        if per_token:
            return masked_sum(values, mask) / max(n_tokens, 1.0)
        return sum_of_sample_mean(values, mask) / max(n_samples, 1.0)

    return reduce
