"""The dry-run plan says what the run will do, and a run script refuses what it cannot do.

Each test runs a real run script (`bash <folder>/run_*.sh`, OPENCLAW_DRY_RUN=1) and reads its plan:
`--config FILE` values reach the commands; WANDB_* turn Weights & Biases logging on for every recipe,
never showing the key; the judge the plan describes is the judge that runs, and a missing model or
checkpoint path stops the launch naming its variable; a flag the user gives replaces the recipe's
value (no flag twice on any command line), or is refused when the run could not work with it; a dry
run writes nothing; the evaluation scripts say they evaluate, and which script trains.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from slime.utils.arguments import parse_config

from openclaw.judge import add_judge_args
from openclaw.launch.routing import server_parser, trainer_parser

REPO = Path(__file__).resolve().parents[1]
COMBINE = "openclaw-combine/run_qwen3_7b_openclaw_combine.sh"
OPD = "openclaw-opd/run_qwen3_7b_openclaw_opd.sh"
RL = "openclaw-rl/run_qwen3_7b_openclaw_rl.sh"
TERMINAL = "terminal-rl/run_terminal_rl.sh"
SECRET = "wandb-secret-0123456789abcdef"
# Every variable a test here may set, cleared first so the caller's shell does not leak in.
CLEARED = ("RAY_ADDRESS", "MODEL_PATH", "BASE_MODEL_PATH", "LORA_ARGS", "OPTIMIZER_ARGS", "ROLLOUT_ARGS", "CKPT_ARGS",
           "METHOD_ARGS", "EXTRA_ARGS", "REWARD_ARGS", "OPENCLAW_API_KEY", "MAJORITY_VOTE_N", "PRM_MODEL_PATH",
           "JUDGE_MODEL_PATH", "RESUME_CKPT", "NUM_ROLLOUT", "DRY_RUN", "ENV_TYPE", "MAX_STEPS", "PARALLEL_ENVS",
           "DATA_PATH", "DATA_DIR", "WANDB_PROJECT", "WANDB_GROUP", "WANDB_API_KEY", "WANDB_KEY", "WANDB_MODE",
           "JUDGE_URL", "OPENCLAW_SERVER_URL", "TASKS_PATH")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    # a stand-in for the driver's tool listing no GPU: the CPU preset's plan on any machine
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    env.update(OPENCLAW_DRY_RUN="1", RL_BUFFER_DIR=str(tmp_path / "buf"), CKPT_SAVE_DIR=str(tmp_path / "ckpt"),
               LOG_DIR=str(tmp_path / "logs"), CPU_PRESET_MODEL="tiny", RAY_AUTH_MODE="disabled",
               PYTHON=sys.executable)
    env.update(extra)
    return env


def _data(script: str, tmp_path: Path) -> dict[str, str]:
    """A track's prompt file (not made in a dry run); live scripts import DATA_PATH, which must exist."""
    return {} if script.startswith("openclaw-") else {"DATA_PATH": str(tmp_path / "train.jsonl")}


def _run(script: str, tmp_path: Path, *args: str, cwd: Path = REPO, **extra: str) -> subprocess.CompletedProcess:
    path = script if cwd == REPO else str(REPO / script)
    return subprocess.run(["bash", path, *args], cwd=cwd, env=_env(tmp_path, **extra), capture_output=True,
                          text=True, timeout=300)


def _ok(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout


def _refused(out: subprocess.CompletedProcess, *names: str) -> str:
    assert out.returncode != 0, f"accepted instead of refused:\n{out.stdout[-3000:]}"
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    assert "would run" not in out.stdout  # stopped before anything was planned to start
    for name in names:
        assert name in out.stderr, (name, out.stderr[-2000:])
    return out.stderr


def _line(stdout: str, prefix: str) -> str:
    return next(ln for ln in stdout.splitlines() if ln.startswith(prefix))[len(prefix):]


def _command(stdout: str, component: str) -> list[str]:
    return shlex.split(_line(stdout, f"would run {component}: "))


def _trainer(stdout: str) -> list[str]:
    submit = _command(stdout, "submit")
    return submit[submit.index("--") + 3:]  # after `-- python slime/train.py`


def _args(stdout: str):  # noqa: ANN202 - the trainer's namespace
    return parse_config(_trainer(stdout), env={}).to_namespace()


def _runtime_env(stdout: str) -> dict[str, str]:
    return json.loads(_line(stdout, "runtime env: "))["env_vars"]


def _dests(argv: list[str], parser) -> list[str]:  # noqa: ANN001 - an argparse parser
    """The dest of every flag on a command line (an option's spellings share one dest)."""
    actions = parser._option_string_actions
    return [actions[tok.split("=", 1)[0]].dest for tok in argv
            if tok.startswith("--") and tok.split("=", 1)[0] in actions]


def _assert_no_flag_twice(stdout: str) -> None:
    trainer = _trainer(stdout)
    provider = trainer[trainer.index("--extra-args-provider-path"):trainer.index("--extra-args-provider-path") + 2]
    commands = [(trainer, trainer_parser(provider))]
    if "would run server: " in stdout:
        commands.append((_command(stdout, "server")[3:], server_parser({})))
    if "would run judge: " in stdout:
        import argparse

        judge = argparse.ArgumentParser(add_help=False)
        add_judge_args(judge, {})
        commands.append((_command(stdout, "judge")[3:], judge))
    for argv, parser in commands:
        dests = [d for d in _dests(argv, parser) if d != "rl_redact_patterns"]  # a repeatable flag
        twice = sorted({d for d in dests if dests.count(d) > 1})
        assert not twice, f"set twice: {twice} in {shlex.join(argv)}"


# ---- --config FILE ------------------------------------------------------------------------------

def test_config_file_values_are_what_the_run_uses(tmp_path: Path, tiny_model_path: Path) -> None:
    cfg = tmp_path / "training_config.yaml"
    cfg.write_text(f"model:\n  checkpoint_path: {tiny_model_path}\n"
                   "training:\n  method: combine\n  learning_rate: 3e-6\n  batch_size: 8\n  max_steps: 12\n")
    out = _ok(_run(COMBINE, tmp_path, "--config", str(cfg)))
    args = _args(out)
    assert (args.hf_checkpoint, args.lr, args.rollout_batch_size, args.num_rollout) == (
        str(tiny_model_path), 3e-6, 8, 12)
    server = _command(out, "server")
    assert server[server.index("--model-path") + 1] == str(tiny_model_path)  # serves what it trains
    assert "embedded CPU preset" not in out and "SmolLM2" not in out
    assert "--config" not in _trainer(out)  # expanded into flags, so the plan shows the values
    config = _line(out, "config: ")
    for shown in ("model.checkpoint_path", "training.learning_rate=3e-6 -> trainer --lr 3e-06",
                  "training.batch_size=8 -> trainer --rollout-batch-size 8", "training.max_steps=12 -> NUM_ROLLOUT"):
        assert shown in config, (shown, config)
    _assert_no_flag_twice(out)
    # a flag on the command line still wins over the file
    args = _args(_ok(_run(COMBINE, tmp_path, "--config", str(cfg), "--lr", "5e-6")))
    assert args.lr == 5e-6


def test_config_path_is_read_from_the_callers_folder(tmp_path: Path) -> None:
    (tmp_path / "training_config.yaml").write_text("training:\n  learning_rate: 4e-6\n")
    out = _ok(_run(COMBINE, tmp_path, "--config", "training_config.yaml", cwd=tmp_path))
    assert _args(out).lr == 4e-6
    _refused(_run(COMBINE, tmp_path, "--config", "no_such.yaml", cwd=tmp_path), "--config", "no_such.yaml")


def test_the_shipped_config_file_through_the_combine_script(tmp_path: Path) -> None:
    out = _ok(_run(COMBINE, tmp_path, "--config", "config/training_config.yaml"))
    args = _args(out)
    assert (args.lr, args.rollout_batch_size, args.micro_batch_size, args.lr_warmup_iters, args.num_rollout,
            args.eps_clip) == (1e-6, 32, 8, 100, 10000, 0.2)
    assert (args.openclaw_combine_w_rl, args.openclaw_combine_w_opd) == (0.5, 0.5)
    server = _command(out, "server")
    assert server[server.index("--served-model-name") + 1] == "qwen3-4b"  # the name the server reports
    _assert_no_flag_twice(out)


@pytest.mark.parametrize(("script", "text", "key"), [
    (COMBINE, "rollout:\n  num_workers: 4\n", "rollout.num_workers"),  # the live engine is the server
    (TERMINAL, "model:\n  name: qwen3-4b\n", "model.name"),  # a track's engine reports no name
    (COMBINE, "evaluation:\n  eval_frequency: 100\n", "evaluation.eval_frequency"),  # no eval set live
    (COMBINE, "training:\n  gradient_accumulation_steps: 4\n", "training.gradient_accumulation_steps"),
    (COMBINE, "training:\n  learning_rate: 1e-6\nlr: 2e-6\n", "lr"),  # one setting, two keys
])
def test_config_keys_the_run_would_not_use_are_refused_by_name(tmp_path: Path, script: str, text: str,
                                                                key: str) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    _refused(_run(script, tmp_path, "--config", str(cfg), **_data(script, tmp_path)), key)


def test_config_file_for_a_track(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("training:\n  max_steps: 5\n  learning_rate: 2e-5\nrollout:\n  parallel_envs: 3\n")
    out = _ok(_run(TERMINAL, tmp_path, "--config", str(cfg), DATA_PATH=str(tmp_path / "train.jsonl")))
    args = _args(out)
    assert (args.num_rollout, args.lr, args.parallel_envs) == (5, 2e-5, 3)
    _assert_no_flag_twice(out)


# ---- Weights & Biases ---------------------------------------------------------------------------

@pytest.mark.parametrize("script", [RL, TERMINAL])
def test_wandb_api_key_alone_turns_logging_on_without_showing_the_key(script: str, tmp_path: Path) -> None:
    out = _run(script, tmp_path, WANDB_API_KEY=SECRET, **_data(script, tmp_path))
    stdout = _ok(out)
    assert SECRET not in out.stdout + out.stderr
    args = _args(stdout)
    assert args.use_wandb and args.wandb_project  # a project is always named (the recipe's, by default)
    assert args.wandb_key is None  # never a flag: flags show in `ps` and in Ray's job table
    assert _runtime_env(stdout)["WANDB_API_KEY"] == "***"
    assert "wandb: on" in stdout


@pytest.mark.parametrize("script", [RL, TERMINAL])
def test_wandb_project_group_and_mode_reach_every_recipe(script: str, tmp_path: Path) -> None:
    stdout = _ok(_run(script, tmp_path, WANDB_PROJECT="my-proj", WANDB_GROUP="g1", WANDB_MODE="offline",
                      **_data(script, tmp_path)))
    args = _args(stdout)
    assert (args.use_wandb, args.wandb_project, args.wandb_group, args.wandb_mode) == (True, "my-proj", "g1", "offline")
    off = _ok(_run(script, tmp_path, WANDB_API_KEY=SECRET, WANDB_MODE="disabled", **_data(script, tmp_path)))
    assert not _args(off).use_wandb and "wandb: off (WANDB_MODE=disabled)" in off


def test_wandb_key_is_another_name_for_wandb_api_key(tmp_path: Path) -> None:
    out = _run(RL, tmp_path, WANDB_KEY=SECRET)
    stdout = _ok(out)
    assert SECRET not in out.stdout + out.stderr
    assert _args(stdout).use_wandb and _runtime_env(stdout)["WANDB_API_KEY"] == "***"


# ---- the judge the plan shows, and paths checked before start ----------------------------------

def test_judge_model_path_plans_the_llm_judge(tmp_path: Path, tiny_model_path: Path) -> None:
    out = _ok(_run(OPD, tmp_path, JUDGE_MODEL_PATH=str(tiny_model_path)))
    judge = _command(out, "judge")
    assert judge[judge.index("--prm-model-path") + 1] == str(tiny_model_path)
    settings = _line(out, "judge settings: ")
    assert "judge-backend=llm" in settings and f"prm-model-path={tiny_model_path}" in settings
    assert "CPU judge" not in out and "LLM judge" in out


def test_custom_rm_path_plans_the_custom_judge(tmp_path: Path) -> None:
    rm = tmp_path / "my_rm.py"
    rm.write_text("async def reward(args, sample):\n    return 1.0\n")
    out = _ok(_run(OPD, tmp_path, "--custom-rm-path", str(rm)))
    assert "judge-backend=custom" in _line(out, "judge settings: ") and "CPU judge" not in out
    _refused(_run(OPD, tmp_path, "--custom-rm-path", str(tmp_path / "missing_rm.py")), "--custom-rm-path",
             "missing_rm.py")


@pytest.mark.parametrize("var", ["JUDGE_MODEL_PATH", "PRM_MODEL_PATH", "RESUME_CKPT", "MODEL_PATH"])
def test_a_missing_path_is_refused_before_anything_starts(var: str, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-folder")
    _refused(_run(OPD, tmp_path, **{var: missing}), var, missing)


# ---- a flag the recipe also sets -----------------------------------------------------------------

def test_backend_vllm_is_refused_before_start(tmp_path: Path) -> None:
    stderr = _refused(_run(RL, tmp_path, "--backend", "vllm"), "--backend vllm")
    assert "weight" in stderr  # why: vLLM's server cannot load the trained weights


def test_a_user_flag_replaces_the_recipes_value(tmp_path: Path) -> None:
    out = _ok(_run(RL, tmp_path, "--backend", "hf", "--lr", "7e-6", "--rollout-batch-size", "2", "--port", "8123",
                   "--log-level", "warning", "--majority-vote-n", "5", OPENCLAW_DEBUG="true", MAJORITY_VOTE_N="7"))
    server, judge, trainer = _command(out, "server"), _command(out, "judge"), _trainer(out)
    assert server.count("--backend") == 1 and server[server.index("--backend") + 1] == "hf"
    assert server[server.index("--port") + 1] == "8123" and server.count("--port") == 1
    assert trainer[trainer.index("--rollout-external-engine-addrs") + 1] == "127.0.0.1:8123"  # the same server
    assert server[server.index("--log-level") + 1] == "warning"  # the command line's, over OPENCLAW_DEBUG's
    assert judge.count("--log-level") == 1
    assert judge[judge.index("--majority-vote-n") + 1] == "5"
    args = _args(out)
    assert (args.lr, args.rollout_batch_size) == (7e-6, 2)
    _assert_no_flag_twice(out)


def test_flags_that_would_cut_the_live_trainer_from_its_server_are_refused(tmp_path: Path) -> None:
    _refused(_run(RL, tmp_path, "--rollout-backend", "embedded"), "--rollout-backend", "OPENCLAW_SERVER_URL")
    _refused(_run(RL, tmp_path, ROLLOUT_ARGS="--num-rollout-workers 4"), "--num-rollout-workers")


# ---- dry runs write nothing; evaluation scripts say what they do ---------------------------------

def _tree_state() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all", "--",
                           "terminal-rl", "toolcall-rl", "gui-rl", "swe-rl"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout


@pytest.mark.parametrize("script", [TERMINAL, "toolcall-rl/run_toolcall_rl.sh", "gui-rl/run_gui_rl.sh",
                                    "swe-rl/run_swe_rl.sh"])
def test_a_dry_run_writes_nothing(script: str, tmp_path: Path) -> None:
    before = _tree_state()
    out = _ok(_run(script, tmp_path, DATA_PATH=str(tmp_path / "train.jsonl"), DATA_DIR=str(tmp_path / "data")))
    assert "would run prepare: " in out  # shown, not run
    assert not (tmp_path / "train.jsonl").exists() and not (tmp_path / "data").exists()
    assert _tree_state() == before


@pytest.mark.parametrize(("script", "trains"), [("gui-rl/run_gui_agent.sh", "gui-rl/run_gui_rl.sh"),
                                                ("swe-rl/run_swe_agent.sh", "swe-rl/run_swe_rl.sh")])
def test_evaluation_scripts_say_they_evaluate_and_which_script_trains(script: str, trains: str,
                                                                     tmp_path: Path) -> None:
    out = subprocess.run(["bash", script, "--help"], cwd=REPO, env=_env(tmp_path), capture_output=True, text=True,
                         timeout=120)
    first = (out.stderr.splitlines() or [""])[0]
    assert "evaluates" in first and "does not train" in first and trains in first, first
