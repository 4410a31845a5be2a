#!/usr/bin/env bash
# Evaluate a trained checkpoint (or any model folder) with the personal-agent harness:
#   bash openclaw-test/run_eval.sh --model-path "$CKPT_SAVE_DIR/checkpoint-latest" --eval-tasks "conversation,capability,kl"
# MODEL_PATH is the default --model-path; with neither, the embedded SmolLM2-135M is evaluated.
set -euo pipefail

PYTHON=${PYTHON:-python}
MODEL_PATH=${MODEL_PATH:-}
export MODEL_PATH
exec "${PYTHON}" "$(dirname "${BASH_SOURCE[0]}")/run_eval.py" "$@"
