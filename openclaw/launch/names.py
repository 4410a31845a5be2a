"""Every name a user types to the launcher, in one table: env vars, the launcher's own flags, the
`--config` keys it handles itself, and the run scripts.

The launcher reads the table, it does not restate it: `Settings` reads only names declared here
(another name is a programming error), folds aliases into their documented name (two spellings with
different values are an error naming both), refuses a `refused` name with its reason, passes a
`to=(component, flag)` name to that component as that flag, and masks `secret` values in the plan.
`markdown_table()` is the table in openclaw/launch/README.md; tests/test_names_table.py walks every
row through a run script's dry run.

Flags of the server, judge and trainer are not here: each component's own parser declares them and
the router sends each flag to its owner (routing.py). Keys of a `--config` file not listed here are
the trainer's (slime's `--config` schema, slime/README.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from openclaw.methods import builtin_methods

LIVE = tuple(r for m in builtin_methods().values() for r in m.recipes)  # rl, opd, opd-topk, combine
TRACKS = ("terminal-rl", "toolcall-rl", "swe-rl", "gui-rl")
ALL = LIVE + TRACKS
SANDBOXED = ("terminal-rl", "toolcall-rl", "swe-rl")


@dataclass(frozen=True)
class Name:
    name: str
    does: str
    kind: str = "env"  # env | flag | key | script
    to: tuple[str, str] | None = None  # (component, flag): the value is passed as is
    alias_of: str | None = None  # another spelling of that name (same effect)
    refused: str | None = None  # why it cannot apply; the launch stops naming it
    secret: bool = False  # never printed: `***` in the plan
    recipes: tuple[str, ...] = ALL  # where it applies (elsewhere the plan notes it is not used)
    trains: str | None = None  # evaluation scripts: the script that trains

    def applies(self, recipe: str, live: bool) -> bool:
        """Whether this name is read by `recipe`; a method given by file reads what every live recipe reads."""
        return recipe in self.recipes or (live and set(LIVE) <= set(self.recipes))

    @property
    def recipe(self) -> str | None:
        """A run script's recipe (None for an evaluation script)."""
        return self.recipes[0] if self.kind == "script" and self.recipes else None


_JUDGE_ONE_MODEL = "the judge (LLM judge served from this model; a path must exist)"
_ENGINE_IS_SERVER = ("the live trainer's rollout engine is the server this launch starts (or a running one: "
                     "OPENCLAW_SERVER_URL)")
_TINKER = ("this recipe trains with slime here, not through the Tinker API: use `bash deploy_to_tinker.sh` "
           "(openclaw-tinker/README.md), or unset it")

NAMES: tuple[Name, ...] = (
    # ---- model, data, checkpoints ------------------------------------------------------------------
    Name("MODEL_PATH", "the model served and trained (a folder, which must exist, or a hub id); unset without "
         "a GPU: the embedded CPU preset"),
    Name("BASE_MODEL_PATH", "the first page's server variable", alias_of="MODEL_PATH"),
    Name("CKPT_PATH", "the second page's script variable for the model checkpoint", alias_of="MODEL_PATH"),
    Name("TOKENIZER_PATH", "the second page's script variable",
         refused="does not apply: the tokenizer is read from MODEL_PATH's folder (it must be the engine's own); "
                 "unset it"),
    Name("MODEL_SIZE", "the model size named in the launcher's messages (7b)"),
    Name("CPU_PRESET_MODEL", "the CPU preset's model: smollm2 (default) or tiny (a random test model)"),
    Name("DATA_PATH", "live: session files or folders imported into the buffer first (each must exist); "
         "terminal/swe/gui-rl: the prompt JSONL (prepared when missing)",
         recipes=(*LIVE, "terminal-rl", "swe-rl", "gui-rl")),
    Name("CKPT_SAVE_DIR", "the trainer's checkpoint folder, --save-dir (default ./checkpoints/<recipe>)"),
    Name("RESUME_CKPT", "trainer --resume-from-checkpoint (must exist)"),
    Name("LOG_DIR", "trainer --log-dir; the server's, judge's and Ray head's logs (default ./logs)"),
    Name("HF_CKPT", "the upstream scripts' spelling", alias_of="MODEL_PATH"),
    Name("SAVE_CKPT", "the upstream scripts' spelling", alias_of="CKPT_SAVE_DIR"),
    Name("REF_LOAD", "trainer --ref-load: the KL reference model (default: the initial policy)",
         to=("trainer", "--ref-load")),
    Name("MODEL_PRESET", "the GPU recipe's model preset (qwen3-0.6b ... qwen3-32b; default: read from MODEL_PATH's "
         "config.json, else its folder name); its defaults are printed in the plan"),
    # ---- GPU layout (openclaw/launch/layout.py): counts or lists, never both --------------------------------
    Name("NUM_GPUS", "GPUs on the node the plan is for (more than found: refused, except in a dry run)"),
    Name("ACTOR_GPUS", "how many GPUs train (counts: training, then rollout, then the judge, in GPU order)"),
    Name("TRAIN_GPUS", "GPU ids of the trainer, e.g. 0,1,2,3 (refused on a machine without GPUs)"),
    Name("ROLLOUT_GPUS", "GPU ids of the rollout engine (4,5,6,7), or how many with ACTOR_GPUS/NUM_GPUS; "
         "TRAIN_GPUS = ROLLOUT_GPUS colocates"),
    Name("PRM_GPUS", "GPUs of the judge model (PRM_MODEL_PATH): a count, or ids with TRAIN_GPUS; never shared with "
         "training or rollout; 0: the judge on the CPU", recipes=LIVE),
    Name("CKPT_ARGS", "trainer flags replacing the preset's checkpoint flags"),
    Name("ROLLOUT_ARGS", "trainer flags replacing the preset's rollout flags"),
    Name("OPTIMIZER_ARGS", "trainer flags replacing the preset's optimizer flags"),
    Name("LORA_ARGS", "trainer flags replacing the preset's LoRA flags"),
    Name("EXTRA_ARGS", "more trainer flags"),
    Name("METHOD_ARGS", "trainer flags replacing the recipe's method flags (plugins, estimator)"),
    Name("REWARD_ARGS", "flags routed like the command line's, each to the component that declares it"),
    Name("NUM_ROLLOUT", "trainer --num-rollout (live default: until stopped)"),
    # ---- judge ------------------------------------------------------------------------------------------
    Name("PRM_MODEL_PATH", _JUDGE_ONE_MODEL, to=("judge", "--prm-model-path"), recipes=LIVE),
    Name("JUDGE_MODEL_PATH", "the first page's OPD spelling (one judge model scores and writes hints)",
         alias_of="PRM_MODEL_PATH", recipes=LIVE),
    Name("MAJORITY_VOTE_N", "judge --majority-vote-n", to=("judge", "--majority-vote-n"), recipes=LIVE),
    Name("MAJORITY_VOTE_THRESHOLD", "judge --majority-vote-threshold", to=("judge", "--majority-vote-threshold"),
         recipes=LIVE),
    Name("NUM_JUDGE_WORKERS", "judge --num-judge-workers", to=("judge", "--num-judge-workers"), recipes=LIVE),
    Name("PRM_M", "the upstream scripts' spelling", alias_of="MAJORITY_VOTE_N", recipes=LIVE),
    Name("PRM_TEMPERATURE", "judge --judge-temperature", to=("judge", "--judge-temperature"), recipes=LIVE),
    Name("PRM_MAX_NEW_TOKENS", "judge --judge-max-tokens", to=("judge", "--judge-max-tokens"), recipes=LIVE),
    # ---- server ------------------------------------------------------------------------------------------
    Name("OPENCLAW_HOST", "server --host (127.0.0.1)", recipes=LIVE),
    Name("OPENCLAW_PORT", "server --port (8000); the trainer's engine address follows it", recipes=LIVE),
    Name("OPENCLAW_API_KEY", "the key the server requires; the job and the launcher's calls send it (job env)",
         secret=True),
    Name("SGLANG_API_KEY", "the upstream scripts' spelling of the served API's key", alias_of="OPENCLAW_API_KEY",
         secret=True),
    Name("SERVED_MODEL_NAME", "server --served-model-name (the id /v1/models reports)",
         to=("server", "--served-model-name"), recipes=LIVE),
    Name("TP", "server --tp-size: the SGLang engine's tensor parallelism (the GPU recipe sets it from the model "
         "preset and the rollout GPUs)", to=("server", "--tp-size"), recipes=LIVE),
    Name("CONTEXT_LENGTH", "server --context-length", to=("server", "--context-length"), recipes=LIVE),
    Name("MEM_FRACTION_STATIC", "server --mem-fraction-static (SGLang)", to=("server", "--mem-fraction-static"),
         recipes=LIVE),
    Name("REASONING_PARSER", "server --reasoning-parser (qwen3: <think> goes to reasoning_content)",
         to=("server", "--reasoning-parser"), recipes=LIVE),
    Name("TOOL_CALL_PARSER", "server --tool-call-parser (SGLang's parser name)", to=("server", "--tool-call-parser"),
         recipes=LIVE),
    Name("OPENCLAW_SERVER_URL", "use this running server: no server is started", recipes=LIVE),
    Name("RL_BUFFER_DIR", "the buffer the server, judge and trainer share (./rl_buffer)", recipes=LIVE),
    Name("BUFFER_WAIT_TIMEOUT", "trainer --buffer-wait-timeout", to=("trainer", "--buffer-wait-timeout"),
         recipes=LIVE),
    Name("OPENCLAW_PROMOTION_GATE", "server env: serve a pushed weight version only after its canary (1; 0: off)",
         recipes=LIVE),
    Name("OPENCLAW_CONTROL_DIR", "server env: the weight-version store (default $LOG_DIR/weight-versions)",
         recipes=LIVE),
    # ---- Weights & Biases -------------------------------------------------------------------------------------
    Name("WANDB_API_KEY", "turns W&B logging on; job env only, never a flag", secret=True),
    Name("WANDB_KEY", "the first launcher's spelling", alias_of="WANDB_API_KEY", secret=True),
    Name("WANDB_PROJECT", "turns W&B logging on: trainer --wandb-project (default: the recipe's name)"),
    Name("WANDB_GROUP", "turns W&B logging on: trainer --wandb-group"),
    Name("WANDB_MODE", "online / offline turn W&B logging on (trainer --wandb-mode); disabled turns it off"),
    Name("HF_TOKEN", "Hugging Face token for model downloads (job env)", secret=True),
    # ---- Ray -------------------------------------------------------------------------------------------------
    Name("RAY_ADDRESS", "submit to this cluster; no private head is started"),
    Name("RAY_DASHBOARD_PORT", "the private head's dashboard port (8265)"),
    Name("RAY_PORT", "the private head's GCS port (free by default)"),
    Name("RAY_GCS_PORT", "Ray's own spelling", alias_of="RAY_PORT"),
    Name("RAY_NUM_CPUS", "the private head's --num-cpus"),
    Name("RAY_START_TIMEOUT", "seconds to wait for the private head (300)"),
    Name("RAY_AUTH_MODE", "job env and Ray's calls (disabled)"),
    # ---- the launcher ---------------------------------------------------------------------------------------
    Name("OPENCLAW_DRY_RUN", "1: print the plan, start and write nothing"),
    Name("DRY_RUN", "the first launcher's spelling", alias_of="OPENCLAW_DRY_RUN"),
    Name("OPENCLAW_PROGRESS_INTERVAL", "seconds between live progress lines (30)", recipes=LIVE),
    Name("PYTHON", "the interpreter of the server, judge and data preparation (python)"),
    Name("OPENCLAW_CALLER_DIR", "set by the run scripts: the folder they were started from (relative --config)"),
    # ---- methods -----------------------------------------------------------------------------------------------
    Name("OPD_TOPK", "trainer --opd-topk (16)", recipes=("openclaw-opd-topk",)),
    Name("OPENCLAW_COMBINE_W_OPD", "trainer --openclaw-combine-w-opd", to=("trainer", "--openclaw-combine-w-opd"),
         recipes=("openclaw-combine",)),
    Name("OPENCLAW_COMBINE_W_RL", "trainer --openclaw-combine-w-rl", to=("trainer", "--openclaw-combine-w-rl"),
         recipes=("openclaw-combine",)),
    # ---- tracks ------------------------------------------------------------------------------------------------
    Name("ENV_TYPE", "must name the script's track (terminal, toolcall, swe, gui)", recipes=TRACKS),
    Name("MAX_STEPS", "trainer --max-steps (turns per episode)", recipes=TRACKS),
    Name("PARALLEL_ENVS", "trainer --parallel-envs (episodes at once)", recipes=TRACKS),
    Name("SANDBOX", "trainer --sandbox: bwrap (default) or none", recipes=SANDBOXED),
    Name("HF_HUB_OFFLINE", "job env (1)", recipes=TRACKS),
    Name("PRM_STEP_COEF", "trainer --prm-step-coef (0)", recipes=("terminal-rl", "swe-rl")),
    Name("TASKS_PATH", "terminal-rl's task folder (trainer --terminal-tasks; must exist)", recipes=("terminal-rl",)),
    Name("TASK_TYPE", "bash_commands: terminal-rl's task family (others refused)", recipes=("terminal-rl",)),
    Name("TOOLS_CONFIG", "trainer --tools-config (must exist)", recipes=("toolcall-rl",)),
    Name("DATA_DIR", "toolcall-rl's data folder (train.jsonl, eval.jsonl)", recipes=("toolcall-rl",)),
    Name("TRAIN_SIZE", "problems generated when train.jsonl is prepared (512)", recipes=("toolcall-rl",)),
    Name("EVAL_LIMIT", "GSM8K questions kept when eval.jsonl is prepared (200 / 8)", recipes=("toolcall-rl",)),
    Name("EVAL_INTERVAL", "trainer --eval-interval (20)", recipes=("toolcall-rl",)),
    Name("TOOL_USE_BONUS", "trainer --tool-use-bonus (0.1)", recipes=("toolcall-rl",)),
    Name("SWE_BENCH_PATH", "trainer --swe-bench-path: SWE-bench instances (must exist)", recipes=("swe-rl",)),
    Name("SWE_BENCH_REPOS", "job env: the repositories' mirrors", recipes=("swe-rl",)),
    Name("OPENCLAW_SWE_CACHE", "job env: the built workspaces' cache", recipes=("swe-rl",)),
    Name("SCREENSHOT_BACKEND", "trainer --screenshot-backend: playwright or selenium", recipes=("gui-rl",)),
    # ---- the second public page ---------------------------------------------------------------------------------
    Name("USE_LORA", "true: trainer --use-lora; false: full fine-tuning (the preset's LoRA flags dropped)"),
    Name("LORA_RANK", "trainer --lora-rank (turns LoRA on)", to=("trainer", "--lora-rank")),
    Name("LORA_ALPHA", "trainer --lora-alpha (turns LoRA on)", to=("trainer", "--lora-alpha")),
    Name("LORA_DROPOUT", "trainer --lora-dropout (turns LoRA on)", to=("trainer", "--lora-dropout")),
    Name("LEARNING_RATE", "trainer --lr", to=("trainer", "--lr")),
    Name("CLIP_GRAD_NORM", "trainer --clip-grad", to=("trainer", "--clip-grad")),
    Name("PPO_CLIP_RATIO", "trainer --eps-clip", to=("trainer", "--eps-clip")),
    Name("BATCH_SIZE", "trainer --global-batch-size (samples per optimizer step)"),
    Name("GRAD_ACCUM_STEPS", "trainer --micro-batch-size = samples per step / steps (must divide)"),
    Name("USE_GRADIENT_CHECKPOINTING", "true: trainer --gradient-checkpointing"),
    Name("VALUE_CLIP", "true is refused: the methods are critic-free (no value function to clip)"),
    Name("OPENCLAW_DEBUG", "server and judge --log-level debug (tracks run neither: refused)"),
    Name("ROLLOUT_LOG_LEVEL", "the server's --log-level (its RL intercept collects the rollouts; tracks run no "
         "server: refused)"),
    Name("MASTER_ADDR", "job env: the trainer's process-group rendezvous"),
    Name("MASTER_PORT", "job env: the trainer's process-group rendezvous"),
    Name("NNODES", "1: trainer --actor-num-nodes 1; more: refused with the Ray-cluster steps"),
    Name("NODE_RANK", "0; others refused (other nodes join node 0's Ray cluster)"),
    Name("GPUS_PER_NODE", "use that many of the GPUs found (more: refused); 0: the CPU preset"),
    Name("TINKER_ENDPOINT", "the Tinker service", refused=_TINKER),
    Name("TINKER_API_KEY", "the Tinker key", refused=_TINKER, secret=True),
    Name("TINKER_PROJECT_ID", "the Tinker project", refused=_TINKER),
    # ---- the launcher's flags (other flags belong to the server, judge or trainer: routing.py) -------------------
    Name("--config", "a YAML file (the second page's schema, or flag names): each key becomes the setting or "
         "trainer flag it names (the plan's config: line); the command line's flags win", kind="flag"),
    Name("--model-path", "every component trains / serves it", kind="flag", alias_of="MODEL_PATH"),
    Name("--hf-checkpoint", "the trainer's spelling", kind="flag", alias_of="MODEL_PATH"),
    Name("--rl-buffer-dir", "every live component uses it", kind="flag", alias_of="RL_BUFFER_DIR", recipes=LIVE),
    Name("--log-dir", "every component logs there", kind="flag", alias_of="LOG_DIR"),
    Name("--num-rollout", "the trainer's run length", kind="flag", alias_of="NUM_ROLLOUT"),
    Name("--resume-from-checkpoint", "the trainer resumes (must exist)", kind="flag", alias_of="RESUME_CKPT"),
    Name("--host", "the server's address", kind="flag", alias_of="OPENCLAW_HOST", recipes=LIVE),
    Name("--port", "the server's port (the trainer's engine address follows it)", kind="flag",
         alias_of="OPENCLAW_PORT", recipes=LIVE),
    Name("--api-key", "the server's key", kind="flag",
         refused="is not accepted on the command line (it would show in `ps`): set OPENCLAW_API_KEY instead"),
    Name("--wandb-key", "the trainer's W&B key", kind="flag",
         refused="is not accepted (it would show in `ps` and in the plan): set WANDB_API_KEY instead"),
    Name("--backend", "the server's engine, replacing the recipe's: hf (CPU) or sglang (GPU); vllm and tinker are "
         "refused (they cannot load the trained weights)", kind="flag", to=("server", "--backend"), recipes=LIVE),
    Name("--rollout-backend", "the live trainer's engine", kind="flag", refused=_ENGINE_IS_SERVER, recipes=LIVE),
    Name("--rollout-external-engine-addrs", "the live trainer's engine", kind="flag", refused=_ENGINE_IS_SERVER,
         recipes=LIVE),
    Name("--rollout-num-engines", "engines the trainer starts (alias --num-rollout-workers)", kind="flag",
         refused=_ENGINE_IS_SERVER + ", so the trainer starts no engines", recipes=LIVE),
    Name("--lora", "run_combine_training.sh's first flag: its LoRA script", kind="flag",
         recipes=("openclaw-combine",)),
    # ---- --config keys the launcher handles (the rest are the trainer's: slime/README.md) ----------------------
    Name("model.checkpoint_path", "the model (null: MODEL_PATH decides)", kind="key", alias_of="MODEL_PATH"),
    Name("training.max_steps", "the trainer's run length", kind="key", alias_of="NUM_ROLLOUT"),
    Name("model.name", "server --served-model-name (the name /v1/models reports)", kind="key",
         to=("server", "--served-model-name"), recipes=LIVE),
    Name("model.name", "a track's engine runs inside the job", kind="key", recipes=TRACKS,
         refused="does not apply: a track's engine runs inside the job and nothing reads its name; drop it"),
    Name("rollout.num_workers", "trainer --rollout-num-engines (CPU); on GPUs ROLLOUT_GPUS decides", kind="key",
         to=("trainer", "--rollout-num-engines"), recipes=TRACKS),
    Name("rollout.num_workers", "the live engine", kind="key", recipes=LIVE,
         refused=f"does not apply: {_ENGINE_IS_SERVER}, so the trainer starts no engines; drop it"),
    Name("evaluation.eval_frequency", "trainer --eval-interval (on the recipe's GSM8K eval set)", kind="key",
         to=("trainer", "--eval-interval"), recipes=("toolcall-rl",)),
    Name("evaluation.eval_frequency", "evaluation during a track's training", kind="key",
         recipes=tuple(t for t in TRACKS if t != "toolcall-rl"),
         refused="does not apply: this track's training run has no evaluation set; evaluate a checkpoint with "
                 "the track's run_*_agent.sh"),
    Name("evaluation.eval_frequency", "live evaluation", kind="key", recipes=LIVE,
         refused="does not apply: the live methods train on users' sessions and have no evaluation set; evaluate "
                 "checkpoints with openclaw-test/run_eval.sh"),
    Name("training.gradient_accumulation_steps", "trainer --micro-batch-size = training.batch_size / steps (the "
         "file must set training.batch_size too)", kind="key"),
    # ---- run scripts ----------------------------------------------------------------------------------------------
    Name("openclaw-rl/run_qwen3_7b_openclaw_rl.sh", "Binary RL", kind="script", recipes=("openclaw-rl",)),
    Name("openclaw-rl/run_qwen3_7b_lora_openclaw_rl.sh", "Binary RL, LoRA (sets LORA_ARGS, OPTIMIZER_ARGS)",
         kind="script", recipes=("openclaw-rl",)),
    Name("openclaw-rl/run_binary_rl.sh", "the second page's name", kind="script",
         alias_of="openclaw-rl/run_qwen3_7b_openclaw_rl.sh", recipes=("openclaw-rl",)),
    Name("openclaw-opd/run_qwen3_7b_openclaw_opd.sh", "on-policy distillation", kind="script",
         recipes=("openclaw-opd",)),
    Name("openclaw-opd/run_qwen3_7b_openclaw_opd_topk.sh", "OPD, top-k distillation loss", kind="script",
         recipes=("openclaw-opd-topk",)),
    Name("openclaw-opd/run_opd_training.sh", "the second page's name", kind="script",
         alias_of="openclaw-opd/run_qwen3_7b_openclaw_opd.sh", recipes=("openclaw-opd",)),
    Name("openclaw-combine/run_qwen3_7b_openclaw_combine.sh", "Binary RL + OPD", kind="script",
         recipes=("openclaw-combine",)),
    Name("openclaw-combine/run_qwen3_7b_lora_openclaw_combine.sh", "Binary RL + OPD, LoRA", kind="script",
         recipes=("openclaw-combine",)),
    Name("openclaw-combine/run_combine_training.sh", "the second page's name (--lora: the LoRA script)",
         kind="script", alias_of="openclaw-combine/run_qwen3_7b_openclaw_combine.sh", recipes=("openclaw-combine",)),
    Name("terminal-rl/run_terminal_rl.sh", "terminal agent RL", kind="script", recipes=("terminal-rl",)),
    Name("terminal-rl/run_terminal_agent.sh", "the second page's name", kind="script",
         alias_of="terminal-rl/run_terminal_rl.sh", recipes=("terminal-rl",)),
    Name("toolcall-rl/run_toolcall_rl.sh", "tool-call agent RL", kind="script", recipes=("toolcall-rl",)),
    Name("toolcall-rl/run_toolcall_agent.sh", "the second page's name (TOOLS_CONFIG from the caller's folder)",
         kind="script", alias_of="toolcall-rl/run_toolcall_rl.sh", recipes=("toolcall-rl",)),
    Name("swe-rl/run_swe_rl.sh", "SWE agent RL", kind="script", recipes=("swe-rl",)),
    Name("gui-rl/run_gui_rl.sh", "GUI agent RL", kind="script", recipes=("gui-rl",)),
    Name("gui-rl/run_gui_agent.sh", "evaluates a model as a GUI agent (no training)", kind="script", recipes=(),
         trains="gui-rl/run_gui_rl.sh"),
    Name("swe-rl/run_swe_agent.sh", "evaluates a model as a SWE agent (no training)", kind="script", recipes=(),
         trains="swe-rl/run_swe_rl.sh"),
    Name("openclaw-test/run_eval.sh", "evaluates a checkpoint (no training)", kind="script", recipes=(),
         trains="openclaw-combine/run_qwen3_7b_openclaw_combine.sh"),
)

ENV: dict[str, Name] = {n.name: n for n in NAMES if n.kind == "env"}
SECRETS: frozenset[str] = frozenset(n.name for n in NAMES if n.kind == "env" and n.secret)
# Flags the launcher reads itself: every component must agree on these, so they replace the env var.
LAUNCHER_FLAGS: dict[str, str] = {n.name: n.alias_of for n in NAMES if n.kind == "flag" and n.alias_of}


def entry(name: str, recipe: str, kind: str = "env") -> Name | None:
    """The row for `name` as `recipe` sees it (a name may have one row per group of recipes)."""
    rows = [n for n in NAMES if n.name == name and n.kind == kind]
    return next((n for n in rows if recipe in n.recipes), rows[0] if rows else None)


def refused_flag(flag: str, recipe: str) -> str | None:
    """The reason a launcher-level flag is refused for `recipe` (None: it is not refused)."""
    row = entry(flag, recipe, "flag")
    return row.refused if row is not None and row.refused and recipe in row.recipes else None


def passthrough(component: str, recipe: str) -> list[tuple[str, str]]:
    """(env var, flag) pairs whose value `component` gets as is, for `recipe`."""
    return [(n.name, n.to[1]) for n in NAMES
            if n.kind == "env" and n.to and n.to[0] == component and recipe in n.recipes]


def markdown_table() -> str:
    """The table in openclaw/launch/README.md (a test keeps the two equal)."""
    def where(n: Name) -> str:
        if n.kind == "script":
            return n.recipe or "-"
        if n.recipes == ALL:
            return "all"
        if n.recipes == LIVE:
            return "live"
        if n.recipes == TRACKS:
            return "tracks"
        return ", ".join(n.recipes)

    def what(n: Name) -> str:
        text = f"= `{n.alias_of}` ({n.does})" if n.alias_of else n.does
        if n.refused:
            text += f"; refused: {n.refused}"
        if n.trains:
            text += f"; trains: `{n.trains}`"
        return text.replace("|", "/")

    rows = ["| name | kind | recipes | what it does |", "|---|---|---|---|"]
    rows += [f"| `{n.name}` | {n.kind} | {where(n)} | {what(n)} |" for n in NAMES]
    return "\n".join(rows)
