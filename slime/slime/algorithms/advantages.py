"""Advantage estimators (pure functions; tensors in, tensors out).

Per-sample tensors are ``[B]``; per-token tensors are right-padded ``[B, T]`` with an explicit
response ``mask`` (see ``reduction.py``). Samples of one prompt group are contiguous:
``rewards.view(-1, group_size)`` gives one row per prompt, as slime lays them out.
"""

from __future__ import annotations

import torch

from slime.algorithms.reduction import masked_mean

GROUP_STD_EPS = 1e-6  # slime's epsilon in (r - mean) / (std + eps)
WHITEN_EPS = 1e-8


def group_normalize_rewards(
    rewards: torch.Tensor,
    group_size: int,
    *,
    std_normalization: bool = True,
    eps: float = GROUP_STD_EPS,
) -> torch.Tensor:
    """GRPO: subtract each group's mean reward; optionally divide by the group std.

    The std is the unbiased sample std (torch's default, as slime). A group of one sample
    (``n_samples_per_prompt == 1``) has no baseline to compare against: its advantage is 0, not
    NaN. A group whose rewards are all equal also gets 0 (mean-centred zeros / (0 + eps)).
    """
    rewards = rewards.float()
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D [B], got shape {tuple(rewards.shape)}")
    if group_size < 1 or rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards cannot be split into groups of {group_size}")
    if group_size == 1:
        return torch.zeros_like(rewards)
    grouped = rewards.view(-1, group_size)
    centred = grouped - grouped.mean(dim=-1, keepdim=True)
    if std_normalization:
        centred = centred / (grouped.std(dim=-1, keepdim=True) + eps)
    return centred.reshape(-1)


def broadcast_to_tokens(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B] -> [B, T]: the sample's scalar on each of its response tokens, 0 on padding."""
    return values.float().unsqueeze(-1) * mask.float()


def grpo_advantages(
    rewards: torch.Tensor,
    mask: torch.Tensor,
    group_size: int,
    *,
    std_normalization: bool = True,
    normalize_rewards: bool = True,
) -> torch.Tensor:
    """GRPO (and GSPO, which differs only in the loss): group-normalised reward on every token.

    normalize_rewards=False (``--disable-rewards-normalization``) uses the raw reward.
    """
    scalar = group_normalize_rewards(rewards, group_size, std_normalization=std_normalization) if normalize_rewards else rewards.float()
    return broadcast_to_tokens(scalar, mask)


def kl_penalized_token_rewards(
    rewards: torch.Tensor, kl: torch.Tensor, mask: torch.Tensor, kl_coef: float
) -> torch.Tensor:
    """Token rewards: ``-kl_coef * kl`` on each response token, the scalar reward added on the
    last unmasked token of each sample (where the outcome is observed)."""
    m = mask.float()
    token_rewards = -kl_coef * kl.float() * m
    counts = m.sum(dim=-1)
    if (counts == 0).any():
        bad = int(torch.nonzero(counts == 0)[0].item())
        raise ValueError(f"sample {bad} has no unmasked response token")
    positions = torch.arange(m.shape[-1], device=m.device).expand_as(m)
    last = torch.where(m > 0, positions, torch.full_like(positions, -1)).max(dim=-1).values
    token_rewards[torch.arange(m.shape[0], device=m.device), last] += rewards.float()
    return token_rewards


def discounted_returns(token_rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    """G_t = r_t + gamma * G_{t+1}, per row, over the padded time axis (padding carries 0 reward)."""
    returns = torch.zeros_like(token_rewards)
    running = torch.zeros(token_rewards.shape[0], dtype=token_rewards.dtype, device=token_rewards.device)
    for t in range(token_rewards.shape[-1] - 1, -1, -1):
        running = token_rewards[:, t] + gamma * running
        returns[:, t] = running
    return returns


def reinforce_plus_plus_returns(
    rewards: torch.Tensor,
    kl: torch.Tensor,
    mask: torch.Tensor,
    *,
    kl_coef: float = 0.0,
    gamma: float = 1.0,
) -> torch.Tensor:
    """REINFORCE++ (arXiv:2501.03262): discounted returns of KL-penalised token rewards.

    ``kl`` is a per-token estimate of KL(policy || reference) (use ``approx_kl``); with
    ``kl_coef=0`` the return on every token equals gamma^(distance to the last token) * reward.
    Returned values are the advantages (slime whitens them with ``--normalize-advantages``).
    """
    return discounted_returns(kl_penalized_token_rewards(rewards, kl, mask, kl_coef), gamma) * mask.float()


def reinforce_plus_plus_baseline_advantages(
    rewards: torch.Tensor,
    kl: torch.Tensor,
    mask: torch.Tensor,
    group_size: int,
    *,
    kl_coef: float = 0.0,
) -> torch.Tensor:
    """REINFORCE++-baseline: (reward - group mean) on every token, minus ``kl_coef * kl``."""
    baseline = group_normalize_rewards(rewards, group_size, std_normalization=False)
    return (baseline.unsqueeze(-1) - kl_coef * kl.float()) * mask.float()


def opd_advantages(
    teacher_log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    mask: torch.Tensor,
    *,
    opd_coef: float = 1.0,
    scalar_advantages: torch.Tensor | None = None,
    scalar_coef: float = 1.0,
) -> torch.Tensor:
    """On-policy distillation: token advantage ``teacher_logp - old_logp``.

    Positive where the (hint-augmented) teacher finds the sampled token more likely than the
    policy did. With ``scalar_advantages`` ([B] or [B, T], e.g. GRPO's), returns the combined
    signal ``scalar_coef * scalar + opd_coef * (teacher - old)`` (a method that combines a judged reward with distillation).
    """
    m = mask.float()
    token = (teacher_log_probs.float() - old_log_probs.float()) * m
    out = opd_coef * token
    if scalar_advantages is not None:
        scalar = scalar_advantages.float()
        if scalar.dim() == 1:
            scalar = scalar.unsqueeze(-1)
        out = out + scalar_coef * scalar * m
    return out


def whiten_advantages(advantages: torch.Tensor, mask: torch.Tensor, *, shift_mean: bool = True, eps: float = WHITEN_EPS) -> torch.Tensor:
    """Normalise advantages across the whole batch over masked tokens (``--normalize-advantages``).

    Uses the unbiased masked variance (Bessel-corrected over the count of masked tokens), as
    slime's ``distributed_masked_whiten``. Masked-out entries are returned as 0.
    """
    m = mask.float()
    mean = masked_mean(advantages.float(), m)
    centred = (advantages.float() - mean) * m
    count = m.sum()
    var = (centred**2).sum() / (count - 1).clamp_min(1.0)
    whitened = centred * torch.rsqrt(var + eps)
    if not shift_mean:
        whitened = whitened + mean * m
    return whitened * m
