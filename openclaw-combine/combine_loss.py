"""openclaw-combine's loss: binary RL + OPD under one PPO clip.

    A_t  = w_opd * (teacher_logp_t - old_logp_t) + w_rl * A_rl

A_rl is slime's scalar advantage of the judge score on every token (batch["advantages"], from
`--advantage-estimator grpo`): the score itself with `--disable-rewards-normalization` and
groups of one (baseline 0), or the score minus the group's mean when live turns are grouped
(`--n-samples-per-prompt G`, see openclaw-rl); without it, the raw reward.
    loss = PPO clipped surrogate of ratio_t = pi(y_t) / pi_old(y_t) with advantage A_t

`old` is the behaviour policy: the engine log-probs recorded with the turn (the batch's
`rollout_log_probs`), which is also what the rollout copies into `teacher_log_probs` for turns
without a hint, so their OPD term is exactly 0. w_opd / w_rl come from
`--openclaw-combine-w-opd` / `--openclaw-combine-w-rl` (env OPENCLAW_COMBINE_W_OPD /
OPENCLAW_COMBINE_W_RL; provider openclaw-combine/openclaw_combine_args.py).

    --custom-loss-function-path openclaw-combine/combine_loss.py:combine_loss

Logged: loss/total, loss/pg, loss/binary and loss/opd (each part's clipped surrogate alone),
policy/clipfrac, policy/ppo_kl, advantage/opd_mean, advantage/rl_mean (+ loss/kl with --use-kl-loss).
"""

from __future__ import annotations

from typing import Any

import torch
from slime.algorithms.kl import approx_kl
from slime.algorithms.policy_loss import ppo_clipped_loss


def combine_advantages(rewards: torch.Tensor, teacher: torch.Tensor | None, old: torch.Tensor, mask: torch.Tensor,
                       w_opd: float, w_rl: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(total, opd part, rl part), each [B, T] and zero outside the mask. `rewards` is [B] (a
    scalar per sample) or [B, T] (per-token scalar advantages)."""
    m = mask.float()
    opd = (teacher.float() - old.float()) * m if teacher is not None else torch.zeros_like(m)
    r = rewards.float()
    rl = (r.reshape(-1, 1) if r.dim() == 1 else r) * m
    return w_opd * opd + w_rl * rl, w_opd * opd, w_rl * rl


def combine_loss(batch: dict[str, Any], *, config: Any, reducer: Any, logits: torch.Tensor | None = None):
    mask = batch["loss_masks"].float()
    log_probs = batch["log_probs"]
    old = batch.get("rollout_log_probs")
    if old is None:
        old = batch["old_log_probs"]
    old = old.detach().float()
    # the method's provider (openclaw_combine_args.py) defines both, with openclaw.methods' defaults
    w_opd, w_rl = float(config.openclaw_combine_w_opd), float(config.openclaw_combine_w_rl)
    teacher = batch.get("teacher_log_probs")
    scalar = batch.get("advantages")
    if scalar is None or getattr(config, "use_opd", False):  # the framework's advantages hold no pure RL part
        scalar = batch["rewards"]
    adv, opd, rl = combine_advantages(scalar, teacher, old, mask, w_opd, w_rl)
    eps, eps_high, eps_c = float(config.eps_clip), getattr(config, "eps_clip_high", None), getattr(config, "eps_clip_c", None)
    ppo_kl = old - log_probs.float()
    pg, clipfrac = ppo_clipped_loss(ppo_kl, adv, eps, eps_high, eps_c)
    loss = reducer(pg)
    metrics = {"loss/pg": loss.detach(), "policy/clipfrac": reducer(clipfrac).detach(),
               "policy/ppo_kl": reducer(ppo_kl).detach(), "advantage/opd_mean": reducer(opd).detach(),
               "advantage/rl_mean": reducer(rl).detach()}
    with torch.no_grad():
        for name, part in (("binary", rl), ("opd", opd)):
            metrics[f"loss/{name}"] = reducer(ppo_clipped_loss(ppo_kl, part, eps, eps_high, eps_c)[0]).detach()
    if getattr(config, "use_kl_loss", False) and batch.get("ref_log_probs") is not None:
        kl = reducer(approx_kl(log_probs, batch["ref_log_probs"].detach(), getattr(config, "kl_loss_type", "k1")))
        loss = loss + float(getattr(config, "kl_loss_coef", 0.0)) * kl
        metrics["loss/kl"] = kl.detach()
    metrics["loss/total"] = loss.detach()
    return loss, metrics
