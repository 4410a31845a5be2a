"""The public pages' trainer flags (trainer side) work, are aliases, or are refused
with the reason -- never accepted and ignored, never a misleading "did you mean"."""

from __future__ import annotations

import logging
import shlex

import pytest
import torch
from slime.utils.arguments import ConfigError, parse_config

NO_ENV: dict[str, str] = {}

# The pages' own words (openclaw-rl-skill.md's LoRA section; the second page's script blocks).
FIRST_PAGE_LORA_ARGS = "--lora-rank 64 --lora-alpha 128 --lora-dropout 0.05"
SECOND_PAGE_ROLLOUT_ARGS = "--num-rollout-workers 4 --rollout-batch-size 32"
SECOND_PAGE_REWARD_ARGS = "--rm-checkpoint /path/to/prm/checkpoint"
SECOND_PAGE_OPTIMIZER_ARGS = "--lr 1e-6 --lr-warmup-samples 100 --clip-grad 1.0 --ppo-clip-ratio 0.2 --num-epochs 1"


def test_lora_flags_without_use_lora_turn_lora_on_and_say_so(caplog):
    with caplog.at_level(logging.WARNING, logger="slime.utils.arguments"):
        cfg = parse_config(shlex.split(FIRST_PAGE_LORA_ARGS), env=NO_ENV)
    assert cfg.lora.use_lora and (cfg.lora.lora_rank, cfg.lora.lora_alpha, cfg.lora.lora_dropout) == (64, 128.0, 0.05)
    lines = [r.getMessage() for r in caplog.records if "without --use-lora" in r.getMessage()]
    assert lines == ["--lora-rank/--lora-alpha/--lora-dropout given without --use-lora: LoRA is on "
                     "(rank 64, alpha 128.0, dropout 0.05)"]


def test_lora_explicitly_off_stays_off_and_yaml_lora_keys_count(tmp_path):
    assert not parse_config(["--lora-rank", "8", "--no-use-lora"], env=NO_ENV).lora.use_lora
    assert not parse_config([], env=NO_ENV).lora.use_lora  # defaults alone never turn it on
    yml = tmp_path / "c.yaml"
    yml.write_text("lora:\n  lora_rank: 16\n")
    assert parse_config(["--config", str(yml)], env=NO_ENV).lora.use_lora


def test_second_page_flags_are_aliases_of_ours():
    argv = shlex.split(" ".join([SECOND_PAGE_ROLLOUT_ARGS, SECOND_PAGE_REWARD_ARGS, SECOND_PAGE_OPTIMIZER_ARGS]))
    cfg = parse_config([*argv, "--n-samples-per-prompt", "4"], env=NO_ENV)
    assert cfg.cluster.rollout_num_engines == 4
    assert cfg.reward.prm_model_path == "/path/to/prm/checkpoint"
    assert cfg.algorithm.eps_clip == 0.2 and cfg.optimizer.clip_grad == 1.0
    # 100 samples of warmup at 32 * 4 = 128 samples per optimizer step: one warmup step
    assert cfg.data.global_batch_size == 128 and cfg.optimizer.lr_warmup_iters == 1
    cfg = parse_config(["--ppo-clip-ratio", "0.1", "--lr-warmup-samples", "100", "--rollout-batch-size", "8"], env=NO_ENV)
    assert cfg.algorithm.eps_clip == 0.1 and cfg.algorithm.eps_clip_high == 0.1 and cfg.optimizer.lr_warmup_iters == 13
    with pytest.raises(ConfigError, match="both set"):
        parse_config(["--lr-warmup-samples", "100", "--lr-warmup-iters", "3"], env=NO_ENV)


def test_num_epochs_other_than_one_is_refused_with_the_alternatives():
    with pytest.raises(ConfigError, match=r"--num-epochs 2: .*one pass.*--num-steps-per-rollout.*--num-epoch"):
        parse_config(["--num-epochs", "2"], env=NO_ENV)


@pytest.mark.parametrize(("argv", "reason"), [
    (["--majority-vote-n", "5"], "judge setting"),
    (["--majority-vote-threshold", "0.6"], "judge setting"),
    (["--num-judge-workers", "4"], "judge setting"),
    (["--reward-aggregation", "majority"], "judge setting"),
    (["--value-clip"], "critic-free"),
    (["--value-clip-ratio", "0.2"], "critic-free"),
    (["--gae-lambda", "0.95"], "critic-free"),
    (["--lambd", "0.95"], "critic-free"),
    (["--max-turns", "10"], "--max-steps"),
    (["--async-collection"], "train_async.py"),
])
def test_documented_flags_that_do_not_apply_are_refused_with_the_reason(argv, reason, tmp_path):
    with pytest.raises(ConfigError) as err:
        parse_config(argv, env=NO_ENV)
    assert reason in str(err.value) and "did you mean" not in str(err.value)
    yml = tmp_path / "c.yaml"
    yml.write_text(f"{argv[0][2:].replace('-', '_')}: 1\n")  # the same key in a config file
    with pytest.raises(ConfigError, match=reason.replace(".", r"\.")):
        parse_config(["--config", str(yml)], env=NO_ENV)


def _train_once(model_path, *flags: str):
    from slime.backends.fsdp import ActorConfig, FSDPTrainActor
    from slime.backends.fsdp.train_loop import build_loss_call, train_rollout
    from slime.utils.types import Sample

    args = parse_config(["--hf-checkpoint", str(model_path), "--rollout-batch-size", "2", "--n-samples-per-prompt",
                         "2", "--lr", "1e-2", *flags], env=NO_ENV).to_namespace()
    actor = FSDPTrainActor(ActorConfig.from_args(args), args)
    samples = [Sample(index=i, group_index=i // 2, tokens=list(range(10 + i, 20 + 2 * i)), response_length=4,
                      loss_mask=[1] * 4, reward=float(i % 2)) for i in range(4)]
    metrics = train_rollout(actor, args, samples, build_loss_call(args))
    return actor, metrics


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU note; the GPU path is tested below")
def test_offload_optimizer_state_on_cpu_says_it_is_already_there(tiny_model_path, caplog):
    with caplog.at_level(logging.WARNING, logger="slime.backends.fsdp.actor"):
        actor, metrics = _train_once(tiny_model_path, "--offload-optimizer-state")
    try:
        assert any("already in CPU memory" in r.getMessage() for r in caplog.records)
        assert metrics["gradient/norm"] > 0 and actor.optimizer_state_devices() == {"cpu"}
    finally:
        actor.shutdown()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_offload_optimizer_state_on_gpu_keeps_adam_state_in_host_memory(tiny_model_path):
    actor, metrics = _train_once(tiny_model_path, "--offload-optimizer-state")
    try:
        assert actor.offload_optimizer_state and next(actor.model.parameters()).device.type == "cuda"
        assert metrics["gradient/norm"] > 0 and actor.optimizer_state_devices() == {"cpu"}
    finally:
        actor.shutdown()
    plain, _ = _train_once(tiny_model_path)
    try:
        assert plain.optimizer_state_devices() == {"cuda"}
    finally:
        plain.shutdown()
