"""Pick and combine advantage estimators from the algorithm config (``--advantage-estimator``,
``--use-opd``, ``--normalize-advantages`` ...). ``cfg`` is an ``AlgorithmConfig``, a
``TrainConfig`` or slime's flat ``args``: only attribute reads are used."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from slime.algorithms.advantages import (
    grpo_advantages,
    opd_advantages,
    reinforce_plus_plus_baseline_advantages,
    reinforce_plus_plus_returns,
    whiten_advantages,
)
from slime.algorithms.kl import approx_kl


def algo_view(cfg: Any) -> Any:
    """The object holding the algorithm attributes (TrainConfig -> .algorithm; others as is)."""
    return getattr(cfg, "algorithm", cfg)


@dataclass
class AdvantageOutput:
    advantages: torch.Tensor  # [B, T], zero outside the mask
    returns: torch.Tensor  # [B, T]; equal to advantages for these critic-free estimators
    parts: dict[str, torch.Tensor] = field(default_factory=dict)  # e.g. {"binary": ..., "opd": ...}


def compute_advantages(
    cfg: Any,
    *,
    rewards: torch.Tensor,
    mask: torch.Tensor,
    group_size: int,
    old_log_probs: torch.Tensor | None = None,
    ref_log_probs: torch.Tensor | None = None,
    teacher_log_probs: torch.Tensor | None = None,
    rewards_processed: bool = False,
) -> AdvantageOutput:
    """Advantages for one rollout batch (groups contiguous, ``group_size`` samples each).

    ``rewards_processed``: the rewards come from a ``--custom-reward-post-process-path`` plugin,
    which replaces the estimator's own normalisation (GRPO's group mean/std, REINFORCE++-baseline's
    group mean), as in upstream slime."""
    a = algo_view(cfg)
    estimator = a.advantage_estimator
    m = mask.float()
    kl_coef = float(getattr(a, "kl_coef", 0.0))
    if kl_coef > 0.0 and (old_log_probs is None or ref_log_probs is None):
        raise ValueError("--kl-coef > 0 needs old_log_probs and ref_log_probs")
    kl = approx_kl(old_log_probs, ref_log_probs, "k1") if kl_coef > 0.0 else torch.zeros_like(m)

    parts: dict[str, torch.Tensor] = {}
    if estimator in ("grpo", "gspo"):
        scalar = grpo_advantages(
            rewards, m, group_size,
            std_normalization=getattr(a, "grpo_std_normalization", True),
            normalize_rewards=getattr(a, "rewards_normalization", True) and not rewards_processed,
        )
    elif estimator == "reinforce_plus_plus":
        scalar = reinforce_plus_plus_returns(rewards, kl, m, kl_coef=kl_coef, gamma=float(getattr(a, "gamma", 1.0)))
    elif estimator == "reinforce_plus_plus_baseline":
        if rewards_processed:
            scalar = (rewards.float().unsqueeze(-1) - kl_coef * kl.float()) * m
        else:
            scalar = reinforce_plus_plus_baseline_advantages(rewards, kl, m, group_size, kl_coef=kl_coef)
    elif estimator == "on_policy_distillation":
        scalar = None
    else:
        raise ValueError(f"unknown advantage estimator {estimator!r}")

    use_opd = estimator == "on_policy_distillation" or bool(getattr(a, "use_opd", False))
    if use_opd:
        if teacher_log_probs is None or old_log_probs is None:
            raise ValueError("on-policy distillation needs teacher_log_probs and old_log_probs for every sample")
        opd_coef = float(getattr(a, "opd_kl_coef", 1.0))
        opd = opd_advantages(teacher_log_probs, old_log_probs, m, opd_coef=opd_coef)
        parts["opd"] = opd
        if scalar is None:
            advantages = opd
        else:
            binary = float(getattr(a, "opd_scalar_coef", 1.0)) * scalar
            parts["binary"] = binary
            advantages = binary + opd
    else:
        assert scalar is not None
        parts["binary"] = scalar
        advantages = scalar

    if getattr(a, "normalize_advantages", False):
        advantages = whiten_advantages(advantages, m)
    return AdvantageOutput(advantages=advantages, returns=advantages, parts=parts)
