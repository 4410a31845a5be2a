"""Algorithms against hand-computed numbers (the arithmetic is written out next to each case)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from slime.algorithms import (
    approx_kl,
    compute_advantages,
    entropy_from_logits,
    group_normalize_rewards,
    grpo_advantages,
    gspo_sequence_kl,
    log_probs_from_logits,
    make_reducer,
    opd_advantages,
    per_sample_mean,
    policy_loss,
    ppo_clipped_loss,
    reinforce_plus_plus_baseline_advantages,
    reinforce_plus_plus_returns,
    sft_loss,
    sum_of_sample_mean,
    truncated_importance_weights,
    whiten_advantages,
)
from slime.utils.arguments import parse_config

LN2 = math.log(2.0)
LN15 = math.log(1.5)


def close(actual: torch.Tensor, expected, tol: float = 1e-5) -> None:
    torch.testing.assert_close(actual.float(), torch.tensor(expected, dtype=torch.float32), atol=tol, rtol=0)


# ---------------------------------------------------------------- reductions


def test_reductions_per_sample_vs_per_token():
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 99.0, float("nan")]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    close(per_sample_mean(values, mask), [2.0, 4.0])  # (1+2+3)/3, 4/1; padding ignored, NaN too
    close(sum_of_sample_mean(values, mask), 6.0)
    close(make_reducer(mask)(values), 3.0)  # (2 + 4) / 2 samples
    close(make_reducer(mask, per_token=True)(values), 2.5)  # (1+2+3+4) / 4 tokens
    close(make_reducer(mask, num_samples=4)(values), 1.5)  # global batch of 4 samples: 6 / 4


def test_fully_masked_sample_contributes_zero_not_nan():
    values = torch.tensor([[5.0, 5.0], [1.0, 1.0]])
    mask = torch.tensor([[0, 0], [1, 1]])
    close(per_sample_mean(values, mask), [0.0, 1.0])


# ---------------------------------------------------------------- GRPO


def test_grpo_group_normalisation_std_and_mean_only():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0])
    # group [1, 0]: mean .5, centred [.5, -.5], unbiased std sqrt((.25+.25)/1) = .70711
    s = 0.5 / (math.sqrt(0.5) + 1e-6)
    close(group_normalize_rewards(rewards, 2), [s, -s, -s, s])
    close(group_normalize_rewards(rewards, 2, std_normalization=False), [0.5, -0.5, -0.5, 0.5])
    # group of 4 [1,0,0,0]: mean .25, centred [.75,-.25,-.25,-.25], var (.5625+3*.0625)/3 = .25, std .5
    close(group_normalize_rewards(torch.tensor([1.0, 0.0, 0.0, 0.0]), 4), [1.5, -0.5, -0.5, -0.5], tol=1e-4)


def test_grpo_single_sample_groups_and_constant_groups_give_zero():
    close(group_normalize_rewards(torch.tensor([3.0, -1.0]), 1), [0.0, 0.0])
    close(group_normalize_rewards(torch.tensor([1.0, 1.0, 0.0, 0.0]), 2), [0.0, 0.0, 0.0, 0.0])


def test_grpo_bad_group_size_is_rejected():
    with pytest.raises(ValueError, match="groups of 3"):
        group_normalize_rewards(torch.tensor([1.0, 0.0]), 3)


def test_grpo_advantages_broadcast_to_response_tokens_only():
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    adv = grpo_advantages(torch.tensor([1.0, 0.0]), mask, 2, std_normalization=False)
    close(adv, [[0.5, 0.5, 0.0], [-0.5, 0.0, 0.0]])
    raw = grpo_advantages(torch.tensor([1.0, 0.0]), mask, 2, normalize_rewards=False)
    close(raw, [[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])


# ---------------------------------------------------------------- REINFORCE++


def test_reinforce_plus_plus_discounted_returns_with_kl_in_reward():
    # token rewards: -0.5*[0.1, 0.2] and +1 on the last unmasked token -> [-0.05, 0.9, 0]
    # G_1 = 0.9; G_0 = -0.05 + 0.9 * 0.9 = 0.76
    out = reinforce_plus_plus_returns(
        torch.tensor([1.0]), torch.tensor([[0.1, 0.2, 0.0]]), torch.tensor([[1, 1, 0]]), kl_coef=0.5, gamma=0.9
    )
    close(out, [[0.76, 0.9, 0.0]])


def test_reinforce_plus_plus_reward_lands_on_last_unmasked_token():
    # an observation token in the middle (mask 0) is skipped; reward sits on token 2
    out = reinforce_plus_plus_returns(torch.tensor([2.0]), torch.zeros(1, 4), torch.tensor([[1, 0, 1, 0]]), gamma=0.5)
    close(out, [[0.5, 0.0, 2.0, 0.0]])  # G_2 = 2, G_1 = 1 (masked to 0), G_0 = 0.5


def test_reinforce_plus_plus_rejects_fully_masked_sample():
    with pytest.raises(ValueError, match="no unmasked"):
        reinforce_plus_plus_returns(torch.tensor([1.0]), torch.zeros(1, 2), torch.zeros(1, 2))


def test_reinforce_plus_plus_baseline():
    # baseline-subtracted rewards [.5, -.5]; minus 0.5 * kl
    out = reinforce_plus_plus_baseline_advantages(
        torch.tensor([1.0, 0.0]), torch.tensor([[0.2, 0.2], [0.0, 0.0]]), torch.ones(2, 2), 2, kl_coef=0.5
    )
    close(out, [[0.4, 0.4], [-0.5, -0.5]])


# ---------------------------------------------------------------- OPD


def test_opd_advantage_teacher_minus_old_and_combined():
    teacher = torch.tensor([[-1.0, -2.0, -9.0]])
    old = torch.tensor([[-1.5, -1.0, -1.0]])
    mask = torch.tensor([[1, 1, 0]])
    close(opd_advantages(teacher, old, mask), [[0.5, -1.0, 0.0]])
    close(opd_advantages(teacher, old, mask, opd_coef=2.0), [[1.0, -2.0, 0.0]])
    # 0.5 * 0.3 + 2 * [0.5, -1.0] = [1.15, -1.85]
    combined = opd_advantages(teacher, old, mask, opd_coef=2.0, scalar_advantages=torch.tensor([0.3]), scalar_coef=0.5)
    close(combined, [[1.15, -1.85, 0.0]])


# ---------------------------------------------------------------- whitening


def test_whiten_advantages_masked_unbiased():
    adv = torch.tensor([[1.0, 2.0, 3.0], [4.0, 100.0, 100.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    # mean 2.5, centred [-1.5, -.5, .5, 1.5], var (2.25+.25+.25+2.25)/3 = 5/3
    sd = math.sqrt(5 / 3)
    close(whiten_advantages(adv, mask), [[-1.5 / sd, -0.5 / sd, 0.5 / sd], [1.5 / sd, 0.0, 0.0]], tol=1e-4)


# ---------------------------------------------------------------- PPO clip


def _kl(ratios):  # ppo_kl = old - new = -log(ratio)
    return -torch.log(torch.tensor(ratios))


def test_ppo_clipped_loss_symmetric():
    loss, clip = ppo_clipped_loss(_kl([1.5, 0.5, 1.5, 0.5]), torch.tensor([1.0, 1.0, -1.0, -1.0]), 0.2)
    # A=+1, r=1.5: max(-1.5, -1.2) = -1.2 (clipped); r=.5: max(-.5, -.8) = -.5
    # A=-1, r=1.5: max(1.5, 1.2) = 1.5;              r=.5: max(.5, .8) = .8 (clipped)
    close(loss, [-1.2, -0.5, 1.5, 0.8])
    close(clip, [1.0, 0.0, 0.0, 1.0])


def test_ppo_clipped_loss_asymmetric_high():
    loss, _ = ppo_clipped_loss(_kl([1.5, 0.5]), torch.tensor([1.0, -1.0]), 0.2, eps_clip_high=0.28)
    close(loss, [-1.28, 0.8])


def test_ppo_dual_clip_caps_negative_advantage_loss():
    loss, _ = ppo_clipped_loss(_kl([5.0, 2.0, 5.0]), torch.tensor([-1.0, -1.0, 1.0]), 0.2, eps_clip_c=3.0)
    # A=-1, r=5: max(5, 1.2) = 5 -> capped at 3; r=2: 2 < 3 stays; A=+1: -1.2 unaffected
    close(loss, [3.0, 2.0, -1.2])
    with pytest.raises(ValueError, match="> 1.0"):
        ppo_clipped_loss(_kl([1.0]), torch.tensor([1.0]), 0.2, eps_clip_c=0.5)


# ---------------------------------------------------------------- GSPO


def test_gspo_sequence_ratio_and_gradient():
    new = torch.tensor([[-1.0, -2.0, -5.0]], requires_grad=True)
    old = torch.tensor([[-1.5, -2.1, 0.0]])
    mask = torch.tensor([[1, 1, 0]])
    kl = gspo_sequence_kl(new, old, mask)
    close(kl.detach(), [[-0.3, -0.3, -0.3]])  # mean(old - new) over the 2 real tokens
    loss, _ = ppo_clipped_loss(kl, torch.ones(1, 3), 0.5)  # ratio e^.3 = 1.35 < 1.5: unclipped
    (loss * mask).sum().backward()
    # d/dnew_t of -2 * exp(mean(new - old)) = -2 * e^.3 / 2 per real token
    g = -math.exp(0.3)
    close(new.grad, [[g, g, 0.0]], tol=1e-4)


# ---------------------------------------------------------------- KL


def test_kl_estimators():
    lp, base = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    close(approx_kl(lp, base, "k1"), [LN2])
    close(approx_kl(lp, base, "k2"), [LN2**2 / 2])
    close(approx_kl(lp, base, "k3"), [0.5 - 1 + LN2])  # exp(-ln2) - 1 + ln2
    close(approx_kl(lp, base, "low_var_kl"), [0.5 - 1 + LN2])
    # log ratio -20: k3 = e^20 - 1 - 20 (huge); low_var_kl clamps to 10
    far = approx_kl(torch.tensor([-20.0]), torch.tensor([0.0]), "low_var_kl")
    close(far, [10.0])
    assert approx_kl(torch.tensor([-20.0]), torch.tensor([0.0]), "k3").item() > 1e8
    with pytest.raises(ValueError, match="unknown KL"):
        approx_kl(lp, base, "k4")


# ---------------------------------------------------------------- entropy / log-probs


def test_entropy_hand_values():
    uniform = torch.zeros(1, 4)
    skewed = torch.log(torch.tensor([[0.5, 0.25, 0.25]]))
    close(entropy_from_logits(uniform), [math.log(4)])
    close(entropy_from_logits(skewed), [0.5 * LN2 + 0.5 * math.log(4)])
    close(log_probs_from_logits(skewed, torch.tensor([1])), [math.log(0.25)])
    # temperature 2 on logits [ln4, 0]: softmax([ln2, 0]) = [2/3, 1/3]
    close(log_probs_from_logits(torch.tensor([[math.log(4), 0.0]]), torch.tensor([1]), temperature=2.0), [math.log(1 / 3)])


def test_entropy_chunked_matches_direct_including_gradient():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 7, requires_grad=True)
    direct = torch.distributions.Categorical(logits=logits).entropy()
    (g_direct,) = torch.autograd.grad(direct.sum(), logits)
    chunked = entropy_from_logits(logits, chunk_tokens=2)  # 15 rows in chunks of 2, checkpointed
    (g_chunked,) = torch.autograd.grad(chunked.sum(), logits)
    torch.testing.assert_close(chunked, direct, atol=1e-5, rtol=0)
    torch.testing.assert_close(g_chunked, g_direct, atol=1e-5, rtol=0)
    tokens = torch.randint(0, 7, (3, 5))
    ref = torch.log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(log_probs_from_logits(logits, tokens, chunk_tokens=4), ref, atol=1e-5, rtol=0)


# ---------------------------------------------------------------- TIS


def test_truncated_importance_sampling():
    old = torch.tensor([-1.0, -1.0, -1.0])
    rollout = torch.tensor([-1.0, -2.0, 0.0])
    res = truncated_importance_weights(old, rollout, clip=2.0)
    close(res.raw, [1.0, math.e, math.exp(-1)])
    close(res.weights, [1.0, 2.0, math.exp(-1)])
    close(res.clipped, [0.0, 1.0, 0.0])
    low = truncated_importance_weights(old, rollout, clip=2.0, clip_low=0.5)
    close(low.weights, [1.0, 2.0, 0.5])
    close(low.clipped, [0.0, 1.0, 1.0])


# ---------------------------------------------------------------- default policy loss


def test_policy_loss_hand_computed_and_gradient(loss_batch):
    cfg = parse_config([]).algorithm  # eps_clip .2, no KL, no entropy
    batch = loss_batch()
    loss, m = policy_loss(batch, config=cfg)
    # per-token pg: s0 [-1.2 (clipped), -1.0], s1 [.8 (clipped)]; sample means [-1.1, .8]; mean -0.15
    close(loss.detach(), -0.15)
    close(m["loss/pg"], -0.15)
    close(m["loss/total"], -0.15)
    close(m["policy/clipfrac"], 0.75)  # sample fractions [.5, 1]
    close(m["policy/ppo_kl"], ((-LN15) / 2 + LN2) / 2)
    loss.backward()
    # only the unclipped token (s0, t1) has a gradient: -ratio*A = -1, / 2 tokens / 2 samples
    close(batch["log_probs"].grad, [[0.0, -0.25], [0.0, 0.0]])


def test_policy_loss_per_token_kl_entropy_and_parts(loss_batch):
    cfg = parse_config(["--use-kl-loss", "--kl-loss-coef", "0.1", "--entropy-coef", "0.01"]).algorithm
    batch = loss_batch()
    batch["ref_log_probs"] = batch["old_log_probs"]
    batch["entropy"] = torch.tensor([[1.0, 1.0], [2.0, 0.0]])
    loss, m = policy_loss(batch, config=cfg)
    kl = (LN15 / 2 - LN2) / 2  # k1 = new - ref: sample means [ln1.5/2, -ln2]
    close(m["loss/kl"], kl)
    close(m["policy/entropy"], 1.5)  # sample means [1, 2]
    close(loss.detach(), -0.15 - 0.01 * 1.5 + 0.1 * kl)
    per_token = parse_config(["--calculate-per-token-loss"]).algorithm
    loss_t, _ = policy_loss(loss_batch(), config=per_token)
    close(loss_t.detach(), (-1.2 - 1.0 + 0.8) / 3)
    batch = loss_batch()
    batch["advantage_parts"] = {"binary": batch["advantages"], "opd": torch.zeros(2, 2)}
    _, m = policy_loss(batch, config=parse_config([]).algorithm)
    close(m["loss/binary"], -0.15)
    close(m["loss/opd"], 0.0)


def test_policy_loss_with_tis_and_rollout_logprobs(loss_batch):
    batch = loss_batch()
    # engine log-probs: token (0,0) engine was less confident by 1 nat -> weight e capped to 2
    batch["rollout_log_probs"] = batch["old_log_probs"] - torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    cfg = parse_config(["--use-tis"]).algorithm
    loss, m = policy_loss(batch, config=cfg)
    # s0: [-1.2 * 2, -1.0] mean -1.7; s1 .8 -> (-1.7 + .8) / 2
    close(loss.detach(), -0.45)
    close(m["tis/clipfrac"], 0.25)  # s0 1/2 clipped, s1 none
    close(m["policy/train_rollout_logprob_abs_diff"], 0.25)
    # --use-rollout-logprobs takes the engine's numbers as the old policy
    cfg2 = parse_config(["--use-rollout-logprobs"]).algorithm
    batch2 = loss_batch()
    batch2["rollout_log_probs"] = batch2["log_probs"].detach().clone()
    loss2, m2 = policy_loss(batch2, config=cfg2)
    close(loss2.detach(), (-1.0 + 1.0) / 2)  # ratio 1 everywhere: s0 mean -1, s1 +1
    close(m2["policy/clipfrac"], 0.0)


def test_policy_loss_gspo_and_missing_keys(loss_batch):
    cfg = parse_config(["--advantage-estimator", "gspo"]).algorithm
    loss, m = policy_loss(loss_batch(), config=cfg)
    # s0 seq ratio exp(ln1.5 / 2) = 1.2247 > 1.2 -> clipped -1.2 per token; s1 ratio .5, A=-1 -> .8
    close(loss.detach(), (-1.2 + 0.8) / 2)
    batch = loss_batch()
    del batch["advantages"]
    with pytest.raises(KeyError, match="advantages"):
        policy_loss(batch, config=cfg)
    with pytest.raises(KeyError, match="ref_log_probs"):
        policy_loss(loss_batch(), config=parse_config(["--use-kl-loss"]).algorithm)


def test_policy_loss_entropy_from_logits(loss_batch):
    cfg = parse_config(["--entropy-coef", "0.5"]).algorithm
    logits = torch.zeros(2, 2, 4, requires_grad=True)  # uniform over 4 -> H = ln 4 everywhere
    loss, m = policy_loss(loss_batch(), config=cfg, logits=logits)
    close(m["policy/entropy"], math.log(4))
    close(loss.detach(), -0.15 - 0.5 * math.log(4))


def test_sft_loss():
    batch = {"log_probs": torch.tensor([[-1.0, -3.0], [-2.0, 0.0]]), "loss_masks": torch.tensor([[1, 1], [1, 0]])}
    loss, _ = sft_loss(batch, config=SimpleNamespace(calculate_per_token_loss=False))
    close(loss, 2.0)  # sample means [2, 2]


# ---------------------------------------------------------------- estimator dispatch


def test_compute_advantages_grpo_and_combined_opd():
    rewards = torch.tensor([1.0, 0.0])
    mask = torch.tensor([[1, 1], [1, 0]])
    cfg = parse_config(["--disable-grpo-std-normalization"])
    out = compute_advantages(cfg, rewards=rewards, mask=mask, group_size=2)
    close(out.advantages, [[0.5, 0.5], [-0.5, 0.0]])
    old = torch.tensor([[-1.0, -1.0], [-1.0, -1.0]])
    teacher = torch.tensor([[-0.5, -2.0], [-1.0, 0.0]])
    combo = parse_config(["--disable-grpo-std-normalization", "--use-opd", "--opd-kl-coef", "2", "--opd-scalar-coef", "0.5"])
    out = compute_advantages(combo, rewards=rewards, mask=mask, group_size=2, old_log_probs=old, teacher_log_probs=teacher)
    close(out.parts["binary"], [[0.25, 0.25], [-0.25, 0.0]])
    close(out.parts["opd"], [[1.0, -2.0], [0.0, 0.0]])
    close(out.advantages, [[1.25, -1.75], [-0.25, 0.0]])
    pure = parse_config(["--advantage-estimator", "on_policy_distillation"])
    out = compute_advantages(pure, rewards=rewards, mask=mask, group_size=2, old_log_probs=old, teacher_log_probs=teacher)
    close(out.advantages, [[0.5, -1.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match="teacher_log_probs"):
        compute_advantages(pure, rewards=rewards, mask=mask, group_size=2)


def test_compute_advantages_reinforce_pp_with_kl_coef_and_whitening():
    old = torch.tensor([[-1.0, -1.0]])
    ref = torch.tensor([[-1.2, -1.0]])  # k1 = old - ref = [.2, 0]
    cfg = parse_config(["--advantage-estimator", "reinforce_plus_plus", "--kl-coef", "0.5", "--n-samples-per-prompt", "1"])
    out = compute_advantages(cfg, rewards=torch.tensor([1.0]), mask=torch.ones(1, 2), group_size=1, old_log_probs=old, ref_log_probs=ref)
    close(out.advantages, [[0.9, 1.0]])  # token rewards [-.1, 1]; G0 = .9
    whitened = compute_advantages(
        parse_config(["--advantage-estimator", "reinforce_plus_plus", "--normalize-advantages"]),
        rewards=torch.tensor([1.0, 0.0]), mask=torch.ones(2, 1), group_size=1,
    )
    # mean .5, centred [.5, -.5], unbiased var (.25 + .25) / 1 = .5
    close(whitened.advantages, [[0.5 / math.sqrt(0.5)], [-0.5 / math.sqrt(0.5)]], tol=1e-4)
