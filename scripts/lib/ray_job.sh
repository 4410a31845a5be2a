# Shared by the Track 2 launch scripts (sourced, not run). Expects PYTHON, LOG_DIR, CKPT_SAVE_DIR,
# RAY_PORT, RAY_DASHBOARD_PORT, RAY_START_TIMEOUT, RAY_NUM_CPUS, DRY_RUN, ROLLOUT_ARGS,
# OPTIMIZER_ARGS, LORA_ARGS, CKPT_ARGS, EXTRA_ARGS, TRAIN_GPUS, ROLLOUT_GPUS, RESUME_CKPT.
# shellcheck shell=bash disable=SC2034,SC2153  # inputs come from, and arrays go to, the sourcing script

# Paths travel to the Ray job (which runs in a copy of the working dir): make them absolute.
abspath() { "$PYTHON" -c 'import os, sys; print(os.path.abspath(sys.argv[1]))' "$1"; }

# The reference's *_ARGS strings as arrays, plus cluster flags from TRAIN_GPUS / ROLLOUT_GPUS /
# RESUME_CKPT: ROLLOUT_ARR OPTIMIZER_ARR LORA_ARR CKPT_ARR EXTRA_ARR CLUSTER_ARR.
split_common_args() {
  read -r -a ROLLOUT_ARR <<<"$ROLLOUT_ARGS"
  read -r -a OPTIMIZER_ARR <<<"$OPTIMIZER_ARGS"
  read -r -a LORA_ARR <<<"$LORA_ARGS"
  read -r -a CKPT_ARR <<<"$CKPT_ARGS"
  read -r -a EXTRA_ARR <<<"$EXTRA_ARGS"
  CLUSTER_ARR=()
  if [ -n "$TRAIN_GPUS" ]; then CLUSTER_ARR+=(--actor-num-gpus-per-node "$(awk -F, '{print NF}' <<<"$TRAIN_GPUS")"); fi
  if [ -n "$ROLLOUT_GPUS" ]; then CLUSTER_ARR+=(--rollout-num-gpus "$(awk -F, '{print NF}' <<<"$ROLLOUT_GPUS")"); fi
  if [ -n "$RESUME_CKPT" ]; then CLUSTER_ARR+=(--resume-from-checkpoint "$(abspath "$RESUME_CKPT")"); fi
}

STARTED_RAY_PID=""
stop_started_ray() {
  # Stop only the head this script started: it runs in the foreground of its own process
  # (`ray start --block`), which shuts its cluster down on SIGTERM.
  if [ -n "$STARTED_RAY_PID" ] && kill -0 "$STARTED_RAY_PID" 2>/dev/null; then
    kill -TERM "$STARTED_RAY_PID" 2>/dev/null || true
    wait "$STARTED_RAY_PID" 2>/dev/null || true
  fi
}

# submit_job RUNTIME_ENV_JSON CMD...: with DRY_RUN=1 print CMD; otherwise start a private Ray head
# when RAY_ADDRESS is unset (stopped when the script exits) and `ray job submit --working-dir .` CMD.
submit_job() {
  local runtime_env=$1
  shift
  if [ "$DRY_RUN" = "1" ]; then
    printf 'would submit:'; printf ' %q' "$@"; printf '\n'
    return 0
  fi
  mkdir -p "$LOG_DIR" "$CKPT_SAVE_DIR"
  trap stop_started_ray EXIT
  local job_address
  if [ -z "${RAY_ADDRESS:-}" ]; then
    local cpu_flag=()
    if [ -n "$RAY_NUM_CPUS" ]; then cpu_flag=(--num-cpus "$RAY_NUM_CPUS"); fi
    ray start --head --block --port "$RAY_PORT" --dashboard-host 127.0.0.1 --dashboard-port "$RAY_DASHBOARD_PORT" \
      --disable-usage-stats "${cpu_flag[@]}" >"$LOG_DIR/ray-head.log" 2>&1 &
    STARTED_RAY_PID=$!
    job_address="http://127.0.0.1:$RAY_DASHBOARD_PORT"
    local deadline=$((SECONDS + RAY_START_TIMEOUT))
    until ray job list --address "$job_address" >/dev/null 2>&1; do
      if ! kill -0 "$STARTED_RAY_PID" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
        echo "error: the Ray head did not come up on port $RAY_PORT (see $LOG_DIR/ray-head.log)" >&2
        exit 1
      fi
      sleep 1
    done
    echo "started a Ray head at $job_address (pid $STARTED_RAY_PID); it is stopped when this script exits" >&2
  else
    job_address="$RAY_ADDRESS"
  fi
  ray job submit --address "$job_address" --working-dir . --runtime-env-json "$runtime_env" -- "$@"
}
