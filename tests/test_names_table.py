"""Every name in the launcher's table (openclaw/launch/names.py) does what the table says.

Each row is walked through a real run script's dry run (`bash <folder>/run_*.sh`, OPENCLAW_DRY_RUN=1):
  works    exit 0; an env var shows on the plan's `env:` line with its value (`***` for a secret),
           and what it becomes (a flag with the value, a job env entry, a command) is in the plan
  alias    exit 0; the plan shows the documented name with the value, `(from ALIAS)`
  refused  non-zero exit, no traceback, nothing planned, the message names it
Compatible names share one dry run (a case); a test checks that the cases cover every row, the
`--config` keys of the trainer's own table (slime's second-page schema) included, and that the table
in openclaw/launch/README.md is the module's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from slime.utils.arguments import _PAGE_KEYS, _PAGE_REFUSED

from openclaw.launch.names import ENV, NAMES, SECRETS, markdown_table

REPO = Path(__file__).resolve().parents[1]
RL, OPD, TOPK = ("openclaw-rl/run_qwen3_7b_openclaw_rl.sh", "openclaw-opd/run_qwen3_7b_openclaw_opd.sh",
                 "openclaw-opd/run_qwen3_7b_openclaw_opd_topk.sh")
COMBINE, TERMINAL = "openclaw-combine/run_qwen3_7b_openclaw_combine.sh", "terminal-rl/run_terminal_rl.sh"
TOOLCALL, SWE, GUI = "toolcall-rl/run_toolcall_rl.sh", "swe-rl/run_swe_rl.sh", "gui-rl/run_gui_rl.sh"
SECRET = "s3cret-value-0123456789"
# The test's own settings (every run): where things go, and the small model.
HARNESS = ("OPENCLAW_DRY_RUN", "LOG_DIR", "RL_BUFFER_DIR", "CKPT_SAVE_DIR", "CPU_PRESET_MODEL", "RAY_AUTH_MODE",
           "PYTHON")


@dataclass(frozen=True)
class Case:
    script: str
    mode: str  # works | alias | refused
    env: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    expect: tuple[str, ...] = ()  # text the plan (works, alias) or the error (refused) must contain
    config: str | None = None  # a --config file's text
    covers: tuple[str, ...] = ()  # names covered besides the env vars set (flags, keys)
    gpus: int = 0  # GPUs a stand-in nvidia-smi lists (the plan depends on them; the machine's own do not count)

    @property
    def id(self) -> str:
        names = [*self.covers, *(k for k in self.env if k not in HARNESS)]
        return f"{self.mode}:{Path(self.script).name}:{','.join(names)[:80]}"


CASES = (
    # ---- works --------------------------------------------------------------------------------------
    Case(RL, "works", dict(
        MODEL_PATH="{model}", MODEL_SIZE="4b", DATA_PATH="{tmp}/sessions.json", RESUME_CKPT="{tmp}/resume",
        PRM_MODEL_PATH="{model}", MAJORITY_VOTE_N="5", MAJORITY_VOTE_THRESHOLD="0.7", NUM_JUDGE_WORKERS="2",
        OPENCLAW_HOST="0.0.0.0", OPENCLAW_PORT="8123", OPENCLAW_API_KEY=SECRET + "1", NUM_ROLLOUT="7",
        BUFFER_WAIT_TIMEOUT="33", OPENCLAW_PROMOTION_GATE="0", OPENCLAW_CONTROL_DIR="{tmp}/ctl",
        WANDB_API_KEY=SECRET + "2", WANDB_PROJECT="proj", WANDB_GROUP="grp", WANDB_MODE="offline",
        HF_TOKEN=SECRET + "3", RAY_DASHBOARD_PORT="8299", RAY_PORT="6390", RAY_NUM_CPUS="3", RAY_START_TIMEOUT="120",
        OPENCLAW_PROGRESS_INTERVAL="11", CKPT_ARGS="--save-interval 3 --save-dir {tmp}/ck2",
        ROLLOUT_ARGS="--rollout-batch-size 2 --n-samples-per-prompt 4", OPTIMIZER_ARGS="--lr 3e-6",
        LORA_ARGS="--use-lora --lora-rank 4", EXTRA_ARGS="--weight-decay 0.05", REWARD_ARGS="--judge-timeout 7"),
        expect=("--hf-checkpoint {model}", "MODEL_SIZE=4b", "import: ", "{tmp}/sessions.json",
                "--resume-from-checkpoint {tmp}/resume", "--prm-model-path {model}", "--majority-vote-n 5",
                "--majority-vote-threshold 0.7", "--num-judge-workers 2", "--host 0.0.0.0", "--port 8123",
                '"OPENCLAW_API_KEY": "***"', "--num-rollout 7", "--buffer-wait-timeout 33",
                '"OPENCLAW_PROMOTION_GATE": "0"', '"OPENCLAW_CONTROL_DIR": "{tmp}/ctl"', '"WANDB_API_KEY": "***"',
                "--wandb-project proj", "--wandb-group grp", "--wandb-mode offline", '"HF_TOKEN": "***"',
                "--dashboard-port 8299", "--port 6390", "--num-cpus 3", "RAY_START_TIMEOUT=120",
                "OPENCLAW_PROGRESS_INTERVAL=11", "--save-interval 3 --save-dir {tmp}/ck2",
                "--rollout-batch-size 2 --n-samples-per-prompt 4", "--lr 3e-6", "--lora-rank 4",
                "--weight-decay 0.05", "--judge-timeout 7", "would run server: {python} -m openclaw.server",
                "OPENCLAW_CALLER_DIR=", "plan (OPENCLAW_DRY_RUN=1", "--log-dir {tmp}/logs",
                "--rl-buffer-dir {tmp}/buf", '"RAY_AUTH_MODE": "disabled"')),
    Case(COMBINE, "works", dict(
        USE_LORA="true", LORA_RANK="8", LORA_ALPHA="24", LORA_DROPOUT="0.1", LEARNING_RATE="5e-7",
        CLIP_GRAD_NORM="0.5", PPO_CLIP_RATIO="0.1", BATCH_SIZE="8", GRAD_ACCUM_STEPS="4",
        USE_GRADIENT_CHECKPOINTING="true", VALUE_CLIP="false", OPENCLAW_DEBUG="true", ROLLOUT_LOG_LEVEL="info",
        MASTER_ADDR="localhost", MASTER_PORT="6000", NNODES="1", NODE_RANK="0", GPUS_PER_NODE="0",
        OPENCLAW_COMBINE_W_OPD="0.25", OPENCLAW_COMBINE_W_RL="2.0"),
        expect=("--use-lora", "--lora-rank 8", "--lora-alpha 24", "--lora-dropout 0.1", "--lr 5e-7", "--clip-grad 0.5",
                "--eps-clip 0.1", "--global-batch-size 8", "--micro-batch-size 2", "--gradient-checkpointing",
                "--log-level debug", "--log-level info", '"MASTER_ADDR": "localhost"', '"MASTER_PORT": "6000"',
                "--actor-num-nodes 1", "--openclaw-combine-w-opd 0.25", "--openclaw-combine-w-rl 2.0", "tiny-qwen3",
                "--save-dir {tmp}/ckpt")),
    Case(TOPK, "works", dict(OPD_TOPK="8"), expect=("--opd-topk 8",)),
    Case(RL, "works", dict(METHOD_ARGS="--extra-args-provider-path openclaw-rl/openclaw_rl_args.py "
                                       "--rollout-function-path openclaw-rl/openclaw_buffer_rollout.py:generate_rollout "
                                       "--advantage-estimator grpo --eps-clip 0.3"),
         expect=("--advantage-estimator grpo --eps-clip 0.3",)),
    Case(RL, "works", dict(OPENCLAW_SERVER_URL="http://127.0.0.1:9999"),
         expect=("--rollout-external-engine-addrs 127.0.0.1:9999",)),
    Case(RL, "works", dict(RAY_ADDRESS="http://10.0.0.1:8265", OPENCLAW_HOST="0.0.0.0", OPENCLAW_API_KEY=SECRET + "8"),
         expect=("ray: using the cluster at RAY_ADDRESS=http://10.0.0.1:8265",)),
    # the upstream scripts' GPU node, planned here (NUM_GPUS: a dry run for GPUs this machine lacks)
    Case(RL, "works", dict(MODEL_PATH="/models/Qwen3-4B", NUM_GPUS="8", ACTOR_GPUS="4", ROLLOUT_GPUS="2", PRM_GPUS="2",
                           PRM_MODEL_PATH="/models/Qwen3-4B", MODEL_PRESET="qwen3-4b", REF_LOAD="{model}",
                           PRM_TEMPERATURE="0.5", PRM_MAX_NEW_TOKENS="256", SERVED_MODEL_NAME="q4", TP="2",
                           CONTEXT_LENGTH="16384", MEM_FRACTION_STATIC="0.8", REASONING_PARSER="qwen3",
                           TOOL_CALL_PARSER="qwen25"),
         expect=(": GPUs 0,1,2,3", ": GPUs 4,5", ": GPUs 6,7", "--ref-load {model}", "--judge-temperature 0.5",
                 "--judge-max-tokens 256", "--served-model-name q4", "--tp-size 2", "--context-length 16384",
                 "--mem-fraction-static 0.8", "--reasoning-parser qwen3", "--tool-call-parser qwen25",
                 "model preset qwen3-4b", '"CUDA_VISIBLE_DEVICES": "6,7"')),
    Case(TERMINAL, "works", dict(
        ENV_TYPE="terminal", MAX_STEPS="3", PARALLEL_ENVS="5", SANDBOX="none", HF_HUB_OFFLINE="1", PRM_STEP_COEF="0.2",
        TASKS_PATH="{repo}/terminal-rl/tasks", TASK_TYPE="bash_commands", DATA_PATH="{tmp}/t.jsonl"),
        expect=("--max-steps 3", "--parallel-envs 5", "--sandbox none", '"HF_HUB_OFFLINE": "1"', "--prm-step-coef 0.2",
                "--terminal-tasks {repo}/terminal-rl/tasks", "--prompt-data {tmp}/t.jsonl")),
    Case(TOOLCALL, "works", dict(
        ENV_TYPE="toolcall", TOOLS_CONFIG="{repo}/toolcall-rl/tools_config.json", DATA_DIR="{tmp}/data",
        TRAIN_SIZE="16", EVAL_LIMIT="3", EVAL_INTERVAL="5", TOOL_USE_BONUS="0.3"),
        expect=("--tools-config {repo}/toolcall-rl/tools_config.json", "--prompt-data {tmp}/data/train.jsonl",
                "--train-size 16", "--eval-limit 3", "--eval-interval 5", "--tool-use-bonus 0.3")),
    Case(SWE, "works", dict(ENV_TYPE="swe", SWE_BENCH_PATH="{tmp}/swe.jsonl", SWE_BENCH_REPOS="{tmp}/repos",
                            OPENCLAW_SWE_CACHE="{tmp}/cache", DATA_PATH="{tmp}/s.jsonl"),
         expect=("--swe-bench-path {tmp}/swe.jsonl", '"SWE_BENCH_REPOS": "{tmp}/repos"',
                 '"OPENCLAW_SWE_CACHE": "{tmp}/cache"')),
    Case(GUI, "works", dict(ENV_TYPE="gui", SCREENSHOT_BACKEND="selenium", DATA_PATH="{tmp}/g.jsonl"),
         expect=("--screenshot-backend selenium",)),
    Case(RL, "works", args=("--config", "{tmp}/c.yaml"), config="training:\n  max_steps: 9\n",
         expect=("--num-rollout 9",), covers=("--config",)),
    Case(RL, "works", args=("--backend", "hf"), expect=("--backend hf",), covers=("--backend",)),
    Case("openclaw-combine/run_combine_training.sh", "works", args=("--lora",), expect=("--lora-rank 64",),
         covers=("--lora",)),
    # ---- aliases ------------------------------------------------------------------------------------
    Case(RL, "alias", dict(BASE_MODEL_PATH="{model}", JUDGE_MODEL_PATH="{model}", WANDB_KEY=SECRET + "4",
                           RAY_GCS_PORT="6391"),
         expect=("MODEL_PATH={model} (from BASE_MODEL_PATH)", "--hf-checkpoint {model}", "--prm-model-path {model}",
                 "WANDB_API_KEY=*** (from WANDB_KEY)", '"WANDB_API_KEY": "***"', "--port 6391")),
    Case(RL, "alias", dict(HF_CKPT="{model}", SAVE_CKPT="{tmp}/ck3", CKPT_SAVE_DIR="", SGLANG_API_KEY=SECRET + "9",
                           PRM_M="4"),
         expect=("MODEL_PATH={model} (from HF_CKPT)", "CKPT_SAVE_DIR={tmp}/ck3 (from SAVE_CKPT)",
                 "OPENCLAW_API_KEY=*** (from SGLANG_API_KEY)", "--majority-vote-n 4", "--save-dir {tmp}/ck3")),
    Case(RL, "alias", dict(CKPT_PATH="{model}", DRY_RUN="1", OPENCLAW_DRY_RUN=""),
         expect=("MODEL_PATH={model} (from CKPT_PATH)", "OPENCLAW_DRY_RUN=1 (from DRY_RUN)")),
    Case(RL, "alias", args=("--model-path", "{model}", "--rl-buffer-dir", "{tmp}/b2", "--log-dir", "{tmp}/l2",
                            "--num-rollout", "4", "--resume-from-checkpoint", "{tmp}/resume", "--host", "0.0.0.0",
                            "--port", "8124"),
         expect=("MODEL_PATH={model} (from --model-path)", "--rl-buffer-dir {tmp}/b2", "--log-dir {tmp}/l2",
                 "--num-rollout 4", "--resume-from-checkpoint {tmp}/resume", "--host 0.0.0.0", "--port 8124",
                 "--rollout-external-engine-addrs 127.0.0.1:8124"),
         covers=("--model-path", "--rl-buffer-dir", "--log-dir", "--num-rollout", "--resume-from-checkpoint",
                 "--host", "--port")),
    Case(RL, "alias", args=("--hf-checkpoint", "{model}"), expect=("MODEL_PATH={model} (from --hf-checkpoint)",),
         covers=("--hf-checkpoint",)),
    Case(RL, "alias", args=("--config", "{tmp}/c.yaml"), config="model:\n  checkpoint_path: {model}\n",
         expect=("MODEL_PATH={model} (from model.checkpoint_path in --config", "--hf-checkpoint {model}"),
         covers=("model.checkpoint_path",)),
    Case(RL, "alias", args=("--config", "{tmp}/c.yaml"), config="training:\n  max_steps: 5\n",
         expect=("NUM_ROLLOUT=5 (from training.max_steps in --config", "--num-rollout 5"),
         covers=("training.max_steps",)),
    # ---- refused --------------------------------------------------------------------------------------
    Case(RL, "refused", dict(TOKENIZER_PATH="{model}"), expect=("MODEL_PATH's folder",)),
    Case(RL, "refused", dict(TINKER_ENDPOINT="http://tinker.example"), expect=("deploy_to_tinker.sh",)),
    Case(RL, "refused", dict(TINKER_API_KEY=SECRET + "5"), expect=("deploy_to_tinker.sh",)),
    Case(RL, "refused", dict(TINKER_PROJECT_ID="p1"), expect=("deploy_to_tinker.sh",)),
    Case(RL, "refused", args=("--api-key", SECRET + "6"), expect=("OPENCLAW_API_KEY",), covers=("--api-key",)),
    Case(RL, "refused", args=("--wandb-key", SECRET + "7"), expect=("WANDB_API_KEY",), covers=("--wandb-key",)),
    Case(TERMINAL, "refused", dict(EXTRA_ARGS="--wandb-key x", DATA_PATH="{tmp}/t.jsonl"), expect=("--wandb-key",)),
    Case(RL, "refused", args=("--config", "{tmp}/c.yaml"), config="wandb_key: x\n", expect=("--wandb-key", "wandb_key")),
    Case(RL, "refused", args=("--rollout-backend", "embedded"), expect=("OPENCLAW_SERVER_URL",),
         covers=("--rollout-backend",)),
    Case(RL, "refused", args=("--rollout-external-engine-addrs", "127.0.0.1:1"), expect=("OPENCLAW_SERVER_URL",),
         covers=("--rollout-external-engine-addrs",)),
    Case(RL, "refused", args=("--rollout-num-engines", "2"), expect=("starts no engines",),
         covers=("--rollout-num-engines",)),
    # the table's conditional refusals
    Case(RL, "refused", dict(VALUE_CLIP="true"), expect=("critic-free",)),
    Case(RL, "refused", dict(NNODES="2"), expect=("ray start --head",)),
    Case(RL, "refused", dict(NODE_RANK="1"), expect=("only node 0",)),
    Case(RL, "refused", dict(GPUS_PER_NODE="99"), expect=("GPU(s)",)),
    Case(RL, "refused", dict(RAY_ADDRESS="http://10.0.0.1:8265"), expect=("set OPENCLAW_HOST=0.0.0.0",)),
    Case(RL, "refused", dict(NUM_GPUS="8", ACTOR_GPUS="6", ROLLOUT_GPUS="4"),
         expect=("= 10 GPUs, but there are 8",)),
    Case(TERMINAL, "refused", dict(TASK_TYPE="gui", DATA_PATH="{tmp}/t.jsonl"), expect=("bash_commands",)),
    Case(RL, "refused", args=("--backend", "vllm"), expect=("weight",), covers=("--backend",)),
    Case(RL, "refused", dict(MODEL_PATH="{tmp}/missing"), expect=("does not exist",)),
    Case(RL, "refused", dict(RESUME_CKPT="{tmp}/missing"), expect=("does not exist",)),
    Case(RL, "refused", dict(JUDGE_MODEL_PATH="{tmp}/missing"), expect=("does not exist",)),
)
# GPU names on a machine with two GPUs and with none (nvidia-smi stands in for the driver's tool)
GPU_CASES = (Case(RL, "works", dict(TRAIN_GPUS="0", ROLLOUT_GPUS="1", MODEL_PATH="{model}"), gpus=2,
                  expect=('"CUDA_VISIBLE_DEVICES": "0"', '"CUDA_VISIBLE_DEVICES": "1"', "--backend sglang")),
             Case(RL, "works", dict(MODEL_PATH="{model}"), args=("--backend", "hf"), gpus=2,
                  expect=("--backend hf",), covers=("--backend",)),
             Case(RL, "refused", dict(TRAIN_GPUS="0,1"), gpus=0, expect=("there are none here",)),
             Case(RL, "refused", dict(ROLLOUT_GPUS="2,3"), gpus=0, expect=("there are none here",)),
             Case(RL, "refused", args=("--backend", "sglang"), gpus=0, expect=("--engine-url",), covers=("--backend",)))

# --config keys: the launcher's rows and the trainer's own table, in files.
_COMBINE_KEYS = """\
model:
  name: qwen3-4b
training:
  method: combine
  batch_size: 4
  gradient_accumulation_steps: 2
  learning_rate: 2e-6
  warmup_steps: 3
  ppo_clip_ratio: 0.15
  binary_weight: 0.4
  opd_weight: 0.6
rollout:
  session_aware: true
"""
KEY_CASES = (
    Case(COMBINE, "works", args=("--config", "{tmp}/c.yaml"), config=_COMBINE_KEYS,
         expect=("--served-model-name qwen3-4b", "--rollout-batch-size 4", "--micro-batch-size 2", "--lr 2e-06",
                 "--lr-warmup-iters 3", "--eps-clip 0.15", "--openclaw-combine-w-rl 0.4", "--openclaw-combine-w-opd 0.6",
                 "training.method=combine -> checked", "rollout.session_aware=true -> checked"),
         covers=("model.name", "training.method", "training.batch_size", "training.gradient_accumulation_steps",
                 "training.learning_rate", "training.warmup_steps", "training.ppo_clip_ratio", "training.binary_weight",
                 "training.opd_weight", "rollout.session_aware")),
    Case(TERMINAL, "works", dict(DATA_PATH="{tmp}/t.jsonl"), args=("--config", "{tmp}/c.yaml"),
         config="rollout:\n  parallel_envs: 3\n  num_workers: 2\n",
         expect=("--parallel-envs 3", "--rollout-num-engines 2"),
         covers=("rollout.parallel_envs", "rollout.num_workers")),
    Case(TOOLCALL, "works", args=("--config", "{tmp}/c.yaml"), config="evaluation:\n  eval_frequency: 4\n",
         expect=("--eval-interval 4",), covers=("evaluation.eval_frequency",)),
    Case(TERMINAL, "refused", dict(DATA_PATH="{tmp}/t.jsonl"), args=("--config", "{tmp}/c.yaml"),
         config="evaluation:\n  eval_frequency: 4\n", expect=("evaluation.eval_frequency", "run_*_agent.sh"),
         covers=("evaluation.eval_frequency",)),
    Case(RL, "works", args=("--config", "{tmp}/c.yaml"), config="model:\n  checkpoint_path: {model}\n  "
         "tokenizer_path: {model}\n", expect=("--hf-checkpoint {model}",), covers=("model.tokenizer_path",)),
    Case(TERMINAL, "refused", dict(DATA_PATH="{tmp}/t.jsonl"), args=("--config", "{tmp}/c.yaml"),
         config="model:\n  name: x\n", expect=("model.name",), covers=("model.name",)),
    Case(COMBINE, "refused", args=("--config", "{tmp}/c.yaml"), config="rollout:\n  num_workers: 2\n",
         expect=("rollout.num_workers",), covers=("rollout.num_workers",)),
    Case(COMBINE, "refused", args=("--config", "{tmp}/c.yaml"), config="evaluation:\n  eval_frequency: 2\n",
         expect=("evaluation.eval_frequency",), covers=("evaluation.eval_frequency",)),
    Case(COMBINE, "refused", args=("--config", "{tmp}/c.yaml"), config="training:\n  gradient_accumulation_steps: 2\n",
         expect=("training.gradient_accumulation_steps", "training.batch_size"),
         covers=("training.gradient_accumulation_steps",)),
    *(Case(COMBINE, "refused", args=("--config", "{tmp}/c.yaml"), config=f"{section}:\n  {key}: 1\n",
           expect=(f"{section}.{key}",), covers=(f"{section}.{key}",))
      for section, key in _PAGE_REFUSED),
)
ALL_CASES = (*CASES, *KEY_CASES, *GPU_CASES)


def _fill(text: str, tmp: Path, model: Path) -> str:
    return (text.replace("{model}", str(model)).replace("{tmp}", str(tmp)).replace("{repo}", str(REPO))
            .replace("{python}", sys.executable))


def _nvidia_smi(tmp: Path, gpus: int) -> Path:
    """A folder with a stand-in for the driver's tool, listing `gpus` GPUs."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "nvidia-smi"
    fake.write_text("#!/bin/sh\n" + "".join(f"echo 'GPU {i}: H100 (UUID: GPU-{i})'\n" for i in range(gpus)))
    fake.chmod(0o755)
    return bin_dir


def _run(case: Case, tmp: Path, model: Path) -> subprocess.CompletedProcess:
    (tmp / "sessions.json").write_text("[]")
    (tmp / "resume").mkdir(exist_ok=True)
    (tmp / "swe.jsonl").write_text("")
    if case.config is not None:
        (tmp / "c.yaml").write_text(_fill(case.config, tmp, model))
    env = {k: v for k, v in os.environ.items() if k not in ENV}  # the table's names: only what the case sets
    env.update(OPENCLAW_DRY_RUN="1", LOG_DIR=str(tmp / "logs"), RL_BUFFER_DIR=str(tmp / "buf"),
               CKPT_SAVE_DIR=str(tmp / "ckpt"), CPU_PRESET_MODEL="tiny", RAY_AUTH_MODE="disabled",
               PYTHON=sys.executable)
    env.update({k: _fill(v, tmp, model) for k, v in case.env.items()})
    env["PATH"] = f"{_nvidia_smi(tmp, case.gpus)}:{env['PATH']}"
    return subprocess.run(["bash", case.script, *(_fill(a, tmp, model) for a in case.args)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.id for c in ALL_CASES])
def test_each_name_works_aliases_or_is_refused(case: Case, tmp_path: Path, tiny_model_path: Path) -> None:
    out = _run(case, tmp_path, tiny_model_path)
    both = out.stdout + out.stderr
    for name, value in case.env.items():
        if name in SECRETS and value:
            assert value not in both, f"{name}'s value was printed"
    if case.mode == "refused":
        assert out.returncode != 0, f"accepted instead of refused:\n{out.stdout[-3000:]}"
        assert "Traceback" not in both and "would run" not in out.stdout, both[-3000:]
        for name in (*case.covers, *case.env):
            if name not in ("DATA_PATH",):
                assert name in out.stderr, (name, out.stderr)
        for text in case.expect:
            assert _fill(text, tmp_path, tiny_model_path) in out.stderr, (text, out.stderr)
        return
    assert out.returncode == 0, both[-4000:]
    env_line = next((ln for ln in out.stdout.splitlines() if ln.startswith("env: ")), "")
    for name, value in case.env.items():
        row = ENV[name]
        if not value or row.alias_of:
            continue
        shown = "***" if name in SECRETS else _fill(value, tmp_path, tiny_model_path)
        assert f"{name}={shown}" in env_line, (name, env_line)
    for text in case.expect:
        assert _fill(text, tmp_path, tiny_model_path) in out.stdout, (text, out.stdout[-4000:])


def _rows_covered() -> set[tuple[str, str, str]]:
    """(kind, name, mode) of every row the cases walk."""
    covered = set()
    for case in ALL_CASES:
        for name in case.env:
            covered.add(("env", name, case.mode))
        for name in case.covers:
            kind = "flag" if name.startswith("--") else "key"
            covered.add((kind, name, case.mode))
    return covered


def test_the_cases_cover_every_row_of_the_table() -> None:
    covered = _rows_covered()
    missing = []
    for row in NAMES:
        if row.kind == "script" or row.name in HARNESS or row.name == "OPENCLAW_CALLER_DIR":
            continue  # scripts: the next test; the harness's and the scripts' own variables: every case
        mode = "alias" if row.alias_of else "refused" if row.refused else "works"
        if (row.kind, row.name, mode) not in covered:
            missing.append((row.kind, row.name, mode))
    trainer_keys = [f"{s}.{k}" for s, k in (*_PAGE_KEYS, *_PAGE_REFUSED)]
    missing += [("key", k, "any") for k in trainer_keys if not any(c[1] == k for c in covered)]
    assert not missing, missing


SCRIPTS = [n for n in NAMES if n.kind == "script"]


def test_every_run_script_is_in_the_table() -> None:
    on_disk = {str(p.relative_to(REPO)) for p in REPO.glob("*/run_*.sh") if p.parent.name != "openclaw-tinker"}
    assert on_disk == {n.name for n in SCRIPTS}  # openclaw-tinker's run the Tinker deploy script, not the launcher


@pytest.mark.parametrize("row", SCRIPTS, ids=[n.name for n in SCRIPTS])
def test_each_script_runs_its_recipe_or_says_it_evaluates(row, tmp_path: Path) -> None:  # noqa: ANN001
    env = {k: v for k, v in os.environ.items() if k not in ENV}
    env.update(OPENCLAW_DRY_RUN="1", LOG_DIR=str(tmp_path / "logs"), RL_BUFFER_DIR=str(tmp_path / "buf"),
               CKPT_SAVE_DIR=str(tmp_path / "ckpt"), CPU_PRESET_MODEL="tiny", PYTHON=sys.executable,
               DATA_PATH=str(tmp_path / "train.jsonl"), DATA_DIR=str(tmp_path / "data"),
               PATH=f"{_nvidia_smi(tmp_path, 0)}:{os.environ['PATH']}")
    if row.recipe is None:  # an evaluation script: its first line says so and names the training script
        out = subprocess.run(["bash", row.name, "--help"], cwd=REPO, env=env, capture_output=True, text=True,
                             timeout=120)
        first = (out.stderr.splitlines() or [""])[0]
        if row.name == "openclaw-test/run_eval.sh":
            assert out.returncode == 0 and "--eval-tasks" in out.stdout  # evaluation only, by its own help
            return
        assert "evaluates" in first and "does not train" in first and row.trains in first, first
        return
    if row.recipe.startswith("openclaw-"):
        del env["DATA_PATH"]  # live scripts import DATA_PATH's sessions: they must exist
    out = subprocess.run(["bash", row.name], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"{row.recipe}: plan (OPENCLAW_DRY_RUN=1" in out.stdout
    if "lora" in row.name:
        assert "--use-lora" in out.stdout


def test_the_readme_table_is_the_modules() -> None:
    readme = (REPO / "openclaw" / "launch" / "README.md").read_text()
    assert markdown_table() in readme, "regenerate: python -c 'from openclaw.launch.names import markdown_table; " \
                                       "print(markdown_table())'"


def test_the_launcher_reads_only_names_of_the_table() -> None:
    """Every `get("NAME")` of the launcher's code is a row (Settings.get refuses others at run time too)."""
    read = set()
    for path in (REPO / "openclaw" / "launch").glob("*.py"):
        read |= set(re.findall(r"""\bget\(["']([A-Z][A-Z0-9_]+)["']""", path.read_text()))
    assert read and read <= set(ENV), sorted(read - set(ENV))
