"""One recipe per run script: which components run, and the trainer flags that make the method.

A recipe is data plus one function: `trainer_args(settings)` returns the method's own trainer flags
(plugins as FILE paths, `./folder/file.py:attr`, which slime's plugin loader resolves, so no
PYTHONPATH lists folders), and `prepare` (tracks only) makes the prompt data before submitting.

    live   (openclaw-rl, -opd, -combine): server + intercept + judge + trainer on the buffer; each is
           built from its method object (openclaw.methods), or from a method file given by path
    track  (terminal-rl, toolcall-rl):    trainer only; episodes run in the sandbox inside the job

A new method is one file in openclaw/methods (plus its plugins); a new track adds an entry to RECIPES.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from openclaw.launch.model_presets import ModelPreset
from openclaw.launch.settings import LaunchError, Settings
from openclaw.methods import Method, MethodError, Variant, builtin_methods, get_method

# The buffer-to-trainer bridge is library code (openclaw.bridge): the trainer's data source.
BRIDGE_DATA_SOURCE = "openclaw.bridge.BufferDataSource"


@dataclass(frozen=True)
class Preset:
    """Defaults of the `*_ARGS` variables (the variables, when set, replace them whole)."""

    rollout: tuple[str, ...]
    optimizer: tuple[str, ...]
    lora: tuple[str, ...] = ()
    ckpt: tuple[str, ...] = ()
    # memory flags of a model preset (bf16, checkpointing, token budget): no *_ARGS replaces them,
    # since a script's OPTIMIZER_ARGS must not drop what makes the model fit; --no-bf16 etc. turn one off
    memory: tuple[str, ...] = ()
    banner: str = ""


@dataclass(frozen=True)
class Recipe:
    name: str
    folder: str
    kind: str  # "live" | "track"
    summary: str
    provider: str  # the method's flags (--extra-args-provider-path): declares what its trainer accepts
    trainer_args: Callable[[Settings, bool], list[str]]  # (settings, cpu_preset)
    # track only: commands that make the prompt data (run in dry runs too: they only write data)
    prepare: Callable[[Settings, bool], list[list[str]]] = lambda s, cpu: []
    # track only: env vars the job needs besides the flags (the folder's README documents them)
    job_env: Callable[[Settings], dict[str, str]] = lambda s: {}
    env_type: str | None = None
    ckpt_name: str = ""

    @property
    def checkpoint_dir_name(self) -> str:
        return self.ckpt_name or self.name

    def method_args(self, s: Settings, cpu_preset: bool) -> list[str]:
        """The method's trainer flags; METHOD_ARGS, when set, replaces them whole."""
        if s.method_args is not None:
            return list(s.method_args)
        return ["--extra-args-provider-path", self.provider, *self.trainer_args(s, cpu_preset)]

    def provider_args(self, method_args: Sequence[str] | None) -> list[str]:
        """Just the flags that pick the trainer's parser (its method provider), METHOD_ARGS' if given."""
        source = list(method_args) if method_args is not None else ["--extra-args-provider-path", self.provider]
        at = [i for i, tok in enumerate(source) if tok == "--extra-args-provider-path"]
        return [tok for i in at for tok in source[i:i + 2]]


# ---- live methods -----------------------------------------------------------------------------

def _expand(flags: Sequence[str], s: Settings) -> list[str]:
    """A method's flag values written `${NAME:-default}` take the launcher setting NAME when set."""
    out = []
    for flag in flags:
        if flag.startswith("${") and flag.endswith("}") and ":-" in flag:
            name, default = flag[2:-1].split(":-", 1)
            flag = s.get(name) or default
        out.append(flag)
    return out


def live_recipe(method: Method, variant: Variant | None = None, from_file: str | None = None) -> Recipe:
    """The launcher recipe of a personal-agent method (openclaw.methods): its plugins and trainer flags.
    A method given by file (`from_file`) is named to the trainer, which has no built-in entry for it."""
    def trainer_args(s: Settings, cpu: bool) -> list[str]:
        plugins = method.plugin_flags(variant.loss if variant else None)[2:]  # the provider is Recipe.provider
        named = ["--openclaw-method", from_file] if from_file else []
        return [*plugins, *_expand(variant.flags if variant else method.trainer_flags, s), *named]

    return Recipe(method.variant_recipe(variant), method.folder, "live", variant.summary if variant else method.summary, method.provider,
                  trainer_args, ckpt_name=method.recipe if from_file else "")


def live_preset(s: Settings, name: str, cpu_preset: bool, model_label: str = "", serving: str = "",
                judge: str = "", model: ModelPreset | None = None, lora: bool = False) -> Preset:
    """The live methods' presets; the CPU banner names the model, the server's engine and the judge
    this plan runs (`serving`, `judge`: built from the plan's own commands). On GPUs a model preset
    (model_presets.py), when one fits, gives the rollout, optimizer and memory flags."""
    ckpt = ("--save-dir", str(s.ckpt_save_dir))
    if cpu_preset:
        # 8 live turns per step, one GRPO group (baseline = their mean score; openclaw-rl/README.md)
        return Preset(
            rollout=("--rollout-batch-size", "1", "--n-samples-per-prompt", "8", "--rollout-temperature", "1.0"),
            optimizer=("--lr", "2e-4", "--weight-decay", "0", "--clip-grad", "1.0"),
            lora=("--use-lora", "--lora-rank", "16", "--lora-alpha", "32", "--lora-target-modules", "all-linear"),
            ckpt=("--save-interval", "10", *ckpt),
            banner=(f"{'=' * 78}\n {name}: no GPU and no MODEL_PATH -> embedded CPU preset\n"
                    f"   model   : {CPU_MODEL_LABELS.get(model_label, model_label)} ({s.model_path})\n"
                    f"   serving : {serving}\n"
                    f"   judge   : {judge}\n"
                    "   training: slime FSDP on CPU, LoRA\n"
                    f" Set MODEL_PATH (and use GPUs) for the {s.model_size} setup.\n{'=' * 78}"),
        )
    if model is not None:
        return Preset(rollout=model.rollout_flags(), optimizer=model.optimizer_flags(lora),
                      lora=model.lora_flags() if lora else (), ckpt=("--save-interval", "50", *ckpt),
                      memory=model.memory_flags())
    return Preset(
        rollout=("--rollout-batch-size", "1", "--n-samples-per-prompt", "16", "--rollout-temperature", "1.0"),
        optimizer=("--lr", "1e-6", "--weight-decay", "0.01", "--adam-beta1", "0.9", "--adam-beta2", "0.999"),
        ckpt=("--save-interval", "50", *ckpt),
    )


# ---- Track 2 ----------------------------------------------------------------------------------

def track_preset(s: Settings, name: str, cpu_preset: bool, model_label: str, episode_vars: dict[str, str]) -> Preset:
    if cpu_preset:
        episodes = " ".join(f"{k}={v}" for k, v in episode_vars.items())
        return Preset(
            rollout=("--rollout-backend", "embedded", "--rollout-batch-size", "2", "--n-samples-per-prompt", "2",
                     "--rollout-max-response-len", "48", "--rollout-max-context-len", "2048"),
            optimizer=("--lr", "1e-4", "--weight-decay", "0.0"),
            lora=("--use-lora", "--lora-rank", "8", "--lora-alpha", "16", "--lora-target-modules",
                  "q_proj", "k_proj", "v_proj", "o_proj"),
            ckpt=("--save-interval", "50"),
            banner=(f"{'=' * 69}\n {name}: no GPU and no MODEL_PATH -> EMBEDDED CPU PRESET\n"
                    f"   model    {s.model_path} ({model_label})\n"
                    "   engine   embedded (transformers on CPU), LoRA training, fp32\n"
                    f"   episodes {episodes}\n"
                    f" A smoke-scale run: set MODEL_PATH (and use a GPU) for real training.\n{'=' * 69}"),
        )
    return Preset(
        rollout=("--rollout-batch-size", "32", "--n-samples-per-prompt", "8", "--rollout-max-response-len", "1024",
                 "--rollout-max-context-len", "16384"),
        optimizer=("--lr", "1e-6", "--weight-decay", "0.01", "--adam-beta1", "0.9", "--adam-beta2", "0.98"),
        ckpt=("--save-interval", "50"),
    )


def track_value(s: Settings, name: str, cpu_default: str, gpu_default: str, cpu_preset: bool) -> str:
    return s.get(name) or (cpu_default if cpu_preset else gpu_default)


def _prompts(data: str) -> list[str]:
    """The prompt file every track trains on (rows: input, label, metadata)."""
    return ["--prompt-data", data, "--input-key", "input", "--label-key", "label", "--metadata-key", "metadata"]


# The tracks' rollout engine when SGLang is not used (CPU, or a GPU without it): the embedded engine
# with its prefix cache, since a GRPO group sends one prompt n times and a multi-turn episode's
# prompt extends its previous one (SGLang's radix cache does this by default). A user's own
# --rollout-engine-command comes later on the command line and wins.
ROLLOUT_ENGINE = ["--rollout-engine-command", "python -m openclaw.engines.serve --prefix-cache-tokens 8192"]


def _episodes(s: Settings, cpu: bool, plugin: str, steps: tuple[str, str], envs: tuple[str, str]) -> list[str]:
    """What every sandboxed track shares: its generate plugin (also its flags' provider, Recipe.provider),
    the episode shape ((CPU preset, GPU) defaults of MAX_STEPS / PARALLEL_ENVS) and the run length."""
    return ["--custom-generate-function-path", plugin, *ROLLOUT_ENGINE,
            "--max-steps", track_value(s, "MAX_STEPS", *steps, cpu),
            "--parallel-envs", track_value(s, "PARALLEL_ENVS", *envs, cpu),
            "--sandbox", s.get("SANDBOX") or "bwrap",
            "--num-rollout", track_value(s, "NUM_ROLLOUT", "2", "200", cpu)]


def _tasks(s: Settings) -> str:
    tasks = s.abspath(s.get("TASKS_PATH") or "terminal-rl/tasks")
    if not Path(tasks).is_dir():
        raise LaunchError(f"TASKS_PATH={s.get('TASKS_PATH')} does not exist (a folder of terminal tasks, as "
                          "terminal-rl/tasks)")
    return tasks


def _terminal(s: Settings, cpu: bool) -> list[str]:
    data = s.abspath(s.get("DATA_PATH") or "terminal-rl/data/train.jsonl")
    return [*_prompts(data), *_episodes(s, cpu, "terminal-rl/terminal_generate.py", ("4", "20"), ("4", "32")),
            "--prm-step-coef", s.get("PRM_STEP_COEF") or "0", "--terminal-tasks", _tasks(s)]


def _terminal_prepare(s: Settings, cpu: bool) -> list[list[str]]:
    data = Path(s.abspath(s.get("DATA_PATH") or "terminal-rl/data/train.jsonl"))
    if data.is_file():
        return []
    return [[s.python, "terminal-rl/prepare_data.py", "--tasks", _tasks(s), "--out", str(data)]]


def _toolcall_paths(s: Settings) -> tuple[Path, Path]:
    tools = Path(s.abspath(s.get("TOOLS_CONFIG") or "toolcall-rl/tools_config.json"))
    if not tools.is_file():
        raise LaunchError(f"TOOLS_CONFIG={tools} does not exist")
    return tools, Path(s.abspath(s.get("DATA_DIR") or "toolcall-rl/data"))


def _toolcall(s: Settings, cpu: bool) -> list[str]:
    tools, data = _toolcall_paths(s)
    return [*_prompts(str(data / "train.jsonl")),
            "--eval-prompt-data", "gsm8k", str(data / "eval.jsonl"), "--eval-interval", s.get("EVAL_INTERVAL") or "20",
            *_episodes(s, cpu, "toolcall-rl/toolcall_generate.py", ("3", "8"), ("4", "64")),
            "--tools-config", str(tools), "--tool-use-bonus", s.get("TOOL_USE_BONUS") or "0.1"]


def _toolcall_prepare(s: Settings, cpu: bool) -> list[list[str]]:
    _, data = _toolcall_paths(s)
    # TRAIN_SIZE / EVAL_LIMIT size the prepared files: when one is set the files are made again (the
    # problems are seeded), so the value given is the value trained with, not the last run's
    sized = s.get("TRAIN_SIZE") or s.get("EVAL_LIMIT")
    if (data / "train.jsonl").is_file() and (data / "eval.jsonl").is_file() and not sized:
        return []
    return [[s.python, "toolcall-rl/prepare_data.py", "--train-size", s.get("TRAIN_SIZE") or "512",
             "--eval-limit", track_value(s, "EVAL_LIMIT", "8", "200", cpu), "--out-dir", str(data)]]


def _swe_data(s: Settings) -> Path:
    bench = s.get("SWE_BENCH_PATH")
    if bench and not Path(s.abspath(bench)).exists():
        raise LaunchError(f"SWE_BENCH_PATH={bench} does not exist: a SWE-bench .json/.jsonl file, or a folder holding "
                          "one and repos/ (swe-rl/README.md)")
    default = "swe-rl/data/swe-bench.jsonl" if s.get("SWE_BENCH_PATH") else "swe-rl/data/train.jsonl"
    return Path(s.abspath(s.get("DATA_PATH") or default))


def _swe(s: Settings, cpu: bool) -> list[str]:
    args = [*_prompts(str(_swe_data(s))), *_episodes(s, cpu, "swe-rl/swe_generate.py", ("4", "20"), ("4", "8")),
            "--prm-step-coef", s.get("PRM_STEP_COEF") or "0"]
    if s.get("SWE_BENCH_PATH"):
        args += ["--swe-bench-path", s.abspath(s.get("SWE_BENCH_PATH") or "")]
    return args


def _swe_prepare(s: Settings, cpu: bool) -> list[list[str]]:
    data = _swe_data(s)
    if data.is_file():
        return []
    source = ["--swe-bench-path", s.abspath(s.get("SWE_BENCH_PATH") or "")] if s.get("SWE_BENCH_PATH") else []
    return [[s.python, "swe-rl/prepare_data.py", *source, "--out", str(data)]]


def _gui(s: Settings, cpu: bool) -> list[str]:
    plugin = "gui-rl/gui_generate.py"  # browsers, not the bubblewrap sandbox: no --sandbox flag
    return [*_prompts(s.abspath(s.get("DATA_PATH") or "gui-rl/data/train.jsonl")),
            "--custom-generate-function-path", plugin, *ROLLOUT_ENGINE,
            "--max-steps", track_value(s, "MAX_STEPS", "2", "6", cpu),
            "--parallel-envs", track_value(s, "PARALLEL_ENVS", "2", "16", cpu),
            "--screenshot-backend", s.get("SCREENSHOT_BACKEND") or "playwright",
            "--num-rollout", track_value(s, "NUM_ROLLOUT", "2", "200", cpu)]


def _gui_prepare(s: Settings, cpu: bool) -> list[list[str]]:
    data = Path(s.abspath(s.get("DATA_PATH") or "gui-rl/data/train.jsonl"))
    return [] if data.is_file() else [[s.python, "gui-rl/prepare_data.py", "--out", str(data)]]


def _track_env(*names: str) -> Callable[[Settings], dict[str, str]]:
    def job_env(s: Settings) -> dict[str, str]:
        out = {"HF_HUB_OFFLINE": s.get("HF_HUB_OFFLINE") or "1", "OPENCLAW_SANDBOX": s.get("SANDBOX") or "bwrap"}
        out.update({n: s.get(n) or "" for n in names if s.get(n)})
        return out
    return job_env


RECIPES: dict[str, Recipe] = {r.name: r for r in (
    *(live_recipe(m, v) for m in builtin_methods().values() for v in (None, *m.variants)),
    Recipe("terminal-rl", "terminal-rl", "track", "terminal agent in a bubblewrap sandbox",
           "terminal-rl/terminal_generate.py", _terminal,
           prepare=_terminal_prepare, job_env=_track_env("MAX_STEPS", "PARALLEL_ENVS"), env_type="terminal"),
    Recipe("toolcall-rl", "toolcall-rl", "track", "tool-call RL (python + calculator, GSM8K eval)",
           "toolcall-rl/toolcall_generate.py", _toolcall,
           prepare=_toolcall_prepare, job_env=_track_env("MAX_STEPS", "PARALLEL_ENVS", "TOOLS_CONFIG"),
           env_type="toolcall"),
    Recipe("swe-rl", "swe-rl", "track", "SWE agent on real projects' bugs, scored by their own tests",
           "swe-rl/swe_generate.py", _swe,
           prepare=_swe_prepare, job_env=_track_env("MAX_STEPS", "PARALLEL_ENVS", "SWE_BENCH_PATH", "SWE_BENCH_REPOS",
                                                    "OPENCLAW_SWE_CACHE"),
           env_type="swe"),
    Recipe("gui-rl", "gui-rl", "track", "GUI agent on MiniWoB++ pages in headless Chromium",
           "gui-rl/gui_generate.py", _gui,
           prepare=_gui_prepare, job_env=_track_env("MAX_STEPS", "PARALLEL_ENVS", "SCREENSHOT_BACKEND"),
           env_type="gui"),
)}


def get_recipe(name: str) -> Recipe:
    """A recipe by name, or a personal-agent method of one's own by the path of its file."""
    if name.endswith(".py"):
        try:
            file = Path(name).resolve()  # the launcher runs in the repository root (repo_root)
            # relative inside the checkout, so the trainer finds it in a Ray job's working dir too
            shown = file.relative_to(Path.cwd()) if file.is_relative_to(Path.cwd()) else file
            return live_recipe(get_method(name), from_file=str(shown))
        except MethodError as exc:
            raise LaunchError(str(exc)) from None
    try:
        return RECIPES[name]
    except KeyError:
        raise LaunchError(f"unknown recipe {name!r}; known: {', '.join(sorted(RECIPES))}, or a method file "
                          "(.py defining METHOD = openclaw.methods.Method(...))") from None


CPU_MODEL_LABELS = {"smollm2": "SmolLM2-135M-Instruct", "tiny": "a tiny random Qwen3 (CPU_PRESET_MODEL=tiny)"}


def cpu_model(s: Settings, recipe: Recipe) -> tuple[str, str]:
    """The model of the embedded CPU preset: (folder, label); CPU_PRESET_MODEL=tiny picks the test model."""
    from openclaw.models import build_tiny_model, default_model_path

    choice = s.get("CPU_PRESET_MODEL") or "smollm2"
    if choice == "smollm2":
        return default_model_path(), choice
    if choice == "tiny":
        return str(build_tiny_model()), choice
    raise LaunchError(f"CPU_PRESET_MODEL must be smollm2 or tiny, got {choice}")


def run_prepare(commands: list[list[str]], cwd: Path) -> None:
    for cmd in commands:
        done = subprocess.run(cmd, cwd=cwd)
        if done.returncode != 0:
            raise LaunchError(f"preparing data failed (exit {done.returncode}): {' '.join(cmd)}")
