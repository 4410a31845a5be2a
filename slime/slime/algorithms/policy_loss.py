"""PPO-style policy-gradient terms: clipped surrogate (asymmetric, dual clip), GSPO's
sequence-level ratio, and truncated importance sampling against rollout log-probs."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from slime.algorithms.reduction import per_sample_mean


def ppo_clipped_loss(
    ppo_kl: torch.Tensor,
    advantages: torch.Tensor,
    eps_clip: float,
    eps_clip_high: float | None = None,
    eps_clip_c: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token clipped surrogate loss and clip indicator.

    ppo_kl = old_log_probs - log_probs, so ratio = exp(-ppo_kl) = pi / pi_old.
    loss = max(-ratio * A, -clip(ratio, 1 - eps_clip, 1 + eps_clip_high) * A)
    Dual clip (eps_clip_c > 1, arXiv:1912.09729): for A < 0 the loss is further capped at
    -eps_clip_c * A so a huge ratio on a bad token cannot blow up the update.
    clipfrac: 1.0 where the clipped branch was taken (the gradient through the ratio is zero).
    """
    if eps_clip_high is None:
        eps_clip_high = eps_clip
    ratio = torch.exp(-ppo_kl)
    loss_unclipped = -ratio * advantages
    loss_clipped = -ratio.clamp(1.0 - eps_clip, 1.0 + eps_clip_high) * advantages
    loss = torch.maximum(loss_unclipped, loss_clipped)
    clipfrac = torch.gt(loss_clipped, loss_unclipped).float()
    if eps_clip_c is not None:
        if eps_clip_c <= 1.0:
            raise ValueError(f"dual-clip eps_clip_c must be > 1.0, got {eps_clip_c}")
        capped = torch.minimum(loss, -eps_clip_c * advantages)
        loss = torch.where(advantages < 0, capped, loss)
    return loss, clipfrac


def gspo_sequence_kl(log_probs: torch.Tensor, old_log_probs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GSPO (arXiv:2507.18071): one importance ratio per sequence.

    Returns ``[B, T]`` where every token of sample i holds mean_t(old - new) over its masked
    tokens, so ``ppo_clipped_loss`` sees ratio_i = exp(mean log-ratio) = the length-normalised
    sequence likelihood ratio. Gradients flow to every token of the sequence through the mean.
    """
    seq_kl = per_sample_mean(old_log_probs - log_probs, mask)
    return seq_kl.unsqueeze(-1).expand_as(log_probs)


@dataclass(frozen=True)
class TISResult:
    weights: torch.Tensor  # [B, T] clamped importance weights, no gradient
    raw: torch.Tensor  # [B, T] unclamped pi_old / pi_rollout
    clipped: torch.Tensor  # [B, T] 1.0 where the cap changed the weight


def truncated_importance_weights(
    old_log_probs: torch.Tensor,
    rollout_log_probs: torch.Tensor,
    *,
    clip: float = 2.0,
    clip_low: float = 0.0,
) -> TISResult:
    """TIS (https://fengyao.notion.site/off-policy-rl): correct for the gap between the
    trainer's old policy and the engine that sampled the tokens.

    weight = clamp(exp(old_logp - rollout_logp), clip_low, clip), detached (it rescales the
    policy-gradient loss per token; it is not optimised).
    """
    raw = torch.exp(old_log_probs.float() - rollout_log_probs.float()).detach()
    weights = raw.clamp(min=clip_low, max=clip)
    return TISResult(weights=weights, raw=raw, clipped=(weights != raw).float())
