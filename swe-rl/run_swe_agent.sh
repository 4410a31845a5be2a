#!/usr/bin/env bash
# Run the SWE agent on a benchmark and print the resolved rate (per-instance logs and patches in
# OUT_DIR). MODEL_PATH: a checkpoint/HF folder; OPENCLAW_BASE_URL (+ OPENCLAW_MODEL): any
# OpenAI-compatible endpoint instead; neither: the embedded SmolLM2 on CPU.
#
#   bash swe-rl/run_swe_agent.sh                                   # shipped held-out split
#   bash swe-rl/run_swe_agent.sh --benchmark swe-bench-lite        # says what local data to provide
#   SWE_BENCH_PATH=/data/swe-bench bash swe-rl/run_swe_agent.sh    # your SWE-bench instances + mirrors
set -euo pipefail
echo "run_swe_agent.sh evaluates a model as a SWE agent and does not train it; to train: bash swe-rl/run_swe_rl.sh" >&2
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python}"
args=(--out "${OUT_DIR:-./logs/swe-agent}" --max-steps "${MAX_STEPS:-20}" --parallel-envs "${PARALLEL_ENVS:-8}")
if [ -n "${OPENCLAW_BASE_URL:-}" ]; then
  args+=(--base-url "$OPENCLAW_BASE_URL" --model "${OPENCLAW_MODEL:-default}")
elif [ -n "${MODEL_PATH:-}" ]; then
  args+=(--model-path "$MODEL_PATH")
else
  cat >&2 <<BANNER
=====================================================================
 swe-rl agent: no MODEL_PATH and no OPENCLAW_BASE_URL -> EMBEDDED CPU PRESET
   model    SmolLM2-135M-Instruct, embedded engine (transformers on CPU), fp32
   episodes MAX_STEPS=${MAX_STEPS:-20} PARALLEL_ENVS=${PARALLEL_ENVS:-8}
 Expect a resolved rate near 0: set MODEL_PATH or OPENCLAW_BASE_URL for a real model.
=====================================================================
BANNER
fi
exec "$PYTHON" swe-rl/swe_eval.py "${args[@]}" "$@"
