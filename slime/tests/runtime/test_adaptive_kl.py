"""Adaptive KL (--kl-loss-target): the controller's rule, its flags, and a training rank that steers
its KL loss weight step by step on the tiny real model, through a saved and resumed trainer state."""

from __future__ import annotations

import math

import pytest
from slime.algorithms.kl import AdaptiveKLCoef
from slime.ray.train_actor import TrainRayActor
from slime.utils.arguments import DEFAULT_KL_LOSS_HORIZON, ConfigError, parse_config
from slime.utils.types import Sample


def test_the_weight_falls_below_the_target_and_rises_above_it_by_at_most_a_fifth_per_horizon():
    below = AdaptiveKLCoef(coef=0.5, target=0.1, horizon=10)
    assert below.update(0.09) == pytest.approx(0.5 * (1 - 0.1 / 10))
    assert below.update(0.0) == pytest.approx(0.5 * (1 - 0.1 / 10) * (1 - 0.2 / 10))  # error clipped at -0.2
    above = AdaptiveKLCoef(coef=0.5, target=0.1, horizon=1)
    assert above.update(10.0) == pytest.approx(0.6)  # error clipped at +0.2
    on_target = AdaptiveKLCoef(coef=0.5, target=0.1, horizon=1)
    assert on_target.update(0.1) == pytest.approx(0.5)


def test_the_controller_refuses_what_it_cannot_steer_on():
    with pytest.raises(ValueError, match="target > 0"):
        AdaptiveKLCoef(coef=0.5, target=0.0, horizon=10)
    with pytest.raises(ValueError, match="horizon >= 1"):
        AdaptiveKLCoef(coef=0.5, target=0.1, horizon=0.5)
    with pytest.raises(ValueError, match="cannot steer"):
        AdaptiveKLCoef(coef=0.5, target=0.1, horizon=10).update(math.nan)


@pytest.mark.parametrize("flags, message", [
    (["--kl-loss-target", "0.1"], "needs --use-kl-loss"),
    (["--use-kl-loss", "--kl-loss-target", "0.1"], "starting --kl-loss-coef > 0"),
    (["--use-kl-loss", "--kl-loss-coef", "0.5", "--kl-loss-target", "-1"], "--kl-loss-target must be > 0"),
    (["--use-kl-loss", "--kl-loss-coef", "0.5", "--kl-loss-target", "0.1", "--kl-loss-horizon", "0"],
     "--kl-loss-horizon must be >= 1"),
    (["--use-kl-loss", "--kl-loss-coef", "0.5", "--kl-loss-horizon", "5"], "--kl-loss-horizon paces --kl-loss-target"),
])
def test_kl_target_flags_are_checked(flags, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(["--hf-checkpoint", "m", *flags])


def test_a_target_without_a_horizon_gets_the_default_pace_and_no_target_keeps_none():
    base = ["--hf-checkpoint", "m", "--use-kl-loss", "--kl-loss-coef", "0.5"]
    assert parse_config([*base, "--kl-loss-target", "0.1"]).algorithm.kl_loss_horizon == DEFAULT_KL_LOSS_HORIZON
    assert parse_config([*base, "--kl-loss-target", "0.1", "--kl-loss-horizon", "3"]).algorithm.kl_loss_horizon == 3.0
    assert parse_config(base).algorithm.kl_loss_horizon is None


def _samples() -> list[Sample]:
    out = []
    for i in range(4):
        prompt = [11 + 7 * i + k for k in range(3 + i)]
        resp = [300 + 13 * i + k for k in range(2 + 2 * i)]
        out.append(Sample(index=i, group_index=i // 2, tokens=prompt + resp, response_length=len(resp),
                          loss_mask=[1] * len(resp), reward=float(i % 2)))
    return out


def _rank(model, *extra: str, state_dir=None) -> TrainRayActor:
    config = parse_config(["--hf-checkpoint", str(model), "--rollout-batch-size", "2", "--n-samples-per-prompt", "2",
                           "--lr", "1e-2", "--weight-decay", "0", "--use-kl-loss", "--kl-loss-coef", "0.5",
                           "--kl-loss-type", "low_var_kl", *extra])
    rank = TrainRayActor()
    rank.init(config, 0, 1, "127.0.0.1", 0, trainer_state_dir=str(state_dir) if state_dir else None)
    return rank


def test_a_training_rank_steers_its_kl_weight_and_a_resumed_one_keeps_it(tiny_model_path, tmp_path):
    rank = _rank(tiny_model_path, "--kl-loss-target", "1e-4", "--kl-loss-horizon", "1")
    first = rank.train(0, _samples())
    # policy == base before the first update: KL 0, below the target, so the weight falls by a fifth
    assert first["loss/kl_coef"] == pytest.approx(0.5)
    assert first["loss/kl"] == pytest.approx(0.0, abs=1e-6)
    second = rank.train(1, _samples())
    assert second["loss/kl_coef"] == pytest.approx(0.4)
    assert second["loss/kl"] > 1e-4  # lr 1e-2 moved the policy well past the target
    # the loss trained with the step's weight, not the flag's 0.5
    assert second["loss/total"] == pytest.approx(second["loss/pg"] + 0.4 * second["loss/kl"], rel=1e-4, abs=1e-7)
    assert rank.kl_weight.coef == pytest.approx(0.48)  # above the target: up by a fifth
    rank.save_trainer_state(str(tmp_path / "state"))
    resumed = _rank(tiny_model_path, "--kl-loss-target", "1e-4", "--kl-loss-horizon", "1", state_dir=tmp_path / "state")
    assert resumed.train(2, _samples())["loss/kl_coef"] == pytest.approx(0.48)


def test_a_fixed_weight_logs_no_kl_weight(tiny_model_path):
    metrics = _rank(tiny_model_path).train(0, _samples())
    assert "loss/kl" in metrics and "loss/kl_coef" not in metrics


def test_plugins_of_every_form_read_the_steps_kl_weight(tmp_path):
    import torch
    from slime.backends.fsdp.train_loop import build_loss_call

    reference = tmp_path / "reference_loss.py"  # the reference's compute_loss(..., config) form
    reference.write_text("import torch\n"
                         "def compute_loss(policy_logits, reference_logits, rewards, advantages, config):\n"
                         "    return policy_logits.sum() * 0 + config['kl_coeff']\n")
    slime_form = tmp_path / "slime_loss.py"  # slime's fn(args, batch, logits, reducer) form
    slime_form.write_text("import torch\n"
                          "def loss_function(args, batch, logits, sum_of_sample_mean):\n"
                          "    return batch['log_probs'].sum() * 0 + args.kl_loss_coef, {}\n")
    batch = {"loss_masks": torch.ones(1, 2), "log_probs": torch.zeros(1, 2), "old_log_probs": torch.zeros(1, 2),
             "rewards": torch.zeros(1), "advantages": torch.zeros(1, 2)}
    for plugin in (reference, slime_form):
        args = parse_config(["--hf-checkpoint", "m", "--custom-loss-function-path", str(plugin), "--use-kl-loss",
                             "--kl-loss-coef", "0.5"]).to_namespace()
        call = build_loss_call(args)
        assert call(batch, None, None)[0].item() == pytest.approx(0.5)
        assert call.with_flags(kl_loss_coef=0.3)(batch, None, None)[0].item() == pytest.approx(0.3), plugin.name
