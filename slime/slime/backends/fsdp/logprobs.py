"""Response-only log-probs and entropy from a padded forward pass.

Only the logits that predict response tokens are turned into log-softmax (in fp32), so the
[B, T, V] log-softmax of the whole sequence is never materialised.
"""

from __future__ import annotations

import torch


def response_logits(logits: torch.Tensor, prompt_lengths: list[int], response_lengths: list[int]) -> list[torch.Tensor]:
    """Per row, the [R, V] logits at positions P-1 .. P+R-2 (those that predict the response)."""
    return [logits[r, p - 1 : p - 1 + n] for r, (p, n) in enumerate(zip(prompt_lengths, response_lengths, strict=True))]


def token_log_probs(logits_rows: list[torch.Tensor], input_ids: torch.Tensor, prompt_lengths: list[int],
                    response_lengths: list[int], temperature: float = 1.0,
                    with_entropy: bool = False) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
    log_probs: list[torch.Tensor] = []
    entropies: list[torch.Tensor] | None = [] if with_entropy else None
    for r, (rows, p, n) in enumerate(zip(logits_rows, prompt_lengths, response_lengths, strict=True)):
        x = rows.float()
        if temperature != 1.0:
            x = x / temperature
        lsm = torch.log_softmax(x, dim=-1)
        targets = input_ids[r, p : p + n]
        log_probs.append(lsm.gather(-1, targets.unsqueeze(-1)).squeeze(-1))
        if entropies is not None:
            entropies.append(-(lsm.exp() * lsm).sum(-1))
    return log_probs, entropies
