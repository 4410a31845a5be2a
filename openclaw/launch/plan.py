"""The plan of one launch: every command with its owner, built before anything starts.

`OPENCLAW_DRY_RUN=1` prints it (`would run <component>: <argv>`); a real launch executes it
(`openclaw.launch.run`). Building the plan validates everything that can be validated without
starting a process: the recipe, the env vars, and where each command-line flag goes.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from openclaw.launch.page_env import batch_flags, read_page_env
from openclaw.launch.recipes import (
    BRIDGE_DATA_SOURCE,
    Preset,
    Recipe,
    cpu_model,
    get_recipe,
    live_preset,
    track_preset,
)
from openclaw.launch.routing import (
    JUDGE,
    LAUNCHER_FLAGS,
    SERVER,
    TRAINER,
    FlagTable,
    Routed,
    judge_parser,
    route,
    server_parser,
    trainer_parser,
)
from openclaw.launch.settings import LaunchError, Settings

LIVE_NUM_ROLLOUT = "1000000"  # a live run has no end: the trainer runs until stopped
SECRET_ENV = ("OPENCLAW_API_KEY", "WANDB_API_KEY")


@dataclass(frozen=True)
class Command:
    component: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # on top of the launcher's environment
    log: Path | None = None

    def shell(self) -> str:
        return shlex.join(self.argv)


@dataclass(frozen=True)
class Plan:
    recipe: Recipe
    settings: Settings
    model_path: str
    messages: list[str]  # banner and notes, printed first
    prepare: list[Command]
    server: Command | None
    judge: Command | None
    judge_settings: dict[str, object]
    imports: list[Command]
    ray_head: Command | None
    ray_address: str
    ray_temp_dir: Path | None
    submission_id: str
    runtime_env: dict[str, dict[str, str]]
    runtime_env_file: Path
    submit: Command
    routed: Routed
    base_url: str | None

    def trainer_argv(self) -> list[str]:
        return self.submit.argv[self.submit.argv.index("--") + 1:]

    def render(self) -> str:
        lines = [*self.messages]
        lines.append(f"{self.recipe.name}: plan (OPENCLAW_DRY_RUN=1: nothing is started)")
        for cmd in self.prepare:
            lines.append(f"ran prepare: {cmd.shell()}")
        for cmd in (self.server, self.judge):
            if cmd is not None:
                lines.append(f"would run {cmd.component}: {cmd.shell()}")
        if self.judge is not None:
            shown = " ".join(f"{k}={v}" for k, v in self.judge_settings.items())
            lines.append(f"judge settings: {shown} (defaults from openclaw.judge)")
        for cmd in self.imports:
            lines.append(f"would run import: {cmd.shell()}")
        if self.ray_head is not None:
            lines.append(f"would run ray-head: {self.ray_head.shell()}")
        else:
            lines.append(f"ray: using the cluster at RAY_ADDRESS={self.ray_address} (no head is started)")
        lines.append(f"runtime env: {json.dumps(masked(self.runtime_env), sort_keys=True)}")
        lines.append(f"would run submit: {self.submit.shell()}")
        if self.routed.where:
            lines.append("routed: " + "; ".join(f"{flag} -> {'+'.join(to)}" for flag, to in self.routed.where))
        return "\n".join(lines)


def masked(runtime_env: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    return {k: {n: ("***" if n in SECRET_ENV else v) for n, v in d.items()} for k, d in runtime_env.items()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prescan_launcher_flags(argv: Sequence[str]) -> dict[str, str]:
    """Launcher-owned flags (e.g. --rl-buffer-dir) before anything else reads the settings."""
    out: dict[str, str] = {}
    for i, tok in enumerate(argv):
        flag, eq, value = tok.partition("=")
        if flag in LAUNCHER_FLAGS:
            if eq:
                out[LAUNCHER_FLAGS[flag]] = value
            elif i + 1 < len(argv):
                out[LAUNCHER_FLAGS[flag]] = argv[i + 1]
    return out


def _gpu_split(s: Settings) -> tuple[str, str]:
    if s.train_gpus and s.rollout_gpus:
        return s.train_gpus, s.rollout_gpus
    half = s.num_gpus // 2 if s.num_gpus > 1 else 1
    train = s.train_gpus or ",".join(str(i) for i in range(half))
    rollout = s.rollout_gpus or (",".join(str(i) for i in range(half, s.num_gpus)) if s.num_gpus > 1 else "0")
    return train, rollout


def _choose(preset: Preset, s: Settings) -> list[str]:
    """The *_ARGS variables (when set, they replace the preset's value whole, as in the reference)."""
    return [*(s.rollout_args if s.rollout_args is not None else preset.rollout),
            *(s.optimizer_args if s.optimizer_args is not None else preset.optimizer),
            *(s.lora_args if s.lora_args is not None else preset.lora),
            *(s.ckpt_args if s.ckpt_args is not None else preset.ckpt)]


def _judge_settings(judge_argv: Sequence[str]) -> dict[str, object]:
    """The values the judge will use: its own parser's defaults plus the flags we pass."""
    ns, _ = judge_parser({}).parse_known_args(list(judge_argv))
    return {"majority-vote-n": ns.prm_m, "majority-vote-threshold": ns.majority_vote_threshold,
            "num-judge-workers": ns.num_judge_workers, "judge-backend": ns.judge_backend}


def build_plan(recipe_name: str, argv: Sequence[str], env: Mapping[str, str], repo: Path) -> Plan:
    env = {**env, **_prescan_launcher_flags(argv)}
    s = Settings.from_env(env, repo)
    recipe = get_recipe(recipe_name)
    if recipe.env_type and s.get("ENV_TYPE") and s.get("ENV_TYPE") != recipe.env_type:
        raise LaunchError(f"ENV_TYPE={s.get('ENV_TYPE')}, but this script trains ENV_TYPE={recipe.env_type}")
    messages: list[str] = []
    page = read_page_env(s, recipe.name, recipe.kind == "live")  # the second page's env vars
    if page.gpus_per_node is not None:
        s = _replace(s, num_gpus=page.gpus_per_node)
    named = [f"{n}={v}" for n, v in (("TRAIN_GPUS", s.train_gpus), ("ROLLOUT_GPUS", s.rollout_gpus)) if v]
    if named and s.num_gpus == 0:
        raise LaunchError(f"{' '.join(named)} name GPUs, and there are none here (nvidia-smi -L lists none"
                          f"{'; GPUS_PER_NODE=0' if page.gpus_per_node == 0 else ''}): unset them to run on CPU")
    model_path = s.model_path
    cpu_preset = s.num_gpus == 0 and not model_path
    if cpu_preset:
        model_path, label = cpu_model(s, recipe)
        s = _replace(s, model_path=model_path)
    elif s.num_gpus == 0:
        messages.append(f"{recipe.name}: no GPU found: serving and training {model_path} on CPU (slow for large models)")
        label = ""
    elif not model_path:
        raise LaunchError(f"{recipe.name}: {s.num_gpus} GPU(s) found but MODEL_PATH is not set "
                          f"(e.g. export MODEL_PATH=/path/to/qwen3-{s.model_size})")
    else:
        label = ""
    assert model_path is not None
    if s.ckpt_save_dir is None:
        s = _replace(s, ckpt_save_dir=(repo / "checkpoints" / recipe.checkpoint_dir_name).resolve())

    method_args = list(s.method_args) if s.method_args is not None else recipe.trainer_args(s, cpu_preset)
    running = [SERVER, JUDGE, TRAINER] if recipe.kind == "live" else [TRAINER]
    table = FlagTable()
    table.add_parser(TRAINER, trainer_parser(method_args))
    table.prefixes["--sglang-"] = TRAINER
    # Declared always, so a judge flag given to a track is named as such, not as unknown.
    table.add_parser(SERVER, server_parser({}))
    table.add_parser(JUDGE, judge_parser({}))
    # REWARD_ARGS (the second page's script variable: --custom-rm-path, --rm-checkpoint, --reward-aggregation)
    # holds flags of several components, so it is routed like the command line's flags (which come after it).
    routed = route([*s.reward_args, *argv], table, running)

    launch_tag = uuid.uuid4().hex[:8]
    submission_id = f"{recipe.name}-{launch_tag}"
    job_env: dict[str, str] = {"RAY_AUTH_MODE": s.get("RAY_AUTH_MODE") or "disabled"}
    if s.api_key:  # every child that calls the server sends it (the trainer runs in the job)
        job_env["OPENCLAW_API_KEY"] = s.api_key
    prepare: list[Command] = []
    server = judge = None
    imports: list[Command] = []
    judge_settings: dict[str, object] = {}
    base_url: str | None = None
    if recipe.kind == "live":
        trainer, server, judge, imports, base_url, num_gpus_line = _live(s, recipe, cpu_preset, method_args, routed,
                                                                          job_env)
        preset = live_preset(s, recipe.name, cpu_preset)
        if num_gpus_line:
            messages.append(num_gpus_line)
        judge_settings = _judge_settings(judge.argv[3:]) if judge else {}
    else:
        preset = track_preset(s, recipe.name, cpu_preset, label, _episode_vars(recipe, method_args))
        trainer = _track(s, recipe, cpu_preset, method_args, routed, job_env)
        prepare = [Command("prepare", c) for c in recipe.prepare(s, cpu_preset)]
    if preset.banner:
        messages.insert(0, preset.banner)
    if page.drop_preset_lora:
        preset = _replace(preset, lora=())
    trainer[trainer.index("@PRESET@"):trainer.index("@PRESET@") + 1] = _choose(preset, s)
    # The page's env vars go before the command line's flags: a flag typed there wins (argparse keeps the last).
    batch, batch_notes = batch_flags(s, trainer)
    _before_cli(trainer, routed.args(TRAINER), [*page.trainer, *batch])
    if server is not None:
        _before_cli(server.argv, routed.args(SERVER), page.server)
    if judge is not None:
        _before_cli(judge.argv, routed.args(JUDGE), page.judge)
    job_env.update(page.job_env)
    if page.shown or batch_notes:
        messages.append("page env: " + "; ".join([*page.shown, *batch_notes]))
    _check_trainer(trainer)

    ray_head, temp_dir = None, None
    if s.ray_address:
        ray_address = s.ray_address
    else:
        temp_dir = Path("/tmp") / f"ocl-ray-{launch_tag}"  # short: Ray's unix socket paths are limited
        ray_address = f"http://127.0.0.1:{s.ray_dashboard_port}"
        head = ["ray", "start", "--head", "--block", "--port", s.get("RAY_PORT") or s.get("RAY_GCS_PORT") or str(free_port()),
                "--dashboard-host", "127.0.0.1", "--dashboard-port", str(s.ray_dashboard_port),
                "--include-dashboard", "true", "--num-gpus", str(s.num_gpus), "--disable-usage-stats",
                # Ray's fixed default ports collide with any other Ray on the machine: all private.
                "--ray-client-server-port", str(free_port()), "--dashboard-agent-listen-port", str(free_port()),
                "--dashboard-agent-grpc-port", str(free_port()), "--metrics-export-port", str(free_port()),
                "--runtime-env-agent-port", str(free_port()), "--node-manager-port", str(free_port()),
                "--object-manager-port", str(free_port()),
                "--min-worker-port", "20000", "--max-worker-port", "29999", "--temp-dir", str(temp_dir)]
        if s.ray_num_cpus or (recipe.kind == "track" and cpu_preset):
            head += ["--num-cpus", s.ray_num_cpus or "2"]
        ray_head = Command("ray-head", head, log=s.log_dir / "ray_head.log")
    runtime_env = {"env_vars": job_env}
    runtime_env_file = s.log_dir / f"runtime_env-{submission_id}.json"
    submit = Command("submit", ["ray", "job", "submit", "--address", ray_address, "--working-dir", ".",
                                "--runtime-env", str(runtime_env_file), "--submission-id", submission_id, "--",
                                *trainer])
    return Plan(recipe, s, model_path, messages, prepare, server, judge, judge_settings, imports, ray_head,
                ray_address, temp_dir, submission_id, runtime_env, runtime_env_file, submit, routed, base_url)


def _replace(s: Settings | Preset, **changes: object) -> Settings | Preset:
    from dataclasses import replace

    return replace(s, **changes)  # type: ignore[type-var]


def _check_trainer(trainer: list[str]) -> None:
    """Parse the trainer's command line with its own parser now, so a flag it refuses (from *_ARGS or
    an env var) stops the launch before a server, judge or Ray head starts."""
    from slime.utils.arguments import ConfigError, parse_config

    try:
        parse_config(trainer[trainer.index("slime/train.py") + 1:], env={})
    except ConfigError as exc:
        raise LaunchError(f"the trainer refuses its command line: {exc}") from None


def _before_cli(argv: list[str], cli: list[str], extra: list[str]) -> None:
    """Insert `extra` just before the command line's own flags (the tail of argv)."""
    at = len(argv) - len(cli)
    argv[at:at] = extra


def _live(s: Settings, recipe: Recipe, cpu_preset: bool, method_args: list[str], routed: Routed,
          job_env: dict[str, str]) -> tuple[list[str], Command | None, Command, list[Command], str, str]:
    assert s.model_path is not None
    buf = str(s.rl_buffer_dir)
    note = ""
    if s.num_gpus:
        train_gpus, rollout_gpus = _gpu_split(s)
        note = f"{recipe.name}: {s.num_gpus} GPU(s): rollout (SGLang) on {rollout_gpus}, training on {train_gpus}"
        backend, n_train, server_env = "sglang", len(train_gpus.split(",")), {"CUDA_VISIBLE_DEVICES": rollout_gpus}
        job_env["CUDA_VISIBLE_DEVICES"] = train_gpus
    else:
        backend, n_train, server_env = "hf", 1, {}
        job_env["CUDA_VISIBLE_DEVICES"] = ""
    # The personal agent gates what it serves (issue 12): a pushed version is served only after
    # the canary passes; OPENCLAW_PROMOTION_GATE=0 turns it off. The dashboard plots the trainer's log.
    server_env = {**server_env, "OPENCLAW_PROMOTION_GATE": s.get("OPENCLAW_PROMOTION_GATE") or "1",
                  "OPENCLAW_CONTROL_DIR": s.get("OPENCLAW_CONTROL_DIR") or str(s.log_dir / "weight-versions"),
                  "OPENCLAW_TRAIN_LOG_DIR": str(s.log_dir)}
    server = None
    if s.server_url:
        base_url = s.server_url.rstrip("/")
    else:
        server = Command(SERVER, [s.python, "-m", "openclaw.server", "--model-path", s.model_path, "--backend", backend,
                                  "--host", s.host, "--port", str(s.port), "--enable-rl-intercept",
                                  "--rl-buffer-dir", buf, *routed.args(SERVER)],
                         env=server_env, log=s.log_dir / "server.log")
        host = "127.0.0.1" if s.host in ("0.0.0.0", "::", "") else s.host
        base_url = f"http://{host}:{s.port}"
    judge_argv = [s.python, "-m", "openclaw.judge", "--rl-buffer-dir", buf]
    for flag, value in (("--num-judge-workers", s.num_judge_workers), ("--majority-vote-n", s.majority_vote_n),
                        ("--majority-vote-threshold", s.majority_vote_threshold), ("--prm-model-path", s.prm_model_path)):
        if value:
            judge_argv += [flag, value]
    judge = Command(JUDGE, [*judge_argv, *routed.args(JUDGE)], log=s.log_dir / "judge.log")
    # DATA_PATH: files or folders of session files; the offline importer keeps session ids, imports a
    # file once, and prints each turn that will not train with its reason.
    data_paths = [s.abspath(f) for f in (s.data_path or "").split()]
    imports = [Command("import", [s.python, "-m", "openclaw.bridge.offline", "--rl-buffer-dir", buf,
                                  "--tokenizer", s.model_path, *data_paths])] if data_paths else []
    trainer = ["python", "slime/train.py", "--hf-checkpoint", s.model_path,
               "--rollout-backend", "external", "--rollout-external-engine-addrs", base_url.split("://", 1)[-1],
               "--actor-num-gpus-per-node", str(n_train), "--data-source-path", BRIDGE_DATA_SOURCE,
               "--rl-buffer-dir", buf, "--num-rollout", s.num_rollout or LIVE_NUM_ROLLOUT, "--use-rollout-logprobs",
               "--log-dir", str(s.log_dir), "--no-progress-bar",  # the launcher shows live progress instead
               *method_args, "@PRESET@"]
    if s.buffer_wait_timeout:
        trainer += ["--buffer-wait-timeout", s.buffer_wait_timeout]
    if s.resume_ckpt:
        trainer += ["--resume-from-checkpoint", str(s.resume_ckpt)]
    if s.wandb.get("project"):
        trainer += ["--use-wandb", "--wandb-project", s.wandb["project"]]
        for key in ("group", "mode"):
            if s.wandb.get(key):
                trainer += [f"--wandb-{key}", s.wandb[key]]
        if s.wandb.get("key"):
            job_env["WANDB_API_KEY"] = s.wandb["key"]  # an env var, never a flag (flags show in `ps`)
    trainer += [*s.extra_args, *routed.args(TRAINER)]
    return trainer, server, judge, imports, base_url, note


def _episode_vars(recipe: Recipe, method_args: list[str]) -> dict[str, str]:
    def value(flag: str) -> str:
        return method_args[method_args.index(flag) + 1] if flag in method_args else "?"

    return {"MAX_STEPS": value("--max-steps"), "PARALLEL_ENVS": value("--parallel-envs"),
            "NUM_ROLLOUT": value("--num-rollout")}


def _track(s: Settings, recipe: Recipe, cpu_preset: bool, method_args: list[str], routed: Routed,
           job_env: dict[str, str]) -> list[str]:
    assert s.model_path is not None
    cluster: list[str] = []
    if s.train_gpus:
        cluster += ["--actor-num-gpus-per-node", str(len(s.train_gpus.split(",")))]
    if s.rollout_gpus:
        cluster += ["--rollout-num-gpus", str(len(s.rollout_gpus.split(",")))]
    if s.resume_ckpt:
        cluster += ["--resume-from-checkpoint", str(s.resume_ckpt)]
    job_env.update(recipe.job_env(s))
    for var, flag in (("MAX_STEPS", "--max-steps"), ("PARALLEL_ENVS", "--parallel-envs")):
        if flag in method_args:
            job_env[var] = method_args[method_args.index(flag) + 1]
    return ["python", "slime/train.py", "--hf-checkpoint", s.model_path, *method_args,
            "--save", str(s.ckpt_save_dir), "--log-dir", str(s.log_dir), "@PRESET@", *cluster,
            *s.extra_args, *routed.args(TRAINER)]


def env_for_children(env: Mapping[str, str]) -> dict[str, str]:
    """The launcher's environment as children get it (Ray needs RAY_AUTH_MODE for every call)."""
    out = dict(env)
    out.setdefault("RAY_AUTH_MODE", "disabled")
    return out


def is_repo_root(path: Path) -> bool:
    return (path / "slime" / "train.py").is_file() and (path / "openclaw").is_dir()


def repo_root() -> Path:
    here = Path(os.getcwd())
    if is_repo_root(here):
        return here
    raise LaunchError(f"run from the repository root (no slime/train.py in {here}); the run_*.sh scripts cd there")
