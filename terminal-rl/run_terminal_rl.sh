#!/usr/bin/env bash
# Terminal-agent RL: the policy runs shell commands in a bubblewrap sandbox; reward = fraction of
# the task's tests passed (+ PRM_STEP_COEF * per-step score). Submits slime/train.py as a Ray job.
#
#   ENV_TYPE=terminal MAX_STEPS=20 PARALLEL_ENVS=32 bash terminal-rl/run_terminal_rl.sh
#
# Extra command-line arguments are passed to slime/train.py. Every setting is an environment
# variable with a default (see terminal-rl/README.md). With no GPU
# and no MODEL_PATH, the embedded CPU preset runs (SmolLM2-135M-Instruct or a tiny model,
# embedded engine, LoRA).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
cd "$REPO_ROOT"

export RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
PYTHON="${PYTHON:-python}"
ENV_TYPE="${ENV_TYPE:-terminal}"
SANDBOX="${SANDBOX:-bwrap}"
PRM_STEP_COEF="${PRM_STEP_COEF:-0}"
TASKS_PATH="${TASKS_PATH:-terminal-rl/tasks}"
DATA_PATH="${DATA_PATH:-terminal-rl/data/train.jsonl}"
CKPT_SAVE_DIR="${CKPT_SAVE_DIR:-./checkpoints/terminal-rl}"
LOG_DIR="${LOG_DIR:-./logs}"
RAY_PORT="${RAY_PORT:-6390}"
RAY_DASHBOARD_PORT="${RAY_DASHBOARD_PORT:-8265}"
RAY_START_TIMEOUT="${RAY_START_TIMEOUT:-120}"
EXTRA_ARGS="${EXTRA_ARGS:-}"
DRY_RUN="${DRY_RUN:-${OPENCLAW_DRY_RUN:-0}}"  # print the train command and exit
RESUME_CKPT="${RESUME_CKPT:-}"
TRAIN_GPUS="${TRAIN_GPUS:-}"
ROLLOUT_GPUS="${ROLLOUT_GPUS:-}"

if [ "$ENV_TYPE" != "terminal" ]; then
  echo "error: ENV_TYPE=$ENV_TYPE, but this script trains ENV_TYPE=terminal" >&2
  exit 2
fi

has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; }

if [ -z "${MODEL_PATH:-}" ] && ! has_gpu; then
  CPU_PRESET_MODEL="${CPU_PRESET_MODEL:-smollm2}"
  case "$CPU_PRESET_MODEL" in
    smollm2) MODEL_PATH="$("$PYTHON" -m openclaw.models path)" ;;
    tiny) MODEL_PATH="$("$PYTHON" -m openclaw.models tiny)" ;;
    *) echo "error: CPU_PRESET_MODEL must be smollm2 or tiny, got $CPU_PRESET_MODEL" >&2; exit 2 ;;
  esac
  MAX_STEPS="${MAX_STEPS:-4}"
  PARALLEL_ENVS="${PARALLEL_ENVS:-4}"
  NUM_ROLLOUT="${NUM_ROLLOUT:-2}"
  ROLLOUT_ARGS="${ROLLOUT_ARGS:---rollout-backend embedded --rollout-batch-size 2 --n-samples-per-prompt 2 --rollout-max-response-len 48 --rollout-max-context-len 2048}"
  OPTIMIZER_ARGS="${OPTIMIZER_ARGS:---lr 1e-4 --weight-decay 0.0}"
  LORA_ARGS="${LORA_ARGS:---use-lora --lora-rank 8 --lora-alpha 16 --lora-target-modules q_proj k_proj v_proj o_proj}"
  RAY_NUM_CPUS="${RAY_NUM_CPUS:-2}"
  cat >&2 <<BANNER
=====================================================================
 terminal-rl: no GPU and no MODEL_PATH -> EMBEDDED CPU PRESET
   model    $MODEL_PATH ($CPU_PRESET_MODEL)
   engine   embedded (transformers on CPU), LoRA training, fp32
   episodes MAX_STEPS=$MAX_STEPS PARALLEL_ENVS=$PARALLEL_ENVS NUM_ROLLOUT=$NUM_ROLLOUT
 A smoke-scale run: set MODEL_PATH (and use a GPU) for real training.
=====================================================================
BANNER
elif [ -z "${MODEL_PATH:-}" ]; then
  echo "error: set MODEL_PATH to the policy's HF folder (e.g. /path/to/qwen3-7b)" >&2
  exit 2
fi

MAX_STEPS="${MAX_STEPS:-20}"
PARALLEL_ENVS="${PARALLEL_ENVS:-32}"
NUM_ROLLOUT="${NUM_ROLLOUT:-200}"
ROLLOUT_ARGS="${ROLLOUT_ARGS:---rollout-batch-size 32 --n-samples-per-prompt 8 --rollout-max-response-len 1024 --rollout-max-context-len 16384}"
OPTIMIZER_ARGS="${OPTIMIZER_ARGS:---lr 1e-6 --weight-decay 0.01 --adam-beta1 0.9 --adam-beta2 0.98}"
LORA_ARGS="${LORA_ARGS:-}"
CKPT_ARGS="${CKPT_ARGS:---save-interval 50}"
RAY_NUM_CPUS="${RAY_NUM_CPUS:-}"

# shellcheck source=scripts/lib/ray_job.sh
source scripts/lib/ray_job.sh
CKPT_SAVE_DIR="$(abspath "$CKPT_SAVE_DIR")"
LOG_DIR="$(abspath "$LOG_DIR")"
DATA_PATH="$(abspath "$DATA_PATH")"

if [ ! -f "$DATA_PATH" ]; then
  "$PYTHON" terminal-rl/prepare_data.py --tasks "$TASKS_PATH" --out "$DATA_PATH"
fi

split_common_args

TRAIN_CMD=(
  python slime/train.py
  --hf-checkpoint "$MODEL_PATH"
  --prompt-data "$DATA_PATH" --input-key input --label-key label --metadata-key metadata
  --custom-generate-function-path terminal-rl/terminal_generate.py
  --extra-args-provider-path terminal-rl/terminal_generate.py
  --max-steps "$MAX_STEPS" --parallel-envs "$PARALLEL_ENVS" --prm-step-coef "$PRM_STEP_COEF"
  --sandbox "$SANDBOX" --terminal-tasks "$(abspath "$TASKS_PATH")"
  --num-rollout "$NUM_ROLLOUT"
  --save "$CKPT_SAVE_DIR" --log-dir "$LOG_DIR"
  "${ROLLOUT_ARR[@]}" "${OPTIMIZER_ARR[@]}" "${LORA_ARR[@]}" "${CKPT_ARR[@]}" "${CLUSTER_ARR[@]}"
  "${EXTRA_ARR[@]}" "$@"
)
RUNTIME_ENV="{\"env_vars\": {\"PYTHONPATH\": \"terminal-rl\", \"RAY_AUTH_MODE\": \"$RAY_AUTH_MODE\", \"HF_HUB_OFFLINE\": \"$HF_HUB_OFFLINE\", \"MAX_STEPS\": \"$MAX_STEPS\", \"PARALLEL_ENVS\": \"$PARALLEL_ENVS\", \"OPENCLAW_SANDBOX\": \"$SANDBOX\"}}"

submit_job "$RUNTIME_ENV" "${TRAIN_CMD[@]}"
