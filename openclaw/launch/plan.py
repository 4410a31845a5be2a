"""The plan of one launch: every command with its owner, built before anything starts.

`OPENCLAW_DRY_RUN=1` prints it (`would run <component>: <argv>`); a real launch executes it
(`openclaw.launch.run`). Building the plan validates everything that can be validated without
starting a process: the recipe, the env vars and paths they name, the `--config` file, and where
each command-line flag goes. Each component's command line is assembled in layers, later ones
replacing earlier ones setting by setting (each setting appears once): the launcher's own values,
the method's flags, the preset (or the `*_ARGS` that replace it), EXTRA_ARGS, env vars, the
`--config` file, the command line.
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

from slime.utils.net import is_loopback

from openclaw.httpapi.urls import WILDCARD_HOSTS
from openclaw.launch.checks import (
    check_backend,
    check_judge_paths,
    check_paths,
    check_trainer,
    check_user_trainer_flags,
)
from openclaw.launch.config_file import ConfigFile, config_path, read_config_file
from openclaw.launch.layout import GpuLayout, plan_layout
from openclaw.launch.model_presets import ModelPreset, find_preset
from openclaw.launch.names import ENV, LAUNCHER_FLAGS, SECRETS
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
    SERVER,
    TRAINER,
    FlagTable,
    Routed,
    judge_parser,
    route,
    server_parser,
    trainer_parser,
    unique_flags,
)
from openclaw.launch.settings import LaunchError, Settings, _flags, read_names

LIVE_NUM_ROLLOUT = "1000000"  # a live run has no end: the trainer runs until stopped
SECRET_ENV = tuple(sorted(SECRETS))


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
    details: list[str] = field(default_factory=list)  # env:, config:, wandb: lines of the dry run

    def trainer_argv(self) -> list[str]:
        return self.submit.argv[self.submit.argv.index("--") + 1:]

    def render(self) -> str:
        lines = [*self.messages]
        lines.append(f"{self.recipe.name}: plan (OPENCLAW_DRY_RUN=1: nothing is started or written)")
        lines += self.details
        for cmd in self.prepare:
            lines.append(f"would run prepare: {cmd.shell()}")
        if self.server is not None:
            lines.append(f"would run server: {self.server.shell()}")
            lines.append(f"server env: {json.dumps(self.server.env, sort_keys=True)}")
        if self.judge is not None:
            lines.append(f"would run judge: {self.judge.shell()}")
            if self.judge.env:
                lines.append(f"judge env: {json.dumps(self.judge.env, sort_keys=True)}")
            shown = " ".join(f"{k}={v}" for k, v in self.judge_settings.items())
            lines.append(f"judge settings: {shown} (defaults from openclaw.judge)")
        for cmd in self.imports:
            lines.append(f"would run import: {cmd.shell()}")
        if self.ray_head is not None:
            lines.append(f"would run ray-head: {self.ray_head.shell()}")
            if self.ray_head.env:
                lines.append(f"ray-head env: {json.dumps(self.ray_head.env, sort_keys=True)}")
        else:
            lines.append(f"ray: using the cluster at RAY_ADDRESS={self.ray_address} (no head is started)")
        lines.append(f"runtime env: {json.dumps(masked(self.runtime_env), sort_keys=True)}")
        lines.append(f"would run submit: {self.submit.shell()}")
        if self.routed.where:
            lines.append("routed: " + "; ".join(f"{flag} -> {'+'.join(to)}" for flag, to in self.routed.where))
        return "\n".join(lines)


def masked(runtime_env: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    return {k: {n: ("***" if n in SECRETS else v) for n, v in d.items()} for k, d in runtime_env.items()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prescan_launcher_flags(argv: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Launcher-owned flags (e.g. --rl-buffer-dir) before anything else reads the settings:
    name -> (value, the flag that gave it)."""
    out: dict[str, tuple[str, str]] = {}
    for i, tok in enumerate(argv):
        flag, eq, value = tok.partition("=")
        if flag in LAUNCHER_FLAGS:
            if eq:
                out[LAUNCHER_FLAGS[flag]] = (value, flag)
            elif i + 1 < len(argv):
                out[LAUNCHER_FLAGS[flag]] = (argv[i + 1], flag)
    return out


def _choose(preset: Preset, s: Settings) -> list[str]:
    """The *_ARGS variables (when set, they replace the preset's value whole, as in the reference)."""
    return [*(s.rollout_args if s.rollout_args is not None else preset.rollout),
            *(s.optimizer_args if s.optimizer_args is not None else preset.optimizer),
            *(s.lora_args if s.lora_args is not None else preset.lora),
            *(s.ckpt_args if s.ckpt_args is not None else preset.ckpt),
            *preset.memory]


def _judge_settings(s: Settings, judge_argv: Sequence[str]) -> tuple[dict[str, object], str]:
    """What the judge will do: its own parser, with the environment it inherits, on the flags we pass,
    resolved as the judge resolves them (JudgeConfig: a model path or URL makes it the LLM judge,
    --custom-rm-path the custom one). Returns (settings shown, the banner's one-line description)."""
    import argparse

    from openclaw.judge.config import JudgeConfig, JudgeConfigError

    try:
        ns, _ = judge_parser(s.env).parse_known_args(list(judge_argv))
        cfg = JudgeConfig.from_args(ns)
    except (JudgeConfigError, argparse.ArgumentError) as exc:
        raise LaunchError(f"the judge refuses its settings: {exc}") from None
    shown: dict[str, object] = {"majority-vote-n": cfg.m, "majority-vote-threshold": cfg.threshold,
                                "num-judge-workers": cfg.num_workers, "judge-backend": cfg.backend}
    if cfg.backend == "llm":
        where = cfg.judge_url or cfg.prm_model_path
        shown["judge-url" if cfg.judge_url else "prm-model-path"] = where
        return shown, f"LLM judge ({where})"
    if cfg.backend == "custom":
        shown["custom-rm-path"] = cfg.custom_rm_path
        return shown, f"custom reward ({cfg.custom_rm_path})"
    return shown, "CPU judge (embeddings + trained head)"


def _wandb(s: Settings, recipe: Recipe) -> tuple[list[str], dict[str, str], str | None]:
    """Weights & Biases for every recipe: any WANDB_* setting turns it on (WANDB_MODE=disabled turns it
    off). The key goes to the job's env only (wandb reads WANDB_API_KEY); flags show in `ps`.
    Returns (trainer flags, job env, the plan's wandb: line)."""
    w = s.wandb
    if not w:
        return [], {}, None
    if w.get("mode") == "disabled":
        return [], {}, "wandb: off (WANDB_MODE=disabled)"
    project = w.get("project") or recipe.name
    flags = ["--use-wandb", "--wandb-project", project]
    for key in ("group", "mode"):
        if w.get(key):
            flags += [f"--wandb-{key}", w[key]]
    env = {"WANDB_API_KEY": w["key"]} if w.get("key") else {}
    key = ("key from WANDB_API_KEY in the job env (not shown)" if w.get("key") else
           "no WANDB_API_KEY: the job uses this machine's `wandb login`, or set WANDB_MODE=offline")
    extra = "".join(f", {k} {w[k]}" for k in ("group", "mode") if w.get(k))
    return flags, env, f"wandb: on (project {project}{extra}; {key})"


def _env_line(s: Settings, became: Mapping[str, str]) -> str | None:
    """Every table env var that is set, with its value (secrets as ***) and what it became."""
    shown = []
    for name, value in s.values.items():
        row = ENV.get(name)
        if row is None:
            continue
        how = s.source(name)
        text = f"{name}={'***' if name in SECRETS else value}"
        if how != name:
            text += f" (from {how})"
        if name in became:
            text += f" -> {became[name]}"
        shown.append(text)
    return "env: " + "; ".join(shown) if shown else None


def _unused_notes(s: Settings, recipe: Recipe, cpu_preset: bool) -> list[str]:
    """Settings this recipe does not read, said aloud (they are often left exported from another run)."""
    notes = []
    for name in s.values:
        row = ENV.get(name)
        if row is not None and not row.applies(recipe.name, recipe.kind == "live"):
            notes.append(f"note: {name} is not used by {recipe.name} (it applies to {', '.join(row.recipes)})")
    if s.values.get("CPU_PRESET_MODEL") and not cpu_preset:
        notes.append("note: CPU_PRESET_MODEL is not used: MODEL_PATH is set or a GPU is present")
    if recipe.kind == "live" and s.server_url:
        for name in ("OPENCLAW_HOST", "OPENCLAW_PORT"):
            if s.values.get(name):
                notes.append(f"note: {name} is not used: OPENCLAW_SERVER_URL names the server")
    return notes


def build_plan(recipe_name: str, argv: Sequence[str], env: Mapping[str, str], repo: Path) -> Plan:
    recipe = get_recipe(recipe_name)
    argv, config_raw = config_path(list(argv))
    overrides: dict[str, tuple[str, str]] = {}
    config: ConfigFile | None = None
    if config_raw is not None:
        # the file is read first: it may name the model, which decides the preset
        values, _ = read_names(env)
        caller = Path(values.get("OPENCLAW_CALLER_DIR") or repo)
        parser = trainer_parser(recipe.provider_args(_flags(env, "METHOD_ARGS")))
        config = read_config_file(config_raw, caller, recipe.name, parser)
        overrides.update(config.launcher)
    overrides.update(_prescan_launcher_flags([*(_flags(env, "REWARD_ARGS") or ()), *argv]))
    s = Settings.from_env(env, repo, overrides)
    if recipe.env_type and s.get("ENV_TYPE") and s.get("ENV_TYPE") != recipe.env_type:
        raise LaunchError(f"ENV_TYPE={s.get('ENV_TYPE')}, but this script trains ENV_TYPE={recipe.env_type}")
    page = read_page_env(s, recipe.name, recipe.kind == "live")  # env vars that become flags
    if page.gpus_per_node is not None:
        s = _replace(s, num_gpus=page.gpus_per_node)
    found = s.num_gpus
    layout = plan_layout(s.get, found, bool(s.prm_model_path), s.dry_run)
    s = _replace(s, num_gpus=layout.total if layout else 0)
    messages: list[str] = check_paths(s, recipe, elsewhere=bool(layout and layout.total > found))
    model_path = s.model_path
    cpu_preset = s.num_gpus == 0 and not model_path
    label = ""
    if cpu_preset:
        model_path, label = cpu_model(s, recipe)
        s = _replace(s, model_path=model_path)
    elif s.num_gpus == 0:
        messages.append(f"{recipe.name}: no GPU found: serving and training {model_path} on CPU (slow for large models)")
    elif not model_path:
        raise LaunchError(f"{recipe.name}: {s.num_gpus} GPU(s) found but MODEL_PATH is not set "
                          f"(e.g. export MODEL_PATH=/path/to/qwen3-{s.model_size})")
    assert model_path is not None
    if s.ckpt_save_dir is None:
        s = _replace(s, ckpt_save_dir=(repo / "checkpoints" / recipe.checkpoint_dir_name).resolve())
    messages += _unused_notes(s, recipe, cpu_preset)

    method_args = recipe.method_args(s, cpu_preset)
    running = [SERVER, JUDGE, TRAINER] if recipe.kind == "live" else [TRAINER]
    table = FlagTable()
    table.add_parser(TRAINER, trainer_parser(method_args))
    table.prefixes["--sglang-"] = TRAINER
    # Declared always, so a judge flag given to a track is named as such, not as unknown.
    table.add_parser(SERVER, server_parser({}))
    table.add_parser(JUDGE, judge_parser({}))
    # REWARD_ARGS (the second page's script variable: --custom-rm-path, --rm-checkpoint, --reward-aggregation)
    # holds flags of several components, so it is routed like the command line's flags (which come after it).
    routed = route([*s.reward_args, *argv], table, running, recipe.name)
    check_user_trainer_flags(s, recipe, table, config, routed)

    launch_tag = uuid.uuid4().hex[:8]
    submission_id = f"{recipe.name}-{launch_tag}"
    job_env: dict[str, str] = {"RAY_AUTH_MODE": s.get("RAY_AUTH_MODE") or "disabled"}
    for name in ("OPENCLAW_API_KEY", "HF_TOKEN"):  # secrets reach the job by env only (flags show in `ps`)
        if s.values.get(name):
            job_env[name] = s.values[name]
    wandb_flags, wandb_env, wandb_line = _wandb(s, recipe)
    job_env.update(wandb_env)
    prepare: list[Command] = []
    server = judge = None
    imports: list[Command] = []
    judge_settings: dict[str, object] = {}
    base_url: str | None = None
    model: ModelPreset | None = None
    lora = page.use_lora or "--use-lora" in (s.lora_args or ())
    if recipe.kind == "live" and layout is not None:
        model = find_preset(model_path, s.get("MODEL_PRESET"))
        if model is None:
            messages.append(f"note: no model preset fits {model_path} (MODEL_PRESET names one of the presets: "
                            "openclaw/launch/model_presets.py); the generic GPU defaults apply")
        else:
            if layout.colocated and layout.total == 1 and not lora:
                raise LaunchError(f"{model.name} on one GPU: full fine-tuning does not fit beside the engine; use the "
                                  "LoRA script (run_qwen3_7b_lora_*.sh) or USE_LORA=true")
            messages += model.describe(layout, lora)
    elif s.get("MODEL_PRESET") and recipe.kind == "live":
        messages.append("note: MODEL_PRESET is not used: it sets the GPU recipes' defaults, and this plan runs on CPU")
    if recipe.kind == "live":
        trainer, server, judge, imports, base_url = _live(s, recipe, method_args, job_env, layout, model)
    else:
        trainer = _track(s, recipe, method_args, job_env, layout)
        prepare = [Command("prepare", c) for c in recipe.prepare(s, cpu_preset)]
    # The server and judge first: the CPU banner names the engine and the judge that will run.
    judge_line = ""
    if server is not None:
        server.argv.extend([*page.server, *(config.server if config else []), *routed.args(SERVER)])
        server.argv[:] = unique_flags(server.argv, 3, SERVER, table)
        check_backend(s, server.argv)
    if judge is not None:
        check_judge_paths(routed.args(JUDGE))
        judge.argv.extend([*page.judge, *routed.args(JUDGE)])
        judge.argv[:] = unique_flags(judge.argv, 3, JUDGE, table)
        judge_settings, judge_line = _judge_settings(s, judge.argv[3:])
    if recipe.kind == "live":
        backend = server.argv[server.argv.index("--backend") + 1] if server is not None else ""
        serving = (f"the running server at {s.server_url}" if server is None else
                   f"embedded transformers engine (python -m openclaw.server --backend {backend})" if backend == "hf"
                   else f"python -m openclaw.server --backend {backend}")
        preset = live_preset(s, recipe.name, cpu_preset, label, serving, judge_line, model, lora)
        if layout is not None and judge is not None:
            engine = "the server, " + ("SGLang" if backend == "sglang" else "embedded engine")
            messages += layout.lines(engine, "the judge model" if s.prm_model_path else None)
            if s.prm_model_path and not layout.prm:
                messages.append("note: no GPU is left for the judge model: it runs on the CPU (PRM_GPUS, or NUM_GPUS "
                                "with more GPUs, gives it its own)")
    else:
        preset = track_preset(s, recipe.name, cpu_preset, label, _episode_vars(recipe, method_args))
    if preset.banner:
        messages.insert(0, preset.banner)
    if page.drop_preset_lora:
        preset = _replace(preset, lora=())
    trainer[trainer.index("@PRESET@"):trainer.index("@PRESET@") + 1] = _choose(preset, s)
    trainer += [*wandb_flags, *s.extra_args, *page.trainer]
    # the file's keys, then the command line's flags: each replaces what a layer before it set
    user = [*(config.trainer if config else []), *routed.args(TRAINER)]
    batch, batch_notes = batch_flags(s, [*trainer, *user])
    trainer += [*batch, *user]
    trainer[:] = unique_flags(trainer, 2, TRAINER, table)
    job_env.update(page.job_env)
    details = [line for line in (_env_line(s, {**page.became, **batch_notes}), config.line() if config else None,
                                 wandb_line) if line]
    check_trainer(trainer)

    ray_head, temp_dir = None, None
    if s.ray_address:
        ray_address = s.ray_address
    else:
        temp_dir = Path("/tmp") / f"ocl-ray-{launch_tag}"  # short: Ray's unix socket paths are limited
        # A live run's engine and judge are the server's and judge's processes: the head gets only the
        # training GPUs, so the trainer's placement group cannot take theirs.
        head_gpus, head_env = s.num_gpus, {}
        if layout is not None and recipe.kind == "live":
            head_gpus, head_env = len(layout.actor), {"CUDA_VISIBLE_DEVICES": layout.ids(layout.actor)}
        ray_address = f"http://127.0.0.1:{s.ray_dashboard_port}"
        head = ["ray", "start", "--head", "--block", "--port", s.get("RAY_PORT") or str(free_port()),
                "--dashboard-host", "127.0.0.1", "--dashboard-port", str(s.ray_dashboard_port),
                "--include-dashboard", "true", "--num-gpus", str(head_gpus), "--disable-usage-stats",
                # Ray's fixed default ports collide with any other Ray on the machine: all private.
                "--ray-client-server-port", str(free_port()), "--dashboard-agent-listen-port", str(free_port()),
                "--dashboard-agent-grpc-port", str(free_port()), "--metrics-export-port", str(free_port()),
                "--runtime-env-agent-port", str(free_port()), "--node-manager-port", str(free_port()),
                "--object-manager-port", str(free_port()),
                "--min-worker-port", "20000", "--max-worker-port", "29999", "--temp-dir", str(temp_dir)]
        if s.ray_num_cpus or (recipe.kind == "track" and cpu_preset):
            head += ["--num-cpus", s.ray_num_cpus or "2"]
        ray_head = Command("ray-head", head, env=head_env, log=s.log_dir / "ray_head.log")
    runtime_env = {"env_vars": job_env}
    runtime_env_file = s.log_dir / f"runtime_env-{submission_id}.json"
    submit = Command("submit", ["ray", "job", "submit", "--address", ray_address, "--working-dir", ".",
                                "--runtime-env", str(runtime_env_file), "--submission-id", submission_id, "--",
                                *trainer])
    return Plan(recipe, s, model_path, messages, prepare, server, judge, judge_settings, imports, ray_head,
                ray_address, temp_dir, submission_id, runtime_env, runtime_env_file, submit, routed, base_url, details)


def _replace(s: Settings | Preset, **changes: object) -> Settings | Preset:
    from dataclasses import replace

    return replace(s, **changes)  # type: ignore[type-var]


def _live(s: Settings, recipe: Recipe, method_args: list[str], job_env: dict[str, str], layout: GpuLayout | None,
          model: ModelPreset | None) -> tuple[list[str], Command | None, Command, list[Command], str]:
    """The launcher's own values of the live run's commands (the layers after them come in build_plan)."""
    assert s.model_path is not None
    buf = str(s.rl_buffer_dir)
    judge_env: dict[str, str] = {}
    if layout is not None:
        backend, n_train = "sglang", len(layout.actor)
        server_env = {"CUDA_VISIBLE_DEVICES": layout.ids(layout.rollout)}
        job_env["CUDA_VISIBLE_DEVICES"] = layout.ids(layout.actor)
        judge_env["CUDA_VISIBLE_DEVICES"] = layout.ids(layout.prm)  # none: the judge model runs on the CPU
    else:
        backend, n_train, server_env = "hf", 1, {}
        job_env["CUDA_VISIBLE_DEVICES"] = ""
    # The personal agent gates what it serves: a pushed version is served only after the canary
    # passes; OPENCLAW_PROMOTION_GATE=0 turns it off. The dashboard plots the trainer's log.
    server_env = {**server_env, "OPENCLAW_PROMOTION_GATE": s.get("OPENCLAW_PROMOTION_GATE") or "1",
                  "OPENCLAW_CONTROL_DIR": s.get("OPENCLAW_CONTROL_DIR") or str(s.log_dir / "weight-versions"),
                  "OPENCLAW_TRAIN_LOG_DIR": str(s.log_dir)}
    server = None
    if s.server_url:
        base_url = s.server_url.rstrip("/")
    else:
        server = Command(SERVER, [s.python, "-m", "openclaw.server", "--model-path", s.model_path, "--backend", backend,
                                  "--host", s.host, "--port", str(s.port), "--enable-rl-intercept",
                                  "--rl-buffer-dir", buf,
                                  *(model.server_flags(layout) if model and layout else [])],
                         env=server_env, log=s.log_dir / "server.log")
        base_url = f"http://{_server_address_for_trainer(s)}:{s.port}"
    # a judge model on GPUs of its own: SGLang over all of them (one engine, tensor parallel)
    judge_engine = ["--prm-backend", "sglang", "--prm-tp-size", str(len(layout.prm))] \
        if layout is not None and layout.prm and s.prm_model_path else []
    judge = Command(JUDGE, [s.python, "-m", "openclaw.judge", "--rl-buffer-dir", buf, *judge_engine], env=judge_env,
                    log=s.log_dir / "judge.log")
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
    if s.resume_ckpt:
        trainer += ["--resume-from-checkpoint", str(s.resume_ckpt)]
    return trainer, server, judge, imports, base_url


def _server_address_for_trainer(s: Settings) -> str:
    """The server's address as the trainer's node reaches it. With a private head the trainer runs on
    this node (loopback). On a cluster (RAY_ADDRESS) it may run on another node: a server listening on
    every interface is reached at this node's IP, discovered the way Ray finds a node's own address
    (the interface that routes to the head); a loopback-only server cannot be reached and is refused."""
    wildcard = s.host in WILDCARD_HOSTS
    if s.ray_address is None:
        return "127.0.0.1" if wildcard else s.host
    head = s.ray_address.split("://", 1)[-1].rsplit(":", 1)[0]
    if is_loopback(head):
        return "127.0.0.1" if wildcard else s.host
    if wildcard:
        import ray.util

        return ray.util.get_node_ip_address(f"{head}:80")
    if is_loopback(s.host):
        raise LaunchError(f"the trainer runs on the Ray cluster at RAY_ADDRESS={s.ray_address}, whose other nodes "
                          f"cannot reach a server on {s.host}: set OPENCLAW_HOST=0.0.0.0 (and OPENCLAW_API_KEY, which "
                          "an exposed server requires), or OPENCLAW_HOST=<this node's IP>")
    return s.host


def _episode_vars(recipe: Recipe, method_args: list[str]) -> dict[str, str]:
    def value(flag: str) -> str:
        return method_args[method_args.index(flag) + 1] if flag in method_args else "?"

    return {"MAX_STEPS": value("--max-steps"), "PARALLEL_ENVS": value("--parallel-envs"),
            "NUM_ROLLOUT": value("--num-rollout")}


def _track(s: Settings, recipe: Recipe, method_args: list[str], job_env: dict[str, str],
           layout: GpuLayout | None) -> list[str]:
    """The launcher's own values of a track's trainer command (the layers after them come in build_plan).
    A layout the user gave becomes the trainer's GPU counts (its engines run inside the job: Ray places
    them); without one, slime's own defaults apply."""
    assert s.model_path is not None
    cluster: list[str] = []
    asked = any(s.values.get(n) for n in ("TRAIN_GPUS", "ROLLOUT_GPUS", "ACTOR_GPUS", "NUM_GPUS"))
    if layout is not None and asked:
        cluster += ["--actor-num-gpus-per-node", str(len(layout.actor))]
        cluster += ["--colocate"] if layout.colocated else ["--rollout-num-gpus", str(len(layout.rollout))]
    if s.resume_ckpt:
        cluster += ["--resume-from-checkpoint", str(s.resume_ckpt)]
    job_env.update(recipe.job_env(s))
    for var, flag in (("MAX_STEPS", "--max-steps"), ("PARALLEL_ENVS", "--parallel-envs")):
        if flag in method_args:
            job_env[var] = method_args[method_args.index(flag) + 1]
    return ["python", "slime/train.py", "--hf-checkpoint", s.model_path, *method_args,
            "--save", str(s.ckpt_save_dir), "--log-dir", str(s.log_dir), "@PRESET@", *cluster]


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
