"""Response-only log-probs and entropy from a padded forward pass.

Only the logits that predict response tokens are turned into log-softmax (in fp32), so the
[B, T, V] log-softmax of the whole sequence is never materialised.
"""

from __future__ import annotations

import torch


def response_logits(logits: torch.Tensor, prompt_lengths: list[int], response_lengths: list[int],
                    offset: int = 0) -> list[torch.Tensor]:
    """Per row, the [R, V] logits at positions P-1 .. P+R-2 (those that predict the response);
    `offset` is the sequence position of logits row 0 (see `logits_to_keep`)."""
    return [logits[r, p - 1 - offset : p - 1 - offset + n]
            for r, (p, n) in enumerate(zip(prompt_lengths, response_lengths, strict=True))]


def token_log_probs(logits_rows: list[torch.Tensor], input_ids: torch.Tensor, prompt_lengths: list[int],
                    response_lengths: list[int], temperature: float = 1.0, with_entropy: bool = False,
                    entropy_grad: bool = True) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
    """log p(token) = logit[token] - logsumexp(logits): no [R, V] log-softmax tensor is kept for
    backward (logsumexp's backward reuses the logits), which matters on memory-bound CPUs."""
    log_probs: list[torch.Tensor] = []
    entropies: list[torch.Tensor] | None = [] if with_entropy else None
    for r, (rows, p, n) in enumerate(zip(logits_rows, prompt_lengths, response_lengths, strict=True)):
        x = rows.float()
        if temperature != 1.0:
            x = x / temperature
        targets = input_ids[r, p : p + n]
        lse = torch.logsumexp(x, dim=-1)
        log_probs.append(x.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - lse)
        if entropies is not None:
            with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
                # H = logsumexp(x) - sum softmax(x) * x
                entropies.append(lse - (torch.softmax(x, dim=-1) * x).sum(-1))
    return log_probs, entropies
