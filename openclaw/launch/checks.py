"""Checks of a launch plan that stop it before anything starts: paths that must exist, a server
engine that takes trained weights, and trainer flags the run could not honour."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from openclaw.launch.config_file import ConfigFile
from openclaw.launch.names import NAMES
from openclaw.launch.recipes import Recipe
from openclaw.launch.routing import TRAINER, FlagTable, Routed, take
from openclaw.launch.settings import LaunchError, Settings

# Server engines a live run can train with: the trained weights are pushed into the engine.
LIVE_BACKENDS = ("hf", "sglang")


def is_path(value: str) -> bool:
    """A model given as a path (as the server reads it); anything else may be a hub id."""
    return value.startswith(("/", ".", "~"))


def check_paths(s: Settings, recipe: Recipe, elsewhere: bool) -> list[str]:
    """Every path a setting names exists, or the launch stops before anything starts, naming it.
    `elsewhere`: a dry run planning for GPUs this machine lacks (NUM_GPUS), where the models are on the
    GPU machine: a missing model folder is a note there. Returns the notes."""
    def missing(name: str, value: str) -> LaunchError:
        return LaunchError(f"{s.shown(name, value)} does not exist")

    notes = []
    for name in ("MODEL_PATH", "PRM_MODEL_PATH"):
        value = s.values.get(name)
        if value and is_path(value) and not Path(value).expanduser().exists():
            if not elsewhere:
                raise missing(name, value)
            notes.append(f"note: {s.shown(name, value)} is not on this machine (a dry run for NUM_GPUS GPUs: "
                         "planned anyway; the launch on the GPU machine checks it)")
    if s.resume_ckpt is not None and not s.resume_ckpt.exists():
        raise missing("RESUME_CKPT", str(s.resume_ckpt))
    if recipe.kind == "live":
        for item in (s.data_path or "").split():
            if not Path(s.abspath(item)).exists():
                raise LaunchError(f"{s.shown('DATA_PATH', s.data_path or '')}: {item} does not exist (session files "
                                  "or folders of them, imported into the buffer)")
    return notes


def check_judge_paths(judge_args: Sequence[str]) -> None:
    """Paths given to the judge on the command line: a missing one would stop it after the server started."""
    for i, tok in enumerate(judge_args):
        flag, eq, value = tok.partition("=")
        value = value if eq else (judge_args[i + 1] if i + 1 < len(judge_args) else "")
        if flag in ("--prm-model-path", "--judge-model-path") and is_path(value) and not Path(value).exists():
            raise LaunchError(f"{flag} {value} does not exist")
        file = value.split(":", 1)[0]
        if flag == "--custom-rm-path" and (file.endswith(".py") or is_path(file)) and not Path(file).exists():
            raise LaunchError(f"{flag} {value}: {file} does not exist (a file path ./x.py[:attr] or a module "
                              "pkg.module[:attr])")


def check_backend(s: Settings, server_argv: Sequence[str]) -> None:
    """The server's engine must take the trained weights (the trainer pushes each new version into it)."""
    backend = next((server_argv[i + 1] for i in range(len(server_argv) - 2, -1, -1)
                    if server_argv[i] == "--backend"), "hf")
    if backend not in LIVE_BACKENDS:
        raise LaunchError(f"--backend {backend}: live training pushes every new weight version into the serving "
                          f"engine, and {backend}'s server cannot load them (no weight-update endpoint); use "
                          "--backend hf (CPU) or --backend sglang (GPU), or serve with vLLM outside training")
    if backend == "sglang" and s.num_gpus == 0 and "--engine-url" not in server_argv:
        raise LaunchError("--backend sglang starts SGLang on a GPU, and there is none here (nvidia-smi -L lists "
                          "none): use --backend hf, or attach to a running SGLang with --engine-url URL")


def user_trainer_flags(s: Settings, config: ConfigFile | None, routed: Routed) -> list[tuple[str, list[str]]]:
    """The trainer flags the user gave, with where each came from."""
    out = [(var, list(tokens)) for var, tokens in (("ROLLOUT_ARGS", s.rollout_args), ("OPTIMIZER_ARGS", s.optimizer_args),
                                                    ("LORA_ARGS", s.lora_args), ("CKPT_ARGS", s.ckpt_args),
                                                    ("EXTRA_ARGS", s.extra_args), ("METHOD_ARGS", s.method_args))
           if tokens]
    if config is not None:
        out.append((f"--config {config.path}", config.trainer))
    out.append(("the command line", routed.args(TRAINER)))
    return out


def check_user_trainer_flags(s: Settings, recipe: Recipe, table: FlagTable, config: ConfigFile | None,
                              routed: Routed) -> None:
    """Refuse a trainer setting the run could not honour (names.py's refused flags for this recipe,
    matched by setting, so every spelling counts); a --config given anywhere but the command line."""
    refused = {table.dest(TRAINER, n.name): n for n in NAMES
               if n.kind == "flag" and n.refused and n.applies(recipe.name, recipe.kind == "live") and (TRAINER, n.name) in table.dests}
    for source, tokens in user_trainer_flags(s, config, routed):
        i = 0
        while i < len(tokens):
            if not tokens[i].startswith("--"):
                i += 1  # the trainer's own parser names a stray word (check_trainer)
                continue
            flag = tokens[i].partition("=")[0]
            if flag == "--config":
                raise LaunchError(f"--config in {source}: give the file on the run script's command line")
            dest = table.dest(TRAINER, flag)
            if dest in refused:
                row = refused[dest]
                raise LaunchError(f"{flag}{'' if flag == row.name else f' ({row.name})'} in {source} {row.refused}")
            if dest == "rollout_num_engines" and s.num_gpus:
                raise LaunchError(f"{flag} in {source}: on GPUs the trainer starts ROLLOUT_GPUS / "
                                  "--rollout-num-gpus-per-engine engines; drop it")
            _, i = take(tokens, i, table.option_nargs(flag))


def check_trainer(trainer: list[str]) -> None:
    """Parse the trainer's command line with its own parser now, so a flag it refuses (from *_ARGS or
    an env var) stops the launch before a server, judge or Ray head starts."""
    from slime.utils.arguments import ConfigError, parse_config

    try:
        parse_config(trainer[trainer.index("slime/train.py") + 1:], env={})
    except ConfigError as exc:
        raise LaunchError(f"the trainer refuses its command line: {exc}") from None
