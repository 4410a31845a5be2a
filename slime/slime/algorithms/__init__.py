"""RL algorithms as pure tensor functions (advantages, policy losses, KL, entropy, TIS).

Per-token tensors are right-padded ``[B, T]`` with an explicit response mask; per-sample
tensors are ``[B]`` with prompt groups contiguous. See ``loss.py`` for the batch layout.
"""

from slime.algorithms.advantages import (
    broadcast_to_tokens,
    discounted_returns,
    group_normalize_rewards,
    grpo_advantages,
    kl_penalized_token_rewards,
    opd_advantages,
    reinforce_plus_plus_baseline_advantages,
    reinforce_plus_plus_returns,
    whiten_advantages,
)
from slime.algorithms.compute import AdvantageOutput, compute_advantages
from slime.algorithms.entropy import entropy_from_logits, log_probs_from_logits
from slime.algorithms.kl import approx_kl
from slime.algorithms.loss import BUILTIN_LOSSES, policy_loss, sft_loss
from slime.algorithms.policy_loss import (
    TISResult,
    gspo_sequence_kl,
    ppo_clipped_loss,
    truncated_importance_weights,
)
from slime.algorithms.reduction import (
    make_reducer,
    masked_mean,
    masked_sum,
    per_sample_mean,
    sum_of_sample_mean,
)

__all__ = [
    "AdvantageOutput",
    "BUILTIN_LOSSES",
    "TISResult",
    "approx_kl",
    "broadcast_to_tokens",
    "compute_advantages",
    "discounted_returns",
    "entropy_from_logits",
    "group_normalize_rewards",
    "grpo_advantages",
    "gspo_sequence_kl",
    "kl_penalized_token_rewards",
    "log_probs_from_logits",
    "make_reducer",
    "masked_mean",
    "masked_sum",
    "opd_advantages",
    "per_sample_mean",
    "policy_loss",
    "ppo_clipped_loss",
    "reinforce_plus_plus_baseline_advantages",
    "reinforce_plus_plus_returns",
    "sft_loss",
    "sum_of_sample_mean",
    "truncated_importance_weights",
    "whiten_advantages",
]
