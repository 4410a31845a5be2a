"""Every environment variable the OpenClaw runtime reads outside the launcher, in one table.

The launcher's own names are in openclaw/launch/names.py (its README's table). Every other read of
the environment in openclaw/ and the method/track folders goes through `env_value`, which refuses a
name that is not declared here: a new variable is one row, documented where it is added.
`markdown_table()` is the table in openclaw/ENVIRONMENT.md; tests/test_environment_table.py keeps
the two equal and finds any read that bypasses `env_value`.

The table states what a variable means and who reads it, not its default: each component's parser
or config keeps its own default, so no default is written in two places. A flag always overrides
its variable.

It imports only slime's table type (standard library only): it is the bottom layer, every package
may import it.
"""

from __future__ import annotations

from slime.utils.environment import EnvTable, EnvVar

_SERVER_CLIENTS = "server, control CLI, combine scripts, tinker"
_JUDGE = "judge (and the server's in-process judge)"
_SWE = "tracks (swe-rl)"

VARIABLES: tuple[EnvVar, ...] = (
    # ---- every component ----------------------------------------------------------------------------
    EnvVar("OPENCLAW_HOME", "folder of OpenClaw's caches (converted models, tiny test models)", "every component"),
    # ---- model and server -------------------------------------------------------------------------
    EnvVar("MODEL_PATH", "the model served, evaluated or trained (a folder or a hub id)",
           "server, engine process, evaluation CLI, offline import, combine scripts, tinker"),
    EnvVar("BASE_MODEL_PATH", "the server's other spelling of MODEL_PATH (read first)", "server, combine scripts"),
    EnvVar("OPENCLAW_HOST", "the server's bind address; clients reach a wildcard address through loopback",
           _SERVER_CLIENTS),
    EnvVar("OPENCLAW_PORT", "the server's port", _SERVER_CLIENTS),
    EnvVar("OPENCLAW_API_KEY", "the bearer key the server and engines require and their clients send "
           "(an environment variable, never a flag: flags show in ps)",
           "server, engine process, evaluation CLI, control CLI, combine scripts, tinker, swe-rl evaluation"),
    EnvVar("OPENCLAW_API_KEYS_FILE", "a JSON file of per-user keys (users and admins): each user's key sees only "
           "that user's sessions (the server's --api-keys-file)", "server"),
    EnvVar("OPENCLAW_SERVER_URL", "a running server whose buffer the trainer drains", "combine scripts"),
    EnvVar("SGLANG_RETURN_ORIGINAL_LOGPROB", "1 or true: the embedded engine returns log-probs before "
           "temperature and top-p, as SGLang does under the same variable", "server (hf engine)"),
    EnvVar("TINKER_API_KEY", "the Tinker service's API key", "server (tinker backend), tinker"),
    EnvVar("TINKER_ENDPOINT", "the Tinker service's URL (unset: the SDK's own)", "server (tinker backend), tinker"),
    EnvVar("TINKER_PROJECT_ID", "the Tinker project", "server (tinker backend), tinker"),
    # ---- buffer and control -------------------------------------------------------------------------
    EnvVar("RL_BUFFER_DIR", "the trajectory buffer folder (the server writes it, trainers drain it)",
           "server, trainer (method flags), control CLI, buffer CLI, combine scripts, tinker"),
    EnvVar("OPENCLAW_PROMOTION_GATE", "1 (on) or 0 (off): a pushed weight version is served only after its "
           "canary passes", "server (control)"),
    EnvVar("OPENCLAW_CONTROL_DIR", "where kept weight versions (v<N>/) and versions.json live", "server (control)"),
    EnvVar("OPENCLAW_CANARY_MAX_PROBE_DROP", "the canary refuses a version whose probe accuracy drops by more "
           "points", "server (control)"),
    EnvVar("OPENCLAW_CANARY_MAX_SESSIONS_DROP", "the canary refuses a version whose rated-sessions score drops by "
           "more nats/token", "server (control)"),
    EnvVar("OPENCLAW_CANARY_PROBE_LIMIT", "probe questions the canary uses (fewer: a cheaper canary)",
           "server (control)"),
    EnvVar("OPENCLAW_TRAIN_LOG_DIR", "the trainer's --log-dir, whose metrics.jsonl the dashboard plots",
           "server (control)"),
    EnvVar("OPENCLAW_ENGINE_URL", "the serving engine a retract rolls back", "control CLI"),
    EnvVar("OPENCLAW_RETRACT_PAUSE_AT", "test hook: a retract stops at this step until killed (crash tests)",
           "control CLI"),
    # ---- judge ----------------------------------------------------------------------------------------
    EnvVar("JUDGE_URL", "an OpenAI-compatible endpoint of an LLM judge", _JUDGE),
    EnvVar("PRM_MODEL_PATH", "the judge model a judge server is started on", _JUDGE),
    EnvVar("JUDGE_MODEL_PATH", "another spelling of PRM_MODEL_PATH (read second)", _JUDGE),
    EnvVar("MAJORITY_VOTE_N", "judge votes per turn", _JUDGE),
    EnvVar("PRM_M", "another spelling of MAJORITY_VOTE_N (read second)", _JUDGE),
    EnvVar("MAJORITY_VOTE_THRESHOLD", "share of valid votes a label needs to win", _JUDGE),
    EnvVar("OPENCLAW_JUDGE_API_KEY", "a remote judge's API key (never a flag, never logged)", _JUDGE),
    EnvVar("OPENAI_API_KEY", "a remote judge's API key when OPENCLAW_JUDGE_API_KEY is unset", _JUDGE),
    # ---- trainer: the methods' flags ----------------------------------------------------------------
    EnvVar("BUFFER_WAIT_TIMEOUT", "seconds a rollout waits for a batch of judged turns", "trainer (method flags)"),
    EnvVar("OPD_TOPK", "teacher top-k per response token (top-k distillation)", "trainer (method flags)"),
    EnvVar("OPENCLAW_COMBINE_W_OPD", "combine's weight of the OPD advantage", "trainer (combine flags), tinker"),
    EnvVar("OPENCLAW_COMBINE_W_RL", "combine's weight of the binary-RL advantage", "trainer (combine flags), tinker"),
    # ---- tracks ---------------------------------------------------------------------------------------
    EnvVar("ENV_TYPE", "a track's --env-type (each track has one choice)", "tracks"),
    EnvVar("MAX_STEPS", "model turns per episode", "tracks, evaluation CLI, tinker (refused)"),
    EnvVar("PARALLEL_ENVS", "episodes (sandboxes, browsers) at once", "tracks"),
    EnvVar("OPENCLAW_SANDBOX", "bwrap or none (trusted local debugging only: no isolation)", "tracks"),
    EnvVar("PRM_STEP_COEF", "weight of the per-step process score added to the episode's reward", "tracks (terminal-rl, swe-rl)"),
    EnvVar("TERMINAL_TASKS", "task file or folder for samples that carry only a task id", "tracks (terminal-rl)"),
    EnvVar("TOOLS_CONFIG", "the OpenAI tools JSON of the tool-call track", "tracks (toolcall-rl)"),
    EnvVar("TOOL_USE_BONUS", "added to a correct answer's reward when a tool call succeeded", "tracks (toolcall-rl)"),
    EnvVar("GSM8K_PATH", "the GSM8K evaluation file", "tracks (toolcall-rl)"),
    EnvVar("SWE_BENCH_PATH", "SWE-bench JSON/JSONL (or a folder holding one) for samples that carry only an instance id", _SWE),
    EnvVar("SWE_BENCH_REPOS", "the folder of SWE-bench repository mirrors", _SWE),
    EnvVar("OPENCLAW_SWE_CACHE", "cache of pinned sdists and the in-sandbox pytest runtime", _SWE),
    EnvVar("SCREENSHOT_BACKEND", "playwright or selenium: the browser driver of the GUI episodes", "tracks (gui-rl)"),
    EnvVar("GUI_AGENT_MODEL", "the model gui_agent.py runs", "tracks (gui-rl)"),
    EnvVar("OPENCLAW_CHROMIUM", "the Chromium binary the GUI browsers run", "tracks (gui-rl)"),
    EnvVar("OPENCLAW_CHROMEDRIVER", "the chromedriver binary of the Selenium backend", "tracks (gui-rl)"),
    # ---- Tinker, combine's scripts, the demo ----------------------------------------------------------
    EnvVar("OPENCLAW_METHOD", "the method Tinker trains (a built-in name or a method file)", "tinker"),
    EnvVar("NUM_ROLLOUT", "training steps", "tinker"),
    EnvVar("CKPT_SAVE_DIR", "the folder of Tinker's checkpoint records", "tinker"),
    EnvVar("OPENCLAW_DRY_RUN", "print what would run instead of running it", "combine scripts, tinker"),
    EnvVar("DRY_RUN", "another spelling of OPENCLAW_DRY_RUN", "tinker"),
    EnvVar("OPENCLAW_DEBUG", "1, true or yes: log every request and reply", "combine scripts (test_rollout)"),
    EnvVar("ROLLOUT_LOG_LEVEL", "DEBUG: as OPENCLAW_DEBUG", "combine scripts (test_rollout)"),
    EnvVar("OPENCLAW_LOG_LEVEL", "the demo's logging level", "demo"),
)

OPENCLAW_ENV = EnvTable("openclaw/environment.py", VARIABLES)
env_value = OPENCLAW_ENV.value
markdown_table = OPENCLAW_ENV.markdown_table  # the table in openclaw/ENVIRONMENT.md (a test keeps the two equal)
