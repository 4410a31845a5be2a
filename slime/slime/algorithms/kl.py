"""KL estimators between the policy and a base (reference) policy, per token.

Schulman, "Approximating KL Divergence" (http://joschu.net/blog/kl-approx.html), with
``log_ratio = log p(x) - log q(x)`` for samples drawn from p (the policy):
    k1 = log_ratio                    unbiased, high variance, can be negative
    k2 = log_ratio^2 / 2              biased, low variance, >= 0
    k3 = exp(-log_ratio) - 1 + log_ratio   unbiased, low variance, >= 0
    low_var_kl = k3 clamped to [-10, 10]   (slime's numerically safe variant)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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


# The proportional error is clipped to this (Ziegler et al. 2019), so one noisy batch's KL moves
# the coefficient by at most 1 / horizon of it.
KL_ERROR_CLIP = 0.2


@dataclass
class AdaptiveKLCoef:
    """The KL-loss weight steered toward a target KL (Ziegler et al. 2019, "Fine-Tuning Language
    Models from Human Preferences", the controller TRL and verl call adaptive): after each train
    step, ``coef *= 1 + clip(kl / target - 1, -0.2, 0.2) / horizon``.

    Why: a fixed weight lets different tasks move the policy by very different amounts. On the
    personal-agent personas the same weight 0.5 let one preference move the policy to a batch KL
    of ~0.08 and held another at ~0.02, where it learned a third as much. A target KL fixes how far
    the policy may go from the base instead, and the weight follows. Written here rather than
    imported: TRL is not a dependency, and the rule is two lines.
    """

    coef: float
    target: float
    horizon: float

    def __post_init__(self) -> None:
        if not (self.coef > 0 and self.target > 0 and self.horizon >= 1):
            raise ValueError(f"adaptive KL needs coef > 0, target > 0 and horizon >= 1; got {self}")

    def update(self, measured_kl: float) -> float:
        """Move the weight after a step whose batch KL was ``measured_kl``; returns the new weight."""
        if not math.isfinite(measured_kl):
            raise ValueError(f"the step's KL is {measured_kl}: cannot steer the KL weight on it")
        error = min(max(measured_kl / self.target - 1.0, -KL_ERROR_CLIP), KL_ERROR_CLIP)
        self.coef *= 1.0 + error / self.horizon
        return self.coef
