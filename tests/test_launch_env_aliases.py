"""The second public page's env vars reach the component that owns the setting (or are refused).

Each variable of `openclaw-rl-training-skill-hermes.md` is set on a real launcher plan
(`OPENCLAW_DRY_RUN=1`, the same `build_plan` the run scripts exec) and the trainer's command line is
parsed by slime's own parser, so the value is checked where it is used; a flag on the command line
wins over the env var. Variables that cannot apply are refused with the reason.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from slime.utils.arguments import parse_config

from openclaw.launch import LaunchError, build_plan

REPO = Path(__file__).resolve().parents[1]
PAGE_VARS = ("USE_LORA", "LORA_RANK", "LORA_ALPHA", "LORA_DROPOUT", "BATCH_SIZE", "GRAD_ACCUM_STEPS",
             "USE_GRADIENT_CHECKPOINTING", "LEARNING_RATE", "CLIP_GRAD_NORM", "PPO_CLIP_RATIO", "VALUE_CLIP",
             "OPENCLAW_DEBUG", "ROLLOUT_LOG_LEVEL", "TASK_TYPE", "MASTER_ADDR", "MASTER_PORT", "NNODES", "NODE_RANK",
             "GPUS_PER_NODE")
CLEARED = (*PAGE_VARS, "RAY_ADDRESS", "MODEL_PATH", "LORA_ARGS", "OPTIMIZER_ARGS", "ROLLOUT_ARGS", "CKPT_ARGS",
           "METHOD_ARGS", "OPENCLAW_API_KEY", "ENV_TYPE", "DATA_PATH", "MAX_STEPS", "PARALLEL_ENVS")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env.update(OPENCLAW_DRY_RUN="1", RL_BUFFER_DIR=str(tmp_path / "buf"), CKPT_SAVE_DIR=str(tmp_path / "ckpt"),
               LOG_DIR=str(tmp_path / "logs"), CPU_PRESET_MODEL="tiny", RAY_AUTH_MODE="disabled")
    env.update(extra)
    return env


def _plan(tmp_path: Path, recipe: str = "openclaw-combine", argv: tuple[str, ...] = (), **extra: str):
    return build_plan(recipe, list(argv), _env(tmp_path, **extra), REPO)


def _trainer(plan) -> object:
    argv = plan.trainer_argv()
    assert argv[:2] == ["python", "slime/train.py"]
    return parse_config(argv[2:], env={}).to_namespace()


def test_lora_vars_turn_lora_on_with_their_values(tmp_path: Path) -> None:
    args = _trainer(_plan(tmp_path, USE_LORA="true", LORA_RANK="8", LORA_ALPHA="24", LORA_DROPOUT="0.1"))
    assert args.use_lora and args.lora_rank == 8 and args.lora_alpha == 24 and args.lora_dropout == 0.1


def test_use_lora_false_trains_full_weights_even_where_the_preset_has_lora(tmp_path: Path) -> None:
    assert _trainer(_plan(tmp_path)).use_lora  # the CPU preset trains LoRA by default
    plan = _plan(tmp_path, USE_LORA="false")
    assert not _trainer(plan).use_lora
    assert "--lora-rank" not in plan.trainer_argv()
    with pytest.raises(LaunchError, match="USE_LORA=false but LORA_RANK"):
        _plan(tmp_path, USE_LORA="false", LORA_RANK="8")
    with pytest.raises(LaunchError, match="USE_LORA='maybe': expected true or false"):
        _plan(tmp_path, USE_LORA="maybe")


def test_optimizer_vars_and_command_line_wins(tmp_path: Path) -> None:
    env = dict(LEARNING_RATE="5e-7", CLIP_GRAD_NORM="0.5", PPO_CLIP_RATIO="0.1", USE_GRADIENT_CHECKPOINTING="true")
    args = _trainer(_plan(tmp_path, **env))
    assert (args.lr, args.clip_grad, args.eps_clip, args.gradient_checkpointing) == (5e-7, 0.5, 0.1, True)
    args = _trainer(_plan(tmp_path, argv=("--lr", "3e-6", "--eps-clip", "0.3"), **env))
    assert args.lr == 3e-6 and args.eps_clip == 0.3 and args.clip_grad == 0.5


def test_batch_size_and_gradient_accumulation(tmp_path: Path) -> None:
    args = _trainer(_plan(tmp_path, BATCH_SIZE="8", GRAD_ACCUM_STEPS="4"))
    assert args.global_batch_size == 8 and args.micro_batch_size == 2  # 4 accumulation steps of 2
    # without BATCH_SIZE: the preset's samples per step (1 prompt x 8 samples) are accumulated
    assert _trainer(_plan(tmp_path, GRAD_ACCUM_STEPS="8")).micro_batch_size == 1
    with pytest.raises(LaunchError, match="GRAD_ACCUM_STEPS=3 must divide"):
        _plan(tmp_path, BATCH_SIZE="8", GRAD_ACCUM_STEPS="3")


def test_value_clip_is_refused_because_the_methods_are_critic_free(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="VALUE_CLIP=true does not apply: the methods here are critic-free"):
        _plan(tmp_path, VALUE_CLIP="true")
    _plan(tmp_path, VALUE_CLIP="false")  # what happens here anyway: no value function


def test_debug_and_rollout_log_level_reach_server_and_judge(tmp_path: Path) -> None:
    plan = _plan(tmp_path, OPENCLAW_DEBUG="true")
    assert plan.server.argv[-2:] == ["--log-level", "debug"] and plan.judge.argv[-2:] == ["--log-level", "debug"]
    plan = _plan(tmp_path, ROLLOUT_LOG_LEVEL="DEBUG")
    assert plan.server.argv[-2:] == ["--log-level", "debug"] and "--log-level" not in plan.judge.argv
    plan = _plan(tmp_path, argv=("--log-level", "warning"), ROLLOUT_LOG_LEVEL="DEBUG")  # command line wins
    assert plan.server.argv[-2:] == ["--log-level", "warning"] and plan.server.argv.count("--log-level") == 1
    with pytest.raises(LaunchError, match="ROLLOUT_LOG_LEVEL='LOUD'"):
        _plan(tmp_path, ROLLOUT_LOG_LEVEL="LOUD")
    with pytest.raises(LaunchError, match="runs neither"):
        _plan(tmp_path, "terminal-rl", OPENCLAW_DEBUG="true")


def test_task_type_selects_the_terminal_tracks_tasks(tmp_path: Path) -> None:
    _plan(tmp_path, "terminal-rl", TASK_TYPE="bash_commands", DATA_PATH=str(REPO / "terminal-rl/data/train.jsonl"))
    with pytest.raises(LaunchError, match="TASK_TYPE=gui: terminal-rl trains bash_commands"):
        _plan(tmp_path, "terminal-rl", TASK_TYPE="gui")
    with pytest.raises(LaunchError, match="only terminal-rl has task types"):
        _plan(tmp_path, TASK_TYPE="bash_commands")


def test_single_node_vars_reach_the_trainer(tmp_path: Path) -> None:
    plan = _plan(tmp_path, MASTER_ADDR="localhost", MASTER_PORT="6000", NNODES="1", NODE_RANK="0", GPUS_PER_NODE="0")
    env = plan.runtime_env["env_vars"]
    assert env["MASTER_ADDR"] == "localhost" and env["MASTER_PORT"] == "6000"  # the process group's rendezvous
    assert _trainer(plan).actor_num_nodes == 1
    assert plan.settings.num_gpus == 0


def test_multi_node_and_missing_gpus_are_refused_with_what_is_needed(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="NNODES=2: a multi-node run here is one Ray cluster.*ray start --head"):
        _plan(tmp_path, NNODES="2")
    with pytest.raises(LaunchError, match="NODE_RANK=1: only node 0 launches"):
        _plan(tmp_path, NODE_RANK="1")
    with pytest.raises(LaunchError, match=r"GPUS_PER_NODE=8 but this machine has 0 GPU\(s\)"):
        _plan(tmp_path, GPUS_PER_NODE="8")


def test_the_run_script_shows_each_page_var_in_its_dry_run(tmp_path: Path) -> None:
    env = _env(tmp_path, USE_LORA="true", LORA_RANK="8", LEARNING_RATE="5e-7", BATCH_SIZE="8")
    out = subprocess.run(["bash", "openclaw-combine/run_qwen3_7b_openclaw_combine.sh"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    page = next(line for line in out.stdout.splitlines() if line.startswith("env: "))
    for var, value in (("USE_LORA", "true"), ("LORA_RANK", "8"), ("LEARNING_RATE", "5e-7"), ("BATCH_SIZE", "8")):
        assert f"{var}={value} -> trainer" in page
    submit = next(line for line in out.stdout.splitlines() if line.startswith("would run submit: "))
    assert "--lora-rank 8" in " ".join(shlex.split(submit))


@pytest.mark.parametrize("var", ["TINKER_ENDPOINT", "TINKER_API_KEY"])
def test_tinker_env_on_a_slime_recipe_is_refused_naming_the_tinker_launcher(var: str) -> None:
    """The first page's cloud form sets TINKER_* and runs the combine script: a slime recipe must not
    silently train locally while the user believes it trains on Tinker."""
    from openclaw.launch.page_env import read_page_env
    from openclaw.launch.settings import Settings

    with pytest.raises(LaunchError, match=rf"{var} set.*deploy_to_tinker\.sh"):
        read_page_env(Settings.from_env({var: "x"}, REPO), "openclaw-combine", live=True)


def test_reward_args_are_routed_like_command_line_flags(tmp_path: Path) -> None:
    """REWARD_ARGS (the second page's script variable) is not ignored: each flag goes to the
    component that declares it, and one nobody declares is an error naming it."""
    from openclaw.launch.settings import Settings

    assert Settings.from_env({"REWARD_ARGS": "--majority-vote-n 5 --judge-timeout 7"}, REPO).reward_args == (
        "--majority-vote-n", "5", "--judge-timeout", "7")
    plan = _plan(tmp_path, "openclaw-combine", REWARD_ARGS="--majority-vote-n 5")
    judge = plan.judge.argv
    assert judge[judge.index("--majority-vote-n") + 1] == "5"
    with pytest.raises(LaunchError, match="--no-such-reward-flag"):
        _plan(tmp_path, "openclaw-combine", REWARD_ARGS="--no-such-reward-flag 1")
