"""Token log-probs and entropy from logits, chunked so the full-vocab float32 softmax of a long
sequence never exists at once (logits of 8 x 2048 tokens x 150k vocab are ~10 GB in fp32)."""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

DEFAULT_CHUNK_TOKENS = 1024


def _entropy_rows(logits: torch.Tensor) -> torch.Tensor:
    logits = logits.float()
    log_z = torch.logsumexp(logits, dim=-1, keepdim=True)
    probs = torch.exp(logits - log_z)
    # H = log Z - sum p * logit
    return (log_z.squeeze(-1) - (probs * logits).sum(dim=-1))


def _token_log_probs_rows(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    logits = logits.float()
    picked = logits.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def _chunked(fn, logits: torch.Tensor, *extra: torch.Tensor, chunk_tokens: int) -> torch.Tensor:
    lead = logits.shape[:-1]
    flat = logits.reshape(-1, logits.shape[-1])
    flat_extra = [e.reshape(-1) for e in extra]
    need_grad = torch.is_grad_enabled() and logits.requires_grad
    outs = []
    for start in range(0, flat.shape[0], max(chunk_tokens, 1)):
        part = flat[start : start + chunk_tokens]
        part_extra = [e[start : start + chunk_tokens] for e in flat_extra]
        if need_grad:
            # Recompute the chunk's fp32 softmax in backward instead of keeping it alive.
            outs.append(checkpoint(fn, part, *part_extra, use_reentrant=False))
        else:
            outs.append(fn(part, *part_extra))
    if not outs:
        return flat.new_zeros(lead, dtype=torch.float32)
    return torch.cat(outs).reshape(lead)


def entropy_from_logits(logits: torch.Tensor, *, chunk_tokens: int = DEFAULT_CHUNK_TOKENS) -> torch.Tensor:
    """[..., V] logits -> [...] entropy (nats) of the softmax, computed in fp32 chunks."""
    return _chunked(_entropy_rows, logits, chunk_tokens=chunk_tokens)


def log_probs_from_logits(
    logits: torch.Tensor, tokens: torch.Tensor, *, chunk_tokens: int = DEFAULT_CHUNK_TOKENS, temperature: float = 1.0
) -> torch.Tensor:
    """[..., V] logits and [...] token ids -> [...] log p(token), in fp32 chunks.

    ``temperature`` divides the logits first, so training log-probs match an engine that
    sampled at that temperature.
    """
    if tokens.shape != logits.shape[:-1]:
        raise ValueError(f"tokens shape {tuple(tokens.shape)} != logits shape[:-1] {tuple(logits.shape[:-1])}")
    if temperature != 1.0:
        logits = logits / temperature
    return _chunked(_token_log_probs_rows, logits, tokens.long(), chunk_tokens=chunk_tokens)
