#!/usr/bin/env bash
# Shared launcher of the personal-agent methods (openclaw-rl, openclaw-opd, openclaw-combine).
# Sourced by the run_*.sh scripts after they set METHOD_NAME and METHOD_ARGS; not run directly.
#
# What it does, in order:
#   1. settings: every one an env var with a default (names as in the reference);
#   2. preset: no GPU and no MODEL_PATH -> the embedded CPU preset (SmolLM2-135M, embedded engine,
#      CPU judge, LoRA), announced by a banner; GPUs -> SGLang on ROLLOUT_GPUS, training on TRAIN_GPUS;
#   3. starts the OpenAI-compatible server with the RL intercept and the judge workers (unless
#      OPENCLAW_SERVER_URL points at one already running), imports DATA_PATH session files;
#   4. starts a Ray head only when RAY_ADDRESS is unset (stopped on exit through the PID of the
#      `ray start --block` that created it), and submits the trainer with `ray job submit --working-dir .`;
#   5. on exit stops exactly what it started, by PID. Never pkill, never `ray stop`.
# OPENCLAW_DRY_RUN=1 prints the commands instead of running them.

set -euo pipefail

: "${METHOD_NAME:?set by the run_*.sh script}"
: "${METHOD_ARGS:?set by the run_*.sh script}"

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${REPO_ROOT}"
PYTHON=${PYTHON:-python}

# ---- 1. settings ---------------------------------------------------------------------------
MODEL_SIZE=${MODEL_SIZE:-7b}
MODEL_PATH=${MODEL_PATH:-}
DATA_PATH=${DATA_PATH:-}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./checkpoints/${METHOD_NAME}}
RESUME_CKPT=${RESUME_CKPT:-}
TRAIN_GPUS=${TRAIN_GPUS:-}
ROLLOUT_GPUS=${ROLLOUT_GPUS:-}
PRM_MODEL_PATH=${PRM_MODEL_PATH:-}
JUDGE_MODEL_PATH=${JUDGE_MODEL_PATH:-}
MAJORITY_VOTE_N=${MAJORITY_VOTE_N:-1}
MAJORITY_VOTE_THRESHOLD=${MAJORITY_VOTE_THRESHOLD:-0.5}
NUM_JUDGE_WORKERS=${NUM_JUDGE_WORKERS:-1}
OPENCLAW_HOST=${OPENCLAW_HOST:-127.0.0.1}
OPENCLAW_PORT=${OPENCLAW_PORT:-8000}
OPENCLAW_API_KEY=${OPENCLAW_API_KEY:-}
OPENCLAW_SERVER_URL=${OPENCLAW_SERVER_URL:-}
RL_BUFFER_DIR=${RL_BUFFER_DIR:-./rl_buffer}
NUM_ROLLOUT=${NUM_ROLLOUT:-1000000}
BUFFER_WAIT_TIMEOUT=${BUFFER_WAIT_TIMEOUT:-}
LOG_DIR=${LOG_DIR:-./logs}
WANDB_PROJECT=${WANDB_PROJECT:-}
WANDB_GROUP=${WANDB_GROUP:-}
WANDB_KEY=${WANDB_KEY:-${WANDB_API_KEY:-}}
WANDB_MODE=${WANDB_MODE:-}
OPENCLAW_DRY_RUN=${OPENCLAW_DRY_RUN:-0}
RAY_DASHBOARD_PORT=${RAY_DASHBOARD_PORT:-8265}
export RAY_AUTH_MODE=${RAY_AUTH_MODE:-disabled}

abspath() { "${PYTHON}" -c 'import os, sys; print(os.path.abspath(sys.argv[1]))' "$1"; }
RL_BUFFER_DIR=$(abspath "${RL_BUFFER_DIR}")
CKPT_SAVE_DIR=$(abspath "${CKPT_SAVE_DIR}")
LOG_DIR=$(abspath "${LOG_DIR}")

NUM_GPUS=0
if command -v nvidia-smi >/dev/null 2>&1; then
  NUM_GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi

# ---- 2. preset -------------------------------------------------------------------------------
if [[ "${NUM_GPUS}" -eq 0 ]]; then
  if [[ -z "${MODEL_PATH}" ]]; then
    MODEL_PATH=$("${PYTHON}" -m openclaw.models path)
    cat <<EOF
==============================================================================
 ${METHOD_NAME}: no GPU and no MODEL_PATH -> embedded CPU preset
   model   : SmolLM2-135M-Instruct (${MODEL_PATH})
   serving : embedded transformers engine (python -m openclaw.server --backend hf)
   judge   : CPU judge (embeddings + trained head), ${NUM_JUDGE_WORKERS} worker(s)
   training: slime FSDP on CPU, LoRA
 Set MODEL_PATH (and use GPUs) for the ${MODEL_SIZE} setup.
==============================================================================
EOF
    LORA_ARGS=${LORA_ARGS:---use-lora --lora-rank 16 --lora-alpha 32 --lora-target-modules all-linear}
    OPTIMIZER_ARGS=${OPTIMIZER_ARGS:---lr 2e-4 --weight-decay 0 --clip-grad 1.0}
    # 8 live turns per step, one GRPO group (baseline = their mean score; openclaw-rl/README.md)
    ROLLOUT_ARGS=${ROLLOUT_ARGS:---rollout-batch-size 1 --n-samples-per-prompt 8 --rollout-temperature 1.0}
    CKPT_ARGS=${CKPT_ARGS:---save-interval 10 --save-dir ${CKPT_SAVE_DIR}}
  else
    echo "${METHOD_NAME}: no GPU found: serving and training ${MODEL_PATH} on CPU (slow for large models)"
  fi
  SERVER_BACKEND=hf
  TRAIN_DEVICES=""
  N_TRAIN=1
else
  if [[ -z "${MODEL_PATH}" ]]; then
    echo "error: ${METHOD_NAME}: ${NUM_GPUS} GPU(s) found but MODEL_PATH is not set (e.g. export MODEL_PATH=/path/to/qwen3-${MODEL_SIZE})" >&2
    exit 2
  fi
  if [[ -z "${TRAIN_GPUS}" || -z "${ROLLOUT_GPUS}" ]]; then
    half=$(( NUM_GPUS > 1 ? NUM_GPUS / 2 : 1 ))
    TRAIN_GPUS=${TRAIN_GPUS:-$(seq -s, 0 $(( half - 1 )))}
    if [[ "${NUM_GPUS}" -gt 1 ]]; then
      ROLLOUT_GPUS=${ROLLOUT_GPUS:-$(seq -s, "${half}" $(( NUM_GPUS - 1 )))}
    else
      ROLLOUT_GPUS=${ROLLOUT_GPUS:-0}
    fi
  fi
  SERVER_BACKEND=sglang
  TRAIN_DEVICES=${TRAIN_GPUS}
  N_TRAIN=$(awk -F, '{print NF}' <<<"${TRAIN_GPUS}")
  echo "${METHOD_NAME}: ${NUM_GPUS} GPU(s): rollout (SGLang) on ${ROLLOUT_GPUS}, training on ${TRAIN_GPUS}"
fi
LORA_ARGS=${LORA_ARGS:-}
OPTIMIZER_ARGS=${OPTIMIZER_ARGS:---lr 1e-6 --weight-decay 0.01 --adam-beta1 0.9 --adam-beta2 0.999}
ROLLOUT_ARGS=${ROLLOUT_ARGS:---rollout-batch-size 1 --n-samples-per-prompt 16 --rollout-temperature 1.0}
CKPT_ARGS=${CKPT_ARGS:---save-interval 50 --save-dir ${CKPT_SAVE_DIR}}

# ---- 3. server, judge, data -------------------------------------------------------------------
STARTED_PIDS=()
RAY_HEAD_PID=""
cleanup() {
  local pid
  for pid in "${STARTED_PIDS[@]}"; do
    kill -TERM "${pid}" 2>/dev/null || true
  done
  for pid in "${STARTED_PIDS[@]}"; do
    wait "${pid}" 2>/dev/null || true
  done
  if [[ -n "${RAY_HEAD_PID}" ]]; then
    kill -TERM "${RAY_HEAD_PID}" 2>/dev/null || true  # `ray start --block` stops the head it created
    wait "${RAY_HEAD_PID}" 2>/dev/null || true
  fi
}
trap cleanup EXIT

run() {
  if [[ "${OPENCLAW_DRY_RUN}" == "1" ]]; then
    echo "would run: $(printf '%q ' "$@")"
  else
    "$@"
  fi
}

[[ "${OPENCLAW_DRY_RUN}" == "1" ]] || mkdir -p "${RL_BUFFER_DIR}" "${LOG_DIR}"
JUDGE_ARGS=(--rl-buffer-dir "${RL_BUFFER_DIR}" --num-judge-workers "${NUM_JUDGE_WORKERS}"
            --majority-vote-n "${MAJORITY_VOTE_N}" --majority-vote-threshold "${MAJORITY_VOTE_THRESHOLD}")
if [[ -n "${PRM_MODEL_PATH}" ]]; then
  JUDGE_ARGS+=(--prm-model-path "${PRM_MODEL_PATH}")
elif [[ -n "${JUDGE_MODEL_PATH}" ]]; then
  JUDGE_ARGS+=(--prm-model-path "${JUDGE_MODEL_PATH}")
fi

if [[ -z "${OPENCLAW_SERVER_URL}" ]]; then
  SERVER_CMD=("${PYTHON}" -m openclaw.server --model-path "${MODEL_PATH}" --backend "${SERVER_BACKEND}"
              --host "${OPENCLAW_HOST}" --port "${OPENCLAW_PORT}" --enable-rl-intercept --rl-buffer-dir "${RL_BUFFER_DIR}")
  if [[ "${OPENCLAW_DRY_RUN}" == "1" ]]; then
    echo "would run: $(printf '%q ' "${SERVER_CMD[@]}")"
  else
    CUDA_VISIBLE_DEVICES=${ROLLOUT_GPUS} "${SERVER_CMD[@]}" >"${LOG_DIR}/server.log" 2>&1 &
    STARTED_PIDS+=("$!")
  fi
  OPENCLAW_SERVER_URL="http://${OPENCLAW_HOST}:${OPENCLAW_PORT}"
fi
if [[ "${OPENCLAW_DRY_RUN}" == "1" ]]; then
  echo "would run: $(printf '%q ' "${PYTHON}" -m openclaw.judge "${JUDGE_ARGS[@]}")"
else
  "${PYTHON}" -m openclaw.judge "${JUDGE_ARGS[@]}" >"${LOG_DIR}/judge.log" 2>&1 &
  STARTED_PIDS+=("$!")
  echo "${METHOD_NAME}: waiting for ${OPENCLAW_SERVER_URL}/health (log: ${LOG_DIR}/server.log)"
  "${PYTHON}" - "${OPENCLAW_SERVER_URL}" <<'EOF'
import sys
from openclaw.engines.sglang_client import SyncSGLangClient
with SyncSGLangClient(sys.argv[1]) as client:
    client.wait_healthy(deadline_s=900)
EOF
fi
if [[ -n "${DATA_PATH}" ]]; then
  for f in ${DATA_PATH}; do
    run "${PYTHON}" -m openclaw.buffer --dir "${RL_BUFFER_DIR}" import --tokenizer "${MODEL_PATH}" "${f}"
  done
fi

# ---- 4. Ray and the trainer ------------------------------------------------------------------
WANDB_ARGS=()
if [[ -n "${WANDB_PROJECT}" ]]; then
  WANDB_ARGS=(--use-wandb --wandb-project "${WANDB_PROJECT}")
  [[ -n "${WANDB_GROUP}" ]] && WANDB_ARGS+=(--wandb-group "${WANDB_GROUP}")
  [[ -n "${WANDB_KEY}" ]] && WANDB_ARGS+=(--wandb-key "${WANDB_KEY}")
  [[ -n "${WANDB_MODE}" ]] && WANDB_ARGS+=(--wandb-mode "${WANDB_MODE}")
fi
RESUME_ARGS=()
[[ -n "${RESUME_CKPT}" ]] && RESUME_ARGS=(--resume-from-checkpoint "$(abspath "${RESUME_CKPT}")")
WAIT_ARGS=()
[[ -n "${BUFFER_WAIT_TIMEOUT}" ]] && WAIT_ARGS=(--buffer-wait-timeout "${BUFFER_WAIT_TIMEOUT}")

# shellcheck disable=SC2206  # *_ARGS are flag lists: word splitting is intended
TRAIN_CMD=(python slime/train.py
  --hf-checkpoint "${MODEL_PATH}"
  --rollout-backend external --rollout-external-engine-addrs "${OPENCLAW_SERVER_URL#http://}"
  --actor-num-gpus-per-node "${N_TRAIN}"
  --data-source-path openclaw-rl/openclaw_buffer_rollout.py:BufferDataSource
  --rl-buffer-dir "${RL_BUFFER_DIR}" --num-rollout "${NUM_ROLLOUT}" --use-rollout-logprobs
  --log-dir "${LOG_DIR}"
  ${METHOD_ARGS} ${ROLLOUT_ARGS} ${OPTIMIZER_ARGS} ${LORA_ARGS} ${CKPT_ARGS}
  "${WAIT_ARGS[@]}" "${RESUME_ARGS[@]}" "${WANDB_ARGS[@]}" "$@")

if [[ -z "${RAY_ADDRESS:-}" ]]; then
  free_port() { "${PYTHON}" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
  # Fixed defaults (client server 10001, agent 52365) collide with any other Ray on the machine.
  RAY_GCS_PORT=${RAY_GCS_PORT:-$(free_port)}
  RAY_START=(ray start --head --block --port "${RAY_GCS_PORT}" --dashboard-host 127.0.0.1
             --dashboard-port "${RAY_DASHBOARD_PORT}" --include-dashboard true --num-gpus "${NUM_GPUS}"
             --ray-client-server-port "$(free_port)" --dashboard-agent-listen-port "$(free_port)"
             --min-worker-port 20000 --max-worker-port 29999)
  if [[ "${OPENCLAW_DRY_RUN}" == "1" ]]; then
    echo "would run: $(printf '%q ' "${RAY_START[@]}")"
  else
    "${RAY_START[@]}" >"${LOG_DIR}/ray_head.log" 2>&1 &
    RAY_HEAD_PID=$!
  fi
  export RAY_ADDRESS="http://127.0.0.1:${RAY_DASHBOARD_PORT}"
  if [[ "${OPENCLAW_DRY_RUN}" != "1" ]]; then
    "${PYTHON}" - "${RAY_ADDRESS}" "${RAY_HEAD_PID}" "${LOG_DIR}/ray_head.log" <<'EOF'
import os, sys, time, urllib.request
url, pid, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
deadline = time.monotonic() + 300
while True:
    try:
        urllib.request.urlopen(url + "/api/version", timeout=5)
        break
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            tail = open(log).read()[-1500:]
            sys.exit(f"error: the Ray head exited before its job server came up (ports in use? set RAY_DASHBOARD_PORT):\n{tail}")
        if time.monotonic() > deadline:
            sys.exit(f"error: Ray head at {url} did not come up in 300s (see {log})")
        time.sleep(1)  # polling the head's job server
EOF
  fi
fi

RUNTIME_ENV="{\"env_vars\": {\"PYTHONPATH\": \"openclaw-rl:openclaw-opd:openclaw-combine\", \"RAY_AUTH_MODE\": \"disabled\", \"CUDA_VISIBLE_DEVICES\": \"${TRAIN_DEVICES}\"}}"
echo "${METHOD_NAME}: submitting the trainer to ${RAY_ADDRESS} (logs: ${LOG_DIR}/training.log)"
run ray job submit --address "${RAY_ADDRESS}" --working-dir . --runtime-env-json "${RUNTIME_ENV}" -- "${TRAIN_CMD[@]}"
