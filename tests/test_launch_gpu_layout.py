"""The GPU layout and the Qwen3 recipes, planned on this CPU machine as a user with GPUs would see them.

`NUM_GPUS` makes a dry run plan for a GPU node that is not here (a real launch with more GPUs than
`nvidia-smi -L` lists is refused). Each plan is the run scripts' own `build_plan`; the placement is
read from the commands it would start: CUDA_VISIBLE_DEVICES of the server (the engine), the judge,
the Ray head and the job, and the trainer's flags as slime's own parser reads them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from slime.utils.arguments import parse_config

from openclaw.launch import LaunchError, build_plan
from openclaw.launch.layout import plan_layout

REPO = Path(__file__).resolve().parents[1]
LAYOUT_VARS = ("NUM_GPUS", "ACTOR_GPUS", "ROLLOUT_GPUS", "PRM_GPUS", "TRAIN_GPUS", "HF_CKPT", "MODEL_PATH",
               "PRM_MODEL_PATH", "JUDGE_MODEL_PATH", "MODEL_PRESET", "SAVE_CKPT", "SGLANG_API_KEY", "OPENCLAW_API_KEY",
               "LORA_ARGS", "OPTIMIZER_ARGS", "ROLLOUT_ARGS", "CKPT_ARGS", "USE_LORA", "RAY_ADDRESS", "OPENCLAW_HOST",
               "METHOD_ARGS", "GPUS_PER_NODE", "TP", "CKPT_SAVE_DIR", "PRM_M", "MAJORITY_VOTE_N")


def _plan(tmp_path: Path, recipe: str = "openclaw-rl", **extra: str):
    env = {k: v for k, v in os.environ.items() if k not in LAYOUT_VARS}
    env.update(OPENCLAW_DRY_RUN="1", RL_BUFFER_DIR=str(tmp_path / "buf"), LOG_DIR=str(tmp_path / "logs"),
               RAY_AUTH_MODE="disabled")
    env.update(extra)
    return build_plan(recipe, [], env, REPO)


def _trainer(plan):
    return parse_config(plan.trainer_argv()[plan.trainer_argv().index("slime/train.py") + 1:], env={})


def test_upstream_counts_give_that_layout_and_each_process_its_gpus(tmp_path: Path) -> None:
    plan = _plan(tmp_path, HF_CKPT="/models/Qwen3-4B", NUM_GPUS="8", ACTOR_GPUS="4", ROLLOUT_GPUS="2", PRM_GPUS="2",
                 PRM_MODEL_PATH="/models/Qwen3-4B", SAVE_CKPT=str(tmp_path / "ck"))
    text = plan.render()
    assert re.search(r"training \(Ray actors.*: GPUs 0,1,2,3", text)
    assert re.search(r"rollout  \(the server, SGLang\) *: GPUs 4,5", text)
    assert re.search(r"judge    \(the judge model\) *: GPUs 6,7", text)
    assert plan.model_path == "/models/Qwen3-4B"  # HF_CKPT is MODEL_PATH
    assert plan.server.env["CUDA_VISIBLE_DEVICES"] == "4,5"
    assert plan.judge.env["CUDA_VISIBLE_DEVICES"] == "6,7"
    assert plan.ray_head.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    head = plan.ray_head.argv
    assert head[head.index("--num-gpus") + 1] == "4"  # the trainer's placement group can only take its own
    assert plan.runtime_env["env_vars"]["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    cfg = _trainer(plan)
    assert cfg.cluster.actor_num_gpus_per_node == 4
    assert cfg.checkpoint.save == str(tmp_path / "ck")  # SAVE_CKPT is CKPT_SAVE_DIR
    # the Qwen3-4B preset, recognised from the folder name: its defaults are in the plan
    server = plan.server.argv
    assert server[server.index("--backend") + 1] == "sglang"
    assert server[server.index("--tp-size") + 1] == "2"
    assert server[server.index("--reasoning-parser") + 1] == "qwen3"
    assert server[server.index("--tool-call-parser") + 1] == "qwen25"
    assert "model preset qwen3-4b" in text and "memory:" in text
    assert cfg.optimizer.lr == pytest.approx(1e-5) and cfg.optimizer.gradient_checkpointing


@pytest.mark.parametrize(("env", "message"), [
    (dict(NUM_GPUS="8", ACTOR_GPUS="6", ROLLOUT_GPUS="4"), r"ACTOR_GPUS=6 \+ ROLLOUT_GPUS=4 \+ PRM_GPUS=0 = 10 GPUs, "
                                                          r"but there are 8"),
    (dict(NUM_GPUS="8", ACTOR_GPUS="4", PRM_GPUS="2"), r"PRM_GPUS=2 reserves GPUs for a judge model"),
    (dict(NUM_GPUS="8", TRAIN_GPUS="0,1", ACTOR_GPUS="2"), r"TRAIN_GPUS=0,1 .* both set"),
    (dict(NUM_GPUS="8", TRAIN_GPUS="0,1,2", ROLLOUT_GPUS="2,3"), r"share GPU\(s\) 2"),
    (dict(NUM_GPUS="4", TRAIN_GPUS="0,1", ROLLOUT_GPUS="2,5"), r"GPU ids run 0..3"),
    (dict(NUM_GPUS="8", ACTOR_GPUS="four"), r"ACTOR_GPUS='four' is not an integer"),
], ids=["oversubscribed", "prm-without-model", "counts-and-lists", "overlap", "out-of-range", "not-a-number"])
def test_bad_layouts_are_refused_before_anything_starts(tmp_path: Path, env: dict[str, str], message: str) -> None:
    with pytest.raises(LaunchError, match=message):
        _plan(tmp_path, HF_CKPT="/models/Qwen3-4B", **env)
    assert not (tmp_path / "logs").exists() and not (tmp_path / "buf").exists()


def test_the_judge_never_shares_a_training_gpu(tmp_path: Path) -> None:
    judge = str(tmp_path / "judge-model")  # the lists style: the judge's own ids, overlap refused
    with pytest.raises(LaunchError, match=r"PRM_GPUS=1 shares GPU\(s\) 1 with training or rollout"):
        _plan(tmp_path, HF_CKPT="/models/Qwen3-8B", NUM_GPUS="4", TRAIN_GPUS="0,1", ROLLOUT_GPUS="2,3",
              PRM_GPUS="1,", PRM_MODEL_PATH=judge)
    # two GPUs and a judge model, nothing said: training and rollout get one each, the judge the CPU
    plan = _plan(tmp_path, HF_CKPT="/models/Qwen3-8B", NUM_GPUS="2", PRM_MODEL_PATH="/models/judge")
    assert plan.judge.env["CUDA_VISIBLE_DEVICES"] == ""
    assert "no GPU is left for the judge model: it runs on the CPU" in plan.render()
    assert {plan.server.env["CUDA_VISIBLE_DEVICES"], plan.ray_head.env["CUDA_VISIBLE_DEVICES"]} == {"0", "1"}


def test_default_split_gives_the_judge_a_quarter(tmp_path: Path) -> None:
    plan = _plan(tmp_path, HF_CKPT="/models/Qwen3-8B", NUM_GPUS="8", PRM_MODEL_PATH="/models/judge")
    assert (plan.ray_head.env["CUDA_VISIBLE_DEVICES"], plan.server.env["CUDA_VISIBLE_DEVICES"],
            plan.judge.env["CUDA_VISIBLE_DEVICES"]) == ("0,1,2,3", "4,5", "6,7")
    assert "model preset qwen3-8b" in plan.render()


def test_one_gpu_lora_recipe_colocates_and_full_fine_tuning_is_refused(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "openclaw-combine", HF_CKPT="/models/Qwen3-4B-Thinking-2507", NUM_GPUS="1",
                 USE_LORA="true")
    text = plan.render()
    assert "rollout  (the server, SGLang)      : GPU 0 (colocated with training)" in text
    server = plan.server.argv
    assert server[server.index("--mem-fraction-static") + 1] == "0.4"  # the trainer gets the rest of the card
    assert _trainer(plan).lora.use_lora
    with pytest.raises(LaunchError, match="full fine-tuning does not fit beside the engine"):
        _plan(tmp_path, HF_CKPT="/models/Qwen3-4B", NUM_GPUS="1")


def test_preset_is_read_from_config_json_and_model_preset_names_one(tmp_path: Path) -> None:
    model = tmp_path / "my-finetune"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "qwen3", "hidden_size": 4096, "num_hidden_layers": 36}')
    assert "model preset qwen3-8b" in _plan(tmp_path, MODEL_PATH=str(model), NUM_GPUS="8").render()
    assert "model preset qwen3-4b" in _plan(tmp_path, MODEL_PATH=str(model), NUM_GPUS="8",
                                            MODEL_PRESET="qwen3-4b").render()
    with pytest.raises(LaunchError, match="MODEL_PRESET=qwen3-70b: known presets are qwen3-4b, qwen3-8b"):
        _plan(tmp_path, MODEL_PATH=str(model), NUM_GPUS="8", MODEL_PRESET="qwen3-70b")
    other = _plan(tmp_path, MODEL_PATH="/models/Llama-3-8B", NUM_GPUS="8").render()
    assert "no model preset fits /models/Llama-3-8B" in other and "--reasoning-parser" not in other


def test_env_vars_and_the_command_line_still_win_over_the_preset(tmp_path: Path) -> None:
    plan = _plan(tmp_path, HF_CKPT="/models/Qwen3-4B", NUM_GPUS="8", TP="1", OPTIMIZER_ARGS="--lr 3e-6",
                 EXTRA_ARGS="--no-bf16")
    server = plan.server.argv
    assert server[server.index("--tp-size") + 1] == "1" and server.count("--tp-size") == 1
    cfg = _trainer(plan)
    assert cfg.optimizer.lr == pytest.approx(3e-6)
    # OPTIMIZER_ARGS replaces the optimizer group only: what makes the model fit stays, unless turned off
    assert cfg.optimizer.gradient_checkpointing and not cfg.optimizer.bf16


def test_the_lora_scripts_keep_the_presets_memory_flags_on_one_gpu(tmp_path: Path) -> None:
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in LAYOUT_VARS}
    env.update(OPENCLAW_DRY_RUN="1", RL_BUFFER_DIR=str(tmp_path / "buf"), LOG_DIR=str(tmp_path / "logs"),
               RAY_AUTH_MODE="disabled", HF_CKPT="/models/Qwen3-4B", NUM_GPUS="1")
    out = subprocess.run(["bash", "openclaw-rl/run_qwen3_7b_lora_openclaw_rl.sh"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    submit = next(line for line in out.stdout.splitlines() if line.startswith("would run submit: "))
    for flag in ("--use-lora", "--bf16", "--gradient-checkpointing", "--use-dynamic-batch-size",
                 "--max-tokens-per-gpu 16384"):
        assert f" {flag}" in submit, flag


def test_more_gpus_than_found_is_refused_in_a_real_launch(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match=r"NUM_GPUS=8 but this machine has 0 GPU\(s\)"):
        plan_layout({"NUM_GPUS": "8"}.get, found=0, with_judge_model=False, dry_run=False)
    with pytest.raises(LaunchError, match="name GPUs, and there are none here"):
        plan_layout({"ACTOR_GPUS": "2"}.get, found=0, with_judge_model=False, dry_run=True)
    assert plan_layout({}.get, found=0, with_judge_model=False, dry_run=False) is None


def test_upstream_key_name_is_the_servers_key_and_stays_masked(tmp_path: Path) -> None:
    plan = _plan(tmp_path, SGLANG_API_KEY="sk-upstream-secret-1234")
    assert plan.settings.api_key == "sk-upstream-secret-1234"
    assert "sk-upstream-secret-1234" not in plan.render()


def test_a_cluster_trainer_reaches_the_server_at_this_nodes_address(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="cannot reach a server on 127.0.0.1: set OPENCLAW_HOST=0.0.0.0"):
        _plan(tmp_path, RAY_ADDRESS="http://10.1.2.3:8265")
    plan = _plan(tmp_path, RAY_ADDRESS="http://10.1.2.3:8265", OPENCLAW_HOST="0.0.0.0", OPENCLAW_API_KEY="k-123456789")
    addr = _trainer(plan).cluster.rollout_external_engine_addrs[0]
    host = addr.rsplit(":", 1)[0]
    assert not host.startswith("127.") and host != "0.0.0.0", addr


@pytest.mark.parametrize("recipe", ["openclaw-rl", "openclaw-opd", "openclaw-combine"])
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_each_method_full_and_lora_takes_the_qwen3_8b_preset(tmp_path: Path, recipe: str, lora: bool) -> None:
    extra = {"USE_LORA": "true"} if lora else {}
    plan = _plan(tmp_path, recipe, HF_CKPT="/models/Qwen3-8B", NUM_GPUS="8", **extra)
    text = plan.render()
    assert f"model preset qwen3-8b (8.2B, {'LoRA' if lora else 'full fine-tuning'})" in text
    assert "GPU layout (8 GPUs" in text and "memory: ~" in text
    cfg = _trainer(plan)
    assert cfg.lora.use_lora is lora
    assert cfg.optimizer.lr == pytest.approx(1e-5 if lora else 5e-6) and cfg.optimizer.gradient_checkpointing
    if lora:
        assert (cfg.lora.lora_rank, cfg.lora.lora_alpha) == (64, 128.0)
    server = plan.server.argv
    assert server[server.index("--reasoning-parser") + 1] == "qwen3"


def test_a_judge_model_on_its_own_gpus_is_one_sglang_engine_over_them(tmp_path: Path) -> None:
    plan = _plan(tmp_path, HF_CKPT="/models/Qwen3-4B", NUM_GPUS="8", ACTOR_GPUS="4", ROLLOUT_GPUS="2", PRM_GPUS="2",
                 PRM_MODEL_PATH="/models/Qwen3-4B")
    judge = plan.judge.argv
    assert judge[judge.index("--prm-backend") + 1] == "sglang" and judge[judge.index("--prm-tp-size") + 1] == "2"
    assert plan.judge_settings["judge-backend"] == "llm"
    # on the CPU (no GPU left for it) it stays the embedded engine
    cpu = _plan(tmp_path, HF_CKPT="/models/Qwen3-8B", NUM_GPUS="2", PRM_MODEL_PATH="/models/judge").judge.argv
    assert "--prm-backend" not in cpu


def test_judge_refuses_tensor_parallel_without_sglang() -> None:
    import argparse

    from openclaw.judge.config import JudgeConfig, JudgeConfigError, add_judge_args

    parser = argparse.ArgumentParser()
    add_judge_args(parser, env={})
    args = parser.parse_args(["--prm-model-path", "/m", "--prm-num-gpus-per-engine", "2"])
    with pytest.raises(JudgeConfigError, match="needs --prm-backend sglang"):
        JudgeConfig.from_args(args)  # validated when built
    ok = JudgeConfig.from_args(parser.parse_args(["--prm-model-path", "/m", "--prm-backend", "sglang",
                                                  "--prm-tp-size", "2"]))
    assert (ok.prm_backend, ok.prm_tp_size) == ("sglang", 2)
