"""KL estimators between the policy and a base (reference) policy, per token.

Schulman, "Approximating KL Divergence" (http://joschu.net/blog/kl-approx.html), with
``log_ratio = log p(x) - log q(x)`` for samples drawn from p (the policy):
    k1 = log_ratio                    unbiased, high variance, can be negative
    k2 = log_ratio^2 / 2              biased, low variance, >= 0
    k3 = exp(-log_ratio) - 1 + log_ratio   unbiased, low variance, >= 0
    low_var_kl = k3 clamped to [-10, 10]   (slime's numerically safe variant)
"""

from __future__ import annotations

import torch

LOW_VAR_KL_CLAMP = 10.0


def approx_kl(
    log_probs: torch.Tensor,
    base_log_probs: torch.Tensor,
    kind: str = "k1",
    *,
    importance_ratio: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-token KL estimate; ``importance_ratio`` (pi/pi_old) reweights it for off-policy samples."""
    log_ratio = log_probs.float() - base_log_probs.float()
    if kind == "k1":
        kl = log_ratio
    elif kind == "k2":
        kl = log_ratio.pow(2) / 2.0
    elif kind in ("k3", "low_var_kl"):
        neg = -log_ratio
        kl = neg.exp() - 1.0 - neg
    else:
        raise ValueError(f"unknown KL estimator {kind!r}; expected one of k1, k2, k3, low_var_kl")
    if importance_ratio is not None:
        kl = importance_ratio * kl
    if kind == "low_var_kl":
        kl = kl.clamp(min=-LOW_VAR_KL_CLAMP, max=LOW_VAR_KL_CLAMP)
    return kl
