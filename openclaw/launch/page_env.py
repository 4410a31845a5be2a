"""Env vars that become a component's flags: names.py's `to=` pairs, and the second public page's
variables whose value needs more than passing on, each mapped onto a flag or refused with the reason.

The second public page tells users to `export USE_LORA=true`, `BATCH_SIZE=8`, `PPO_CLIP_RATIO=0.1`,
`MASTER_ADDR=...` and so on. Each one becomes the flag of the component that owns the setting (placed
before the `--config` file's and the command line's flags, which replace it), a job env var the trainer
really reads, or a `LaunchError` saying why it does not apply. Nothing documented is accepted and ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from openclaw.launch.names import passthrough
from openclaw.launch.settings import LaunchError, Settings

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
# The terminal track's only task family is shell commands in a sandbox (the page's `bash_commands`).
TASK_TYPES = {"terminal-rl": ("bash_commands", "terminal")}
CRITIC_FREE = ("does not apply: the methods here are critic-free (GRPO / OPD advantages come from group-normalised "
               "rewards and teacher log-probs), so there is no value function to clip")


def flag_bool(s: Settings, name: str) -> bool | None:
    """true/false env var; None when unset. Anything else is an error (a typo must not read as false)."""
    raw = s.get(name)
    if raw is None:
        return None
    if raw.strip().lower() in _TRUE:
        return True
    if raw.strip().lower() in _FALSE:
        return False
    raise LaunchError(f"{name}={raw!r}: expected true or false")


def _int(s: Settings, name: str, low: int = 0) -> int | None:
    return int_value(s.get, name, low)


def int_value(get: Callable[[str], str | None], name: str, low: int = 0) -> int | None:
    """A setting that must be an integer >= `low` (None when unset)."""
    raw = get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise LaunchError(f"{name}={raw!r} is not an integer") from None
    if value < low:
        raise LaunchError(f"{name}={value} must be >= {low}")
    return value


@dataclass
class PageEnv:
    """What the page's env vars ask of each component (command-line flags are added after these)."""

    trainer: list[str] = field(default_factory=list)
    server: list[str] = field(default_factory=list)
    judge: list[str] = field(default_factory=list)
    job_env: dict[str, str] = field(default_factory=dict)
    drop_preset_lora: bool = False
    use_lora: bool = False  # USE_LORA=true or a LORA_RANK/ALPHA/DROPOUT: the run trains an adapter
    gpus_per_node: int | None = None
    became: dict[str, str] = field(default_factory=dict)  # VAR -> what it became, for the plan

    def note(self, var: str, what: str) -> None:
        self.became[var] = what


def read_page_env(s: Settings, recipe_name: str, live: bool) -> PageEnv:
    out = PageEnv()
    if flag_bool(s, "VALUE_CLIP"):
        raise LaunchError(f"VALUE_CLIP={s.get('VALUE_CLIP')} {CRITIC_FREE}; unset it")
    _lora(s, out)
    # passed as is: the owner's parser checks the value and names its flag
    for component, argv in (("trainer", out.trainer), ("judge", out.judge), ("server", out.server)):
        for var, flag in passthrough(component, recipe_name):
            if s.get(var) is not None:
                argv += [flag, s.get(var) or ""]
                out.note(var, f"{component} {flag}")
    if flag_bool(s, "USE_GRADIENT_CHECKPOINTING"):
        out.trainer.append("--gradient-checkpointing")
        out.note("USE_GRADIENT_CHECKPOINTING", "trainer --gradient-checkpointing")
    _logging(s, out, recipe_name, live)
    _task_type(s, recipe_name)
    _nodes(s, out)
    return out


def _lora(s: Settings, out: PageEnv) -> None:
    use = flag_bool(s, "USE_LORA")
    out.use_lora = bool(use) or (use is None and any(s.get(v) is not None for v in ("LORA_RANK", "LORA_ALPHA",
                                                                                   "LORA_DROPOUT")))
    if use:
        out.trainer.append("--use-lora")
        out.note("USE_LORA", "trainer --use-lora")
    elif use is False:
        asked = [v for v in ("LORA_RANK", "LORA_ALPHA", "LORA_DROPOUT") if s.get(v) is not None]
        if s.lora_args:
            asked.append("LORA_ARGS")
        if asked:
            raise LaunchError(f"USE_LORA=false but {', '.join(asked)} set: LoRA settings turn LoRA on; "
                              "unset them or USE_LORA")
        out.drop_preset_lora = True  # full fine-tuning, even where the preset trains LoRA
        out.note("USE_LORA", "no LoRA (full fine-tuning; the preset's LoRA flags dropped)")


def _logging(s: Settings, out: PageEnv, recipe_name: str, live: bool) -> None:
    debug = flag_bool(s, "OPENCLAW_DEBUG")
    level = s.get("ROLLOUT_LOG_LEVEL")
    if level is not None and level.lower() not in LOG_LEVELS:
        raise LaunchError(f"ROLLOUT_LOG_LEVEL={level!r}: expected one of {', '.join(LOG_LEVELS)}")
    if not (debug or level):
        return
    if not live:
        var = "OPENCLAW_DEBUG" if debug else "ROLLOUT_LOG_LEVEL"
        raise LaunchError(f"{var} sets the log level of the server and judge, and {recipe_name} runs neither (its "
                          "episodes run inside the trainer, which logs to $LOG_DIR/training.log); unset it")
    if debug:
        out.judge += ["--log-level", "debug"]
        out.note("OPENCLAW_DEBUG", "judge --log-level debug")
    # The server is the rollout collector (its RL intercept records the turns): its level is the
    # rollout log level; OPENCLAW_DEBUG alone makes it debug too.
    server_level = level.lower() if level else "debug"
    out.server += ["--log-level", server_level]
    out.note("ROLLOUT_LOG_LEVEL" if level else "OPENCLAW_DEBUG", f"server --log-level {server_level}")


def _task_type(s: Settings, recipe_name: str) -> None:
    task = s.get("TASK_TYPE")
    if task is None:
        return
    known = TASK_TYPES.get(recipe_name)
    if known is None:
        raise LaunchError(f"TASK_TYPE={task}: only terminal-rl has task types ({', '.join(TASK_TYPES['terminal-rl'])}); "
                          f"{recipe_name} trains on its own data (DATA_PATH); unset it")
    if task not in known:
        raise LaunchError(f"TASK_TYPE={task}: {recipe_name} trains {' / '.join(known)} tasks (TASKS_PATH picks "
                          "which tasks); unset it or use one of those")


def _nodes(s: Settings, out: PageEnv) -> None:
    nnodes, rank = _int(s, "NNODES", 1), _int(s, "NODE_RANK", 0)
    if nnodes is not None and nnodes > 1:
        raise LaunchError(
            f"NNODES={nnodes}: a multi-node run here is one Ray cluster, not one launch per node: on node 0 run "
            "`ray start --head`, on every other node `ray start --address=<node0>:6379`, then on node 0 set "
            "RAY_ADDRESS=http://<node0>:8265 and --actor-num-nodes N (or use torchrun ... slime/train_grpo.py, "
            "which takes NNODES/NODE_RANK/MASTER_ADDR as torchrun's own flags)")
    if rank:
        raise LaunchError(f"NODE_RANK={rank}: only node 0 launches; other nodes join its Ray cluster with "
                          "`ray start --address=<node0>:6379` (see NNODES)")
    if nnodes is not None:
        out.trainer += ["--actor-num-nodes", "1"]
        out.note("NNODES", "trainer --actor-num-nodes 1")
    for var in ("MASTER_ADDR", "MASTER_PORT"):
        if s.get(var) is not None:
            if var == "MASTER_PORT":
                _int(s, var, 1)
            # the trainer's process group rendezvous reads these (slime.backends.fsdp.actor)
            out.job_env[var] = s.get(var) or ""
            out.note(var, "the trainer's process-group rendezvous (job env)")
    gpus = _int(s, "GPUS_PER_NODE", 0)
    if gpus is not None:
        if gpus > s.num_gpus:
            raise LaunchError(f"GPUS_PER_NODE={gpus} but this machine has {s.num_gpus} GPU(s) (nvidia-smi -L); "
                              "a GPU run needs them (GPUS_PER_NODE=0 or unset: the CPU preset)")
        out.gpus_per_node = gpus
        out.note("GPUS_PER_NODE", f"use {gpus} of {s.num_gpus} GPU(s) (rollout / training split as for TRAIN_GPUS)")


def batch_flags(s: Settings, trainer: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """BATCH_SIZE (samples per optimizer step) -> --global-batch-size; GRAD_ACCUM_STEPS -> the micro-batch
    that many accumulation steps make (--micro-batch-size = samples per step / steps). Returns (flags, notes).
    `trainer` is the whole command line the trainer gets, so the samples per step are the run's."""
    batch, steps = _int(s, "BATCH_SIZE", 1), _int(s, "GRAD_ACCUM_STEPS", 1)
    flags: list[str] = []
    notes: dict[str, str] = {}
    if batch is not None:
        flags += ["--global-batch-size", str(batch)]
        notes["BATCH_SIZE"] = "trainer --global-batch-size"
    if steps is not None:
        per_step = batch if batch is not None else _samples_per_step(trainer)
        if per_step % steps:
            raise LaunchError(f"GRAD_ACCUM_STEPS={steps} must divide the samples per optimizer step ({per_step}; "
                              "BATCH_SIZE sets it)")
        flags += ["--micro-batch-size", str(per_step // steps)]
        notes["GRAD_ACCUM_STEPS"] = f"trainer --micro-batch-size {per_step // steps} ({per_step} / {steps})"
    return flags, notes


def _last(argv: Sequence[str], *flags: str) -> str | None:
    value = None
    for i, tok in enumerate(argv):
        name, eq, inline = tok.partition("=")
        if name in flags:
            value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    return value


def _samples_per_step(trainer: Sequence[str]) -> int:
    from slime.utils.arguments import build_parser

    parser = build_parser([])
    given = _last(trainer, "--global-batch-size")
    if given:
        return int(given)
    prompts = _last(trainer, "--rollout-batch-size") or parser.get_default("rollout_batch_size")
    per_prompt = _last(trainer, "--n-samples-per-prompt", "--num-rollouts-per-prompt") or \
        parser.get_default("n_samples_per_prompt")
    return int(prompts) * int(per_prompt)
