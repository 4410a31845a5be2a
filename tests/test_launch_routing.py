"""`python -m openclaw.launch` routes every flag to the component that declares it.

Every run script's OPENCLAW_DRY_RUN=1 output (real bash, real launcher) is checked for where the
judge, server and trainer flags went; unknown flags are an error naming the flag; judge defaults
come from the judge package; OPENCLAW_API_KEY reaches the job's environment, never a command line.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
from slime.utils.arguments import parse_config

from openclaw.judge import add_judge_args
from openclaw.launch import RECIPES, LaunchError, build_plan
from openclaw.launch.routing import trainer_parser

REPO = Path(__file__).resolve().parents[1]
EVAL_SCRIPTS = ("run_eval.sh", "run_swe_agent.sh", "run_gui_agent.sh")  # evaluation harnesses: no training launch
RUN_SCRIPTS = sorted(str(p.relative_to(REPO)) for p in REPO.glob("*/run_*.sh")
                     if p.name not in EVAL_SCRIPTS and p.parent.name != "openclaw-tinker")
CLEARED = ("RAY_ADDRESS", "MODEL_PATH", "LORA_ARGS", "OPTIMIZER_ARGS", "ROLLOUT_ARGS", "CKPT_ARGS", "METHOD_ARGS",
           "OPENCLAW_API_KEY", "MAJORITY_VOTE_N", "MAJORITY_VOTE_THRESHOLD", "NUM_JUDGE_WORKERS", "MAX_STEPS",
           "PARALLEL_ENVS", "ENV_TYPE", "TOOLS_CONFIG", "DRY_RUN")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env.update(OPENCLAW_DRY_RUN="1", RL_BUFFER_DIR=str(tmp_path / "buf"), CKPT_SAVE_DIR=str(tmp_path / "ckpt"),
               LOG_DIR=str(tmp_path / "logs"), CPU_PRESET_MODEL="tiny")
    env.update(extra)
    return env


def _track_data(tmp_path: Path, folder: str) -> dict[str, str]:
    """A track's data files (their preparation is shown, not run, in a dry run); live scripts import
    DATA_PATH's session files, which must exist, so they get none."""
    if folder.startswith("openclaw-"):
        return {}
    return {"DATA_DIR": str(tmp_path / "data")} if folder == "toolcall-rl" else {"DATA_PATH": str(tmp_path / "train.jsonl")}


def _dry_run(script: str, tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    env = _env(tmp_path, **{**_track_data(tmp_path, Path(script).parent.name), **extra})
    return subprocess.run(["bash", script, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def _commands(stdout: str) -> dict[str, list[str]]:
    out = {}
    for line in stdout.splitlines():
        if line.startswith("would run "):
            component, _, cmd = line[len("would run "):].partition(": ")
            out[component] = shlex.split(cmd)
    return out


def _trainer(cmds: dict[str, list[str]]) -> list[str]:
    submit = cmds["submit"]
    return submit[submit.index("--") + 3:]  # after `-- python slime/train.py`


def _is_live(script: str) -> bool:
    return Path(script).parent.name.startswith("openclaw-")


@pytest.mark.parametrize("script", RUN_SCRIPTS)
def test_dry_run_routes_each_flag_to_its_owner(script: str, tmp_path: Path) -> None:
    trainer_flags = ["--lr", "3e-6", "--rollout-max-response-len=96"]
    if _is_live(script):
        flags = ["--majority-vote-n", "5", "--num-judge-workers", "2", "--judge-backend", "cpu",
                 "--max-batch-size", "4", "--session-idle-timeout", "60", "--rl-redact-pattern", "tok-[0-9]+",
                 "--rl-redact-pattern", "key-[a-z]+", *trainer_flags]
    else:
        flags = trainer_flags
    out = _dry_run(script, tmp_path, *flags)
    assert out.returncode == 0, out.stderr
    cmds = _commands(out.stdout)
    argv = _trainer(cmds)
    args = parse_config(argv, env={}).to_namespace()  # the trainer accepts all it is given
    assert args.lr == 3e-6 and args.rollout_max_response_len == 96
    assert argv[-3:] == trainer_flags  # the command line replaces the presets' values
    provider = argv[argv.index("--extra-args-provider-path"):argv.index("--extra-args-provider-path") + 2]
    actions = trainer_parser(provider)._option_string_actions
    dests = [actions[t.split("=", 1)[0]].dest for t in argv if t.split("=", 1)[0] in actions]
    assert len(dests) == len(set(dests)), sorted(d for d in set(dests) if dests.count(d) > 1)  # each setting once
    if not _is_live(script):
        assert set(cmds) == {"prepare", "ray-head", "submit"}  # a track runs the trainer only (data made first)
        return
    server, judge = cmds["server"], cmds["judge"]
    for flag, value in (("--majority-vote-n", "5"), ("--num-judge-workers", "2"), ("--judge-backend", "cpu")):
        assert judge[judge.index(flag) + 1] == value, flag
        assert flag not in server
    assert server[server.index("--max-batch-size") + 1] == "4" and "--max-batch-size" not in judge + argv
    assert server[server.index("--session-idle-timeout") + 1] == "60" and "--session-idle-timeout" not in judge
    patterns = [server[i + 1] for i, tok in enumerate(server) if tok == "--rl-redact-pattern"]
    assert patterns == ["tok-[0-9]+", "key-[a-z]+"]  # a repeated flag keeps every value, in order
    for flag in trainer_flags[:1]:
        assert flag not in server and flag not in judge
    assert "judge settings: majority-vote-n=5 " in out.stdout and "num-judge-workers=2" in out.stdout


def _plan(recipe: str, tmp_path: Path, *args: str, **env: str):  # noqa: ANN202 - a Plan
    folder = RECIPES[recipe].folder if recipe in RECIPES else recipe
    return build_plan(recipe, list(args), _env(tmp_path, **{**_track_data(tmp_path, folder), **env}), REPO)


def test_unknown_flag_is_an_error_naming_it(tmp_path: Path) -> None:
    out = _dry_run("openclaw-combine/run_qwen3_7b_openclaw_combine.sh", tmp_path, "--majority-vote-m", "3")
    assert out.returncode == 2
    assert "unknown flag --majority-vote-m; did you mean --majority-vote-n?" in out.stderr
    assert "would run" not in out.stdout
    for recipe in RECIPES:
        with pytest.raises(LaunchError, match="unknown flag --lrr; did you mean --lr"):
            _plan(recipe, tmp_path, "--lrr", "1e-6")


def test_judge_defaults_come_from_the_judge_package(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_judge_args(parser, {})
    defaults = parser.parse_args([])
    plan = _plan("openclaw-rl", tmp_path)
    assert plan.judge is not None
    assert "--majority-vote-n" not in plan.judge.argv  # not restated: the judge's own default applies
    assert plan.judge_settings["majority-vote-n"] == defaults.prm_m
    assert plan.judge_settings["majority-vote-threshold"] == defaults.majority_vote_threshold
    assert plan.judge_settings["num-judge-workers"] == defaults.num_judge_workers
    env_plan = _plan("openclaw-rl", tmp_path, MAJORITY_VOTE_N="7", MAJORITY_VOTE_THRESHOLD="0.75", NUM_JUDGE_WORKERS="3")
    assert env_plan.judge is not None
    judge = env_plan.judge.argv
    assert judge[judge.index("--majority-vote-n") + 1] == "7"
    assert judge[judge.index("--majority-vote-threshold") + 1] == "0.75"
    assert judge[judge.index("--num-judge-workers") + 1] == "3"


def test_api_key_reaches_the_job_env_never_a_command_line(tmp_path: Path) -> None:
    secret = "sk-launch-test-0123456789"
    out = _dry_run("openclaw-rl/run_qwen3_7b_openclaw_rl.sh", tmp_path, OPENCLAW_API_KEY=secret)
    assert out.returncode == 0, out.stderr
    assert secret not in out.stdout + out.stderr
    runtime = json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("runtime env: "))[13:])
    assert runtime["env_vars"]["OPENCLAW_API_KEY"] == "***"  # shown masked; the real file carries it (0600)
    plan = _plan("openclaw-rl", tmp_path, OPENCLAW_API_KEY=secret)
    assert plan.runtime_env["env_vars"]["OPENCLAW_API_KEY"] == secret
    assert all(secret not in " ".join(c.argv) for c in (plan.server, plan.judge, plan.submit) if c)
    with pytest.raises(LaunchError, match="set OPENCLAW_API_KEY instead"):
        _plan("openclaw-rl", tmp_path, "--api-key", secret)


def test_launcher_owned_flags_reach_every_component(tmp_path: Path) -> None:
    plan = _plan("openclaw-opd", tmp_path, "--rl-buffer-dir", str(tmp_path / "other"))
    assert plan.server is not None and plan.judge is not None
    for argv in (plan.server.argv, plan.judge.argv, plan.trainer_argv()):
        assert argv[argv.index("--rl-buffer-dir") + 1] == str(tmp_path / "other")
        assert argv.count("--rl-buffer-dir") == 1


def test_flags_of_a_component_the_recipe_does_not_run(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="--judge-backend is a judge flag, but this recipe runs no judge"):
        _plan("terminal-rl", tmp_path, "--judge-backend", "llm")
    with pytest.raises(LaunchError, match="unexpected argument 'stray'"):
        _plan("openclaw-rl", tmp_path, "stray")
    with pytest.raises(LaunchError, match="unknown recipe 'nope'"):
        _plan("nope", tmp_path)


def test_data_path_files_and_folders_go_to_the_offline_importer(tmp_path: Path) -> None:
    """DATA_PATH (the pages' session files: a file, or a folder of .json/.jsonl) is imported by the
    offline importer — which keeps session ids, imports a file once and reports what will not train —
    before the trainer starts; all paths in one command."""
    folder, single = tmp_path / "sessions", tmp_path / "one.json"
    folder.mkdir()
    single.write_text("[]")
    r = _dry_run("openclaw-combine/run_qwen3_7b_openclaw_combine.sh", tmp_path, DATA_PATH=f"{folder} {single}")
    assert r.returncode == 0, r.stderr
    cmd = _commands(r.stdout)["import"]
    assert cmd[1:3] == ["-m", "openclaw.bridge.offline"], cmd
    assert cmd[cmd.index("--rl-buffer-dir") + 1] == str(tmp_path / "buf")
    assert cmd[-2:] == [str(folder), str(single)]


@pytest.mark.parametrize("recipe", [name for name, r in RECIPES.items() if r.kind == "track"])
def test_tracks_start_their_rollout_engine_with_the_prefix_cache(recipe: str, tmp_path: Path) -> None:
    args = parse_config(_plan(recipe, tmp_path).trainer_argv()[2:], env={}).to_namespace()  # after python train.py
    assert args.rollout_engine_command.split()[-2:] == ["--prefix-cache-tokens", "8192"]
    mine = "python -m openclaw.engines.serve --prefix-cache-tokens 0"
    argv = _plan(recipe, tmp_path, "--rollout-engine-command", mine).trainer_argv()[2:]
    args = parse_config(argv, env={}).to_namespace()
    assert args.rollout_engine_command == mine  # the user's own engine command wins
