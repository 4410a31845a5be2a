#!/usr/bin/env bash
# Tool-call RL (ReTool-style math): the policy calls a sandboxed Python interpreter and a
# calculator; reward = answer correctness (+ TOOL_USE_BONUS). Submits slime/train.py as a Ray job.
#
#   ENV_TYPE=toolcall TOOLS_CONFIG=./toolcall-rl/tools_config.json PARALLEL_ENVS=64 bash toolcall-rl/run_toolcall_rl.sh
#
# Extra command-line arguments are passed to slime/train.py. Every setting is an environment
# variable with a default (see toolcall-rl/README.md). With no GPU
# and no MODEL_PATH, the embedded CPU preset runs (SmolLM2-135M-Instruct or a tiny model,
# embedded engine, LoRA).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
cd "$REPO_ROOT"

export RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
PYTHON="${PYTHON:-python}"
ENV_TYPE="${ENV_TYPE:-toolcall}"
SANDBOX="${SANDBOX:-bwrap}"
TOOLS_CONFIG="${TOOLS_CONFIG:-toolcall-rl/tools_config.json}"
TOOL_USE_BONUS="${TOOL_USE_BONUS:-0.1}"
TRAIN_SIZE="${TRAIN_SIZE:-512}"
DATA_DIR="${DATA_DIR:-toolcall-rl/data}"
EVAL_INTERVAL="${EVAL_INTERVAL:-20}"
CKPT_SAVE_DIR="${CKPT_SAVE_DIR:-./checkpoints/toolcall-rl}"
LOG_DIR="${LOG_DIR:-./logs}"
RAY_PORT="${RAY_PORT:-6390}"
RAY_DASHBOARD_PORT="${RAY_DASHBOARD_PORT:-8265}"
RAY_START_TIMEOUT="${RAY_START_TIMEOUT:-120}"
EXTRA_ARGS="${EXTRA_ARGS:-}"
DRY_RUN="${DRY_RUN:-${OPENCLAW_DRY_RUN:-0}}"  # print the train command and exit
RESUME_CKPT="${RESUME_CKPT:-}"
TRAIN_GPUS="${TRAIN_GPUS:-}"
ROLLOUT_GPUS="${ROLLOUT_GPUS:-}"

if [ "$ENV_TYPE" != "toolcall" ]; then
  echo "error: ENV_TYPE=$ENV_TYPE, but this script trains ENV_TYPE=toolcall" >&2
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
  MAX_STEPS="${MAX_STEPS:-3}"
  PARALLEL_ENVS="${PARALLEL_ENVS:-4}"
  EVAL_LIMIT="${EVAL_LIMIT:-8}"
  NUM_ROLLOUT="${NUM_ROLLOUT:-2}"
  ROLLOUT_ARGS="${ROLLOUT_ARGS:---rollout-backend embedded --rollout-batch-size 2 --n-samples-per-prompt 2 --rollout-max-response-len 48 --rollout-max-context-len 2048}"
  OPTIMIZER_ARGS="${OPTIMIZER_ARGS:---lr 1e-4 --weight-decay 0.0}"
  LORA_ARGS="${LORA_ARGS:---use-lora --lora-rank 8 --lora-alpha 16 --lora-target-modules q_proj k_proj v_proj o_proj}"
  RAY_NUM_CPUS="${RAY_NUM_CPUS:-2}"
  cat >&2 <<BANNER
=====================================================================
 toolcall-rl: no GPU and no MODEL_PATH -> EMBEDDED CPU PRESET
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

MAX_STEPS="${MAX_STEPS:-8}"
PARALLEL_ENVS="${PARALLEL_ENVS:-64}"
EVAL_LIMIT="${EVAL_LIMIT:-200}"
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
DATA_DIR="$(abspath "$DATA_DIR")"
TOOLS_CONFIG="$(abspath "$TOOLS_CONFIG")"
if [ ! -f "$TOOLS_CONFIG" ]; then
  echo "error: TOOLS_CONFIG=$TOOLS_CONFIG does not exist" >&2
  exit 2
fi

# Training problems are generated here; evaluation is GSM8K test (../shared/data, or GSM8K_PATH).
if [ ! -f "$DATA_DIR/train.jsonl" ] || [ ! -f "$DATA_DIR/eval.jsonl" ]; then
  "$PYTHON" toolcall-rl/prepare_data.py --train-size "$TRAIN_SIZE" --eval-limit "$EVAL_LIMIT" --out-dir "$DATA_DIR"
fi

split_common_args

TRAIN_CMD=(
  python slime/train.py
  --hf-checkpoint "$MODEL_PATH"
  --prompt-data "$DATA_DIR/train.jsonl" --input-key input --label-key label --metadata-key metadata
  --eval-prompt-data gsm8k "$DATA_DIR/eval.jsonl" --eval-interval "$EVAL_INTERVAL"
  --custom-generate-function-path toolcall-rl/toolcall_generate.py
  --extra-args-provider-path toolcall-rl/toolcall_generate.py
  --tools-config "$TOOLS_CONFIG" --tool-use-bonus "$TOOL_USE_BONUS"
  --max-steps "$MAX_STEPS" --parallel-envs "$PARALLEL_ENVS" --sandbox "$SANDBOX"
  --num-rollout "$NUM_ROLLOUT"
  --save "$CKPT_SAVE_DIR" --log-dir "$LOG_DIR"
  "${ROLLOUT_ARR[@]}" "${OPTIMIZER_ARR[@]}" "${LORA_ARR[@]}" "${CKPT_ARR[@]}" "${CLUSTER_ARR[@]}"
  "${EXTRA_ARR[@]}" "$@"
)
RUNTIME_ENV="{\"env_vars\": {\"PYTHONPATH\": \"toolcall-rl\", \"RAY_AUTH_MODE\": \"$RAY_AUTH_MODE\", \"HF_HUB_OFFLINE\": \"$HF_HUB_OFFLINE\", \"MAX_STEPS\": \"$MAX_STEPS\", \"TOOLS_CONFIG\": \"$TOOLS_CONFIG\", \"PARALLEL_ENVS\": \"$PARALLEL_ENVS\", \"OPENCLAW_SANDBOX\": \"$SANDBOX\"}}"

submit_job "$RUNTIME_ENV" "${TRAIN_CMD[@]}"
