"""Argument surface: slime names and defaults, reference aliases, YAML + override, env
defaults, unknown-flag suggestions, validation, method extension flags."""

from __future__ import annotations

import argparse
import dataclasses
import pickle
import subprocess
import sys

import pytest
from slime.utils.arguments import ConfigError, TrainConfig, parse_args, parse_config

NO_ENV: dict[str, str] = {}


def test_slime_defaults():
    cfg = parse_config([], env=NO_ENV)
    assert isinstance(cfg, TrainConfig)
    a = cfg.algorithm
    assert (a.advantage_estimator, a.eps_clip, a.eps_clip_high, a.eps_clip_c) == ("grpo", 0.2, 0.2, None)
    assert (a.kl_loss_type, a.kl_loss_coef, a.use_kl_loss, a.entropy_coef) == ("k1", 0.0, False, 0.0)
    assert (a.tis_clip, a.tis_clip_low, a.rewards_normalization, a.grpo_std_normalization) == (2.0, 0.0, True, True)
    o = cfg.optimizer
    assert (o.lr, o.clip_grad, o.seed, o.adam_beta1, o.adam_beta2) == (1e-6, 1.0, 1234, 0.9, 0.999)
    assert (cfg.rollout.rollout_temperature, cfg.rollout.rollout_top_p, cfg.rollout.rollout_top_k) == (1.0, 1.0, -1)
    assert (cfg.data.input_key, cfg.data.n_samples_per_prompt, cfg.data.rollout_seed) == ("input", 1, 42)
    assert (cfg.lora.lora_rank, cfg.lora.lora_alpha, cfg.lora.lora_dropout) == (64, 128.0, 0.0)
    assert cfg.plugins.rollout_function_path == "slime.rollout.sglang_rollout.generate_rollout"
    assert cfg.logging.log_dir == "./logs"
    assert cfg.cluster.train_backend == "fsdp"
    # derived: one optimizer step per rollout
    assert cfg.data.global_batch_size == cfg.data.rollout_batch_size * cfg.data.n_samples_per_prompt


def test_reference_aliases_map_to_slime_names():
    cfg = parse_config(
        [
            "--model-path", "/m", "--save-dir", "/ck", "--num-rollouts-per-prompt", "4",
            "--resume-from-checkpoint", "/ck/checkpoint-500", "--offload-optimizer-state",
            "--prm-model-path", "/prm", "--rollout-batch-size", "64", "--save-interval", "100",
            "--lr", "1e-6", "--weight-decay", "0.01", "--adam-beta1", "0.9", "--adam-beta2", "0.999",
            "--lora-rank", "64", "--lora-alpha", "128", "--lora-dropout", "0.05", "--use-lora",
        ],
        env=NO_ENV,
    )
    assert cfg.rollout.hf_checkpoint == "/m"
    assert cfg.checkpoint.save == "/ck" and cfg.checkpoint.load == "/ck/checkpoint-500"
    assert cfg.data.n_samples_per_prompt == 4 and cfg.data.global_batch_size == 256
    assert cfg.cluster.offload_optimizer_state is True
    assert cfg.reward.prm_model_path == "/prm"
    assert cfg.lora.use_lora and cfg.lora.lora_dropout == 0.05
    same = parse_config(["--hf-checkpoint", "/m", "--save", "/ck", "--n-samples-per-prompt", "4", "--load", "/x"], env=NO_ENV)
    assert (same.rollout.hf_checkpoint, same.checkpoint.save, same.data.n_samples_per_prompt) == ("/m", "/ck", 4)


def test_env_defaults_and_precedence(tmp_path):
    # (majority voting is the judge's setting, not the trainer's: see tests/test_public_pages_flags.py)
    env = {"MODEL_PATH": "/env/model", "PRM_MODEL_PATH": "/env/prm"}
    cfg = parse_config([], env=env)
    assert cfg.rollout.hf_checkpoint == "/env/model" and cfg.reward.prm_model_path == "/env/prm"
    yml = tmp_path / "c.yaml"
    yml.write_text("prm_model_path: /yaml/prm\n")
    assert parse_config(["--config", str(yml)], env=env).reward.prm_model_path == "/yaml/prm"  # yaml beats env
    assert parse_config(["--config", str(yml), "--prm-model-path", "/cli"], env=env).reward.prm_model_path == "/cli"


def test_yaml_config_dashes_underscores_sections_and_cli_override(tmp_path):
    yml = tmp_path / "training_config.yaml"
    yml.write_text(
        "model-path: /yaml/model\n"
        "lora_rank: 16\n"
        "use-lora: true\n"
        "disable-rewards-normalization: true\n"
        "lora-target-modules: [q_proj, v_proj]\n"
        "rollout-stop: '</answer>'\n"
        "algorithm:\n  eps_clip_high: 0.28\n  kl_loss_type: low_var_kl\n"
        "apply-chat-template-kwargs: {enable_thinking: false}\n"
    )
    cfg = parse_config(["--config", str(yml), "--lora-rank", "32", "--no-use-lora"], env=NO_ENV)
    assert cfg.rollout.hf_checkpoint == "/yaml/model"
    assert cfg.lora.lora_rank == 32 and cfg.lora.use_lora is False  # command line wins
    assert cfg.algorithm.rewards_normalization is False
    assert cfg.lora.lora_target_modules == ("q_proj", "v_proj")
    assert cfg.rollout.rollout_stop == ("</answer>",)
    assert (cfg.algorithm.eps_clip_high, cfg.algorithm.kl_loss_type) == (0.28, "low_var_kl")
    assert cfg.data.apply_chat_template_kwargs == {"enable_thinking": False}
    # a dest name for a negative flag keeps its positive meaning
    yml.write_text("rewards_normalization: false\n")
    assert parse_config(["--config", str(yml)], env=NO_ENV).algorithm.rewards_normalization is False


@pytest.mark.parametrize(("text", "message"), [
    ("lora-rnak: 8\n", "did you mean --lora-rank"),
    ("lora-rank: eight\n", "lora-rank"),
    ("kl-loss-type: k9\n", "not one of"),
    ("- a list\n", "mapping"),
])
def test_yaml_errors(tmp_path, text, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(ConfigError, match=message):
        parse_config(["--config", str(bad)], env=NO_ENV)


def test_a_missing_yaml_file_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        parse_config(["--config", str(tmp_path / "missing.yaml")], env=NO_ENV)


def test_unknown_flag_suggests_closest():
    with pytest.raises(ConfigError, match=r"unknown flag --lora-rnak; did you mean --lora-rank\?"):
        parse_config(["--lora-rnak", "8"], env=NO_ENV)
    with pytest.raises(ConfigError, match="did you mean --eps-clip-high"):
        parse_config(["--eps-clip-hgh=0.3"], env=NO_ENV)
    with pytest.raises(ConfigError, match="unexpected argument 'stray'"):
        parse_config(["stray"], env=NO_ENV)
    # no prefix matching: --lora would silently mean something
    with pytest.raises(ConfigError, match="unknown flag --lora"):
        parse_config(["--lora", "8"], env=NO_ENV)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--rollout-batch-size", "3", "--n-samples-per-prompt", "2", "--global-batch-size", "4"], "not divisible by --global-batch-size 4"),
        (["--rollout-batch-size", "3", "--num-steps-per-rollout", "2"], "not divisible by --num-steps-per-rollout"),
        (["--eps-clip", "1.5"], "--eps-clip must be in"),
        (["--eps-clip-c", "0.9"], "--eps-clip-c"),
        (["--tis-clip-low", "3"], "--tis-clip-low"),
        (["--rollout-temperature", "0"], "--rollout-temperature"),
        (["--lora-rank", "0"], "--lora-rank must be >= 1"),
        (["--use-dynamic-batch-size"], "--max-tokens-per-gpu"),
        (["--debug-rollout-only", "--debug-train-only"], "exclusive"),
        (["--loss-type", "custom_loss"], "--custom-loss-function-path"),
        (["--kl-loss-type", "k5"], "invalid choice"),
        (["--lr", "abc"], "invalid float"),
        (["--global-batch-size", "4", "--num-steps-per-rollout", "3"], "set only one"),
        (["--actor-num-gpus-per-node", "3"], "micro_batch_size \\* world size"),
    ],
)
def test_validation_errors(argv, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(argv, env=NO_ENV)


def test_derived_values():
    cfg = parse_config(["--rollout-batch-size", "4", "--n-samples-per-prompt", "4", "--num-steps-per-rollout", "2"], env=NO_ENV)
    assert cfg.data.global_batch_size == 8
    cfg = parse_config(["--colocate", "--actor-num-gpus-per-node", "2"], env=NO_ENV)
    assert cfg.cluster.rollout_num_gpus == 2 and cfg.cluster.offload_train and cfg.cluster.offload_rollout
    cfg = parse_config(["--custom-loss-function-path", "x.py"], env=NO_ENV)
    assert cfg.algorithm.loss_type == "custom_loss"  # the reference passes only the path
    assert parse_config(["--load-debug-rollout-data", "r.pt"], env=NO_ENV).debug.debug_train_only
    assert parse_config(["--advantage-estimator", "on_policy_distillation"], env=NO_ENV).algorithm.use_opd


def test_frozen_picklable_namespace_and_overrides():
    cfg = parse_config(["--lora-target-modules", "q_proj", "k_proj", "--wandb-key", "s3cret"], env=NO_ENV)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.lora.lora_rank = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        cfg.extras["x"] = 1  # type: ignore[index]
    assert pickle.loads(pickle.dumps(cfg)) == cfg  # travels to Ray actors
    ns = cfg.to_namespace()
    assert isinstance(ns, argparse.Namespace)
    assert ns.lora_target_modules == ["q_proj", "k_proj"] and ns.eps_clip == 0.2 and ns.world_size == 1
    ns.eps_clip = 0.9  # a plugin scribbling on its copy cannot change the config
    assert cfg.algorithm.eps_clip == 0.2
    new = cfg.with_overrides(lr=1e-5)
    assert new.optimizer.lr == 1e-5 and cfg.optimizer.lr == 1e-6
    with pytest.raises(ConfigError, match="did you mean --lr"):
        cfg.with_overrides(lrr=1)
    assert cfg.to_dict()["lora"]["lora_target_modules"] == ["q_proj", "k_proj"]


def test_extra_args_providers_land_in_extras():
    def provider(parser):
        parser.add_argument("--opd-hint-max-len", type=int, default=256)
        parser.add_argument("--clip-range", type=float, default=0.2)

    cfg = parse_config(["--opd-hint-max-len", "64"], extra_args_providers=[provider], env=NO_ENV)
    assert cfg.extras == {"opd_hint_max_len": 64, "clip_range": 0.2}
    assert cfg.to_namespace().opd_hint_max_len == 64
    with pytest.raises(ConfigError, match="did you mean --opd-hint-max-len"):
        parse_config(["--opd-hint-max-lne", "3"], extra_args_providers=[provider], env=NO_ENV)

    def clashing(parser):
        parser.add_argument("--lr", type=float)

    with pytest.raises(ConfigError, match="conflicts"):
        parse_config([], extra_args_providers=[clashing], env=NO_ENV)
    ns = parse_args(["--opd-hint-max-len", "7"], add_custom_arguments=provider)
    assert ns.opd_hint_max_len == 7


def test_custom_config_path_values_in_extras(tmp_path):
    yml = tmp_path / "custom.yaml"
    yml.write_text("judge_prompt: 'Rate it'\nthreshold: 0.7\n")
    cfg = parse_config(["--custom-config-path", str(yml)], env=NO_ENV)
    assert cfg.extras["judge_prompt"] == "Rate it" and cfg.extras["threshold"] == 0.7


def test_command_line_errors_exit_2_and_help_works():
    code = "from slime.utils.arguments import parse_args; parse_args()"
    bad = subprocess.run([sys.executable, "-c", code, "--lora-rnak", "8"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert "did you mean --lora-rank?" in bad.stderr
    ok = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0
    for flag in ("--advantage-estimator", "--model-path", "--disable-rewards-normalization", "--config"):
        assert flag in ok.stdout


def test_extra_args_provider_from_file_and_yaml(tmp_path, monkeypatch):
    method = tmp_path / "my-method"
    method.mkdir()
    (method / "args.py").write_text(
        "def add_custom_arguments(parser):\n"
        "    parser.add_argument('--hint-mode', choices=['short', 'long'], default='short')\n"
    )
    monkeypatch.chdir(tmp_path)
    cfg = parse_config(["--extra-args-provider-path", "my-method/args.py", "--hint-mode", "long"], env=NO_ENV)
    assert cfg.extras["hint_mode"] == "long"
    yml = tmp_path / "c.yaml"
    yml.write_text("extra-args-provider-path: my-method/args.py\nhint-mode: long\n")
    assert parse_config(["--config", str(yml)], env=NO_ENV).extras["hint_mode"] == "long"
    assert parse_config(["--config", str(yml), "--hint-mode", "short"], env=NO_ENV).extras["hint_mode"] == "short"
    with pytest.raises(ConfigError, match="--extra-args-provider-path"):
        parse_config(["--extra-args-provider-path", "my-method/missing.py"], env=NO_ENV)


def test_slime_model_args_and_sglang_passthrough():
    # MODEL_ARGS / parallelism as slime's launch scripts spell them, plus --sglang-* for the engines
    argv = [
        "--train-backend", "megatron", "--actor-num-gpus-per-node", "2", "--rollout-batch-size", "4",
        "--tensor-model-parallel-size", "2", "--sequence-parallel",
        "--swiglu", "--num-layers", "36", "--hidden-size", "2560", "--group-query-attention",
        "--num-query-groups", "8", "--normalization", "RMSNorm", "--norm-epsilon", "1e-6",
        "--rotary-base", "1000000", "--qk-layernorm", "--untie-embeddings-and-output-weights",
        "--sglang-mem-fraction-static", "0.8", "--sglang-enable-dp-attention", "--sglang-router-port", "3000",
        "--sglang-context-length=4096",
    ]
    cfg = parse_config(argv, env=NO_ENV)
    m = cfg.megatron
    assert (m.tensor_model_parallel_size, m.sequence_parallel, m.num_layers, m.num_query_groups) == (2, True, 36, 8)
    assert (m.norm_epsilon, m.rotary_base, m.normalization, m.qk_layernorm) == (1e-6, 1000000, "RMSNorm", True)
    assert cfg.rollout.sglang_router_port == 3000
    assert cfg.rollout.sglang_args == {"mem_fraction_static": "0.8", "enable_dp_attention": True, "context_length": "4096"}
    with pytest.raises(ConfigError, match="not divisible by TP \\* PP \\* CP = 2"):
        parse_config(["--train-backend", "megatron", "--tensor-model-parallel-size", "2"], env=NO_ENV)


def test_model_parallel_flags_need_megatron() -> None:
    with pytest.raises(ConfigError, match="needs --train-backend megatron"):
        parse_config(["--tensor-model-parallel-size", "2"])
    cfg = parse_config(["--train-backend", "megatron", "--tensor-model-parallel-size", "2",
                        "--actor-num-gpus-per-node", "2", "--global-batch-size", "4", "--rollout-batch-size", "4",
                        "--n-samples-per-prompt", "1"])
    assert cfg.megatron.tensor_model_parallel_size == 2
