"""The default losses, assembled from the pure pieces in ``slime.algorithms``.

Batch layout (every per-token tensor right-padded to ``[B, T]``, T = longest response):
    log_probs          current policy log p(token), with grad                     (required)
    old_log_probs      policy log-probs before this update (trainer recompute)    (required for policy_loss)
    advantages         per-token advantages                                        (required for policy_loss)
    loss_masks         1 on trained response tokens, 0 on padding / observations  (required)
    ref_log_probs      reference log-probs                                         (with --use-kl-loss)
    rollout_log_probs  the engine's log-probs of the same tokens                   (with --use-tis / --use-rollout-logprobs)
    entropy            per-token entropy                                           (optional; else computed from logits)
    advantage_parts    {"binary": [B, T], "opd": [B, T]}                           (optional; logged as loss/<part>)

Every loss function has the internal signature
    loss_fn(batch, *, config, reducer, logits=None) -> (loss, metrics)
where ``reducer`` maps ``[B, T]`` to a scalar (see ``reduction.make_reducer``) and ``metrics``
values are detached scalar tensors named as in the logs (``loss/total``, ``loss/pg`` ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from slime.algorithms.compute import algo_view
from slime.algorithms.entropy import entropy_from_logits
from slime.algorithms.kl import approx_kl
from slime.algorithms.policy_loss import gspo_sequence_kl, ppo_clipped_loss, truncated_importance_weights
from slime.algorithms.reduction import Reducer, make_reducer

Metrics = dict[str, torch.Tensor]


def _require(batch: Mapping[str, Any], key: str, why: str) -> torch.Tensor:
    value = batch.get(key)
    if value is None:
        raise KeyError(f"batch is missing {key!r} ({why})")
    return value


def _loss_inputs(batch: Mapping[str, Any], config: Any,
                 reducer: Reducer | None) -> tuple[Any, torch.Tensor, Reducer]:
    """The algorithm settings, the response mask, and the reducer (the given one, else one over the
    mask, per token with --calculate-per-token-loss)."""
    a = algo_view(config)
    mask = _require(batch, "loss_masks", "response mask").float()
    return a, mask, reducer or make_reducer(mask, per_token=bool(getattr(a, "calculate_per_token_loss", False)))


def policy_loss(
    batch: Mapping[str, Any],
    *,
    config: Any,
    reducer: Reducer | None = None,
    logits: torch.Tensor | None = None,
) -> tuple[torch.Tensor, Metrics]:
    """PPO/GRPO/GSPO policy loss with optional TIS, KL loss and entropy bonus (slime's
    ``policy_loss_function``): loss = pg - entropy_coef * H + kl_loss_coef * KL."""
    a, mask, reduce = _loss_inputs(batch, config, reducer)
    log_probs = _require(batch, "log_probs", "current policy log-probs")
    advantages = _require(batch, "advantages", "compute them with slime.algorithms.compute_advantages").float()

    rollout_log_probs = batch.get("rollout_log_probs")
    if getattr(a, "use_rollout_logprobs", False):
        old_log_probs = _require(batch, "rollout_log_probs", "--use-rollout-logprobs")
    else:
        old_log_probs = _require(batch, "old_log_probs", "old policy log-probs")
    old_log_probs = old_log_probs.detach().float()

    if a.advantage_estimator == "gspo":
        ppo_kl = gspo_sequence_kl(log_probs.float(), old_log_probs, mask)
    else:
        ppo_kl = old_log_probs - log_probs.float()
    eps_clip_high = getattr(a, "eps_clip_high", None)
    pg, clipfrac = ppo_clipped_loss(ppo_kl, advantages, a.eps_clip, eps_clip_high, getattr(a, "eps_clip_c", None))

    metrics: Metrics = {}
    if getattr(a, "use_tis", False):
        rollout = _require(batch, "rollout_log_probs", "--use-tis")
        tis = truncated_importance_weights(
            _require(batch, "old_log_probs", "--use-tis compares trainer and engine log-probs"),
            rollout,
            clip=float(getattr(a, "tis_clip", 2.0)),
            clip_low=float(getattr(a, "tis_clip_low", 0.0)),
        )
        pg = pg * tis.weights
        metrics["tis/mean"] = reduce(tis.raw).detach()
        metrics["tis/clipfrac"] = reduce(tis.clipped).detach()

    pg_loss = reduce(pg)
    loss = pg_loss

    entropy = batch.get("entropy")
    entropy_coef = float(getattr(a, "entropy_coef", 0.0))
    if entropy is None and logits is not None:
        with torch.set_grad_enabled(torch.is_grad_enabled() and entropy_coef != 0.0):
            entropy = entropy_from_logits(logits)
    if entropy is not None:
        entropy_loss = reduce(entropy.float())
        if entropy_coef != 0.0:
            loss = loss - entropy_coef * entropy_loss
        metrics["policy/entropy"] = entropy_loss.detach()

    if getattr(a, "use_kl_loss", False):
        ref = _require(batch, "ref_log_probs", "--use-kl-loss")
        kl = approx_kl(log_probs, ref.detach(), getattr(a, "kl_loss_type", "k1"))
        kl_loss = reduce(kl)
        loss = loss + float(getattr(a, "kl_loss_coef", 0.0)) * kl_loss
        metrics["loss/kl"] = kl_loss.detach()

    metrics["loss/pg"] = pg_loss.detach()
    metrics["policy/clipfrac"] = reduce(clipfrac).detach()
    metrics["policy/ppo_kl"] = reduce(ppo_kl).detach()
    if rollout_log_probs is not None and batch.get("old_log_probs") is not None:
        # How far the trainer's recompute is from the engine's numbers (should be ~0 in fp32).
        diff = (batch["old_log_probs"].float() - rollout_log_probs.float()).abs()
        metrics["policy/train_rollout_logprob_abs_diff"] = reduce(diff).detach()
    for name, part in (batch.get("advantage_parts") or {}).items():
        with torch.no_grad():
            part_loss, _ = ppo_clipped_loss(ppo_kl.detach(), part.float(), a.eps_clip, eps_clip_high, getattr(a, "eps_clip_c", None))
            metrics[f"loss/{name}"] = reduce(part_loss).detach()
    metrics["loss/total"] = loss.detach()
    return loss, metrics


def sft_loss(batch: Mapping[str, Any], *, config: Any, reducer: Reducer | None = None,
             logits: torch.Tensor | None = None) -> tuple[torch.Tensor, Metrics]:
    """Negative log-likelihood of the response tokens (``--loss-type sft_loss``)."""
    _, _, reduce = _loss_inputs(batch, config, reducer)
    loss = -reduce(_require(batch, "log_probs", "current policy log-probs").float())
    return loss, {"loss/total": loss.detach(), "loss/sft": loss.detach()}


BUILTIN_LOSSES = {"policy_loss": policy_loss, "sft_loss": sft_loss}
