#!/usr/bin/env bash
# Evaluate a checkpoint (or the base model, or an OpenAI-compatible endpoint) on the three families:
#   bash openclaw-test/run_eval.sh --model-path "$CKPT_SAVE_DIR/checkpoint-latest" --eval-tasks "conversation,coding,tool-use"
#   bash openclaw-test/run_eval.sh --base-url http://127.0.0.1:30000/v1 --eval-tasks "conversation,coding"
# MODEL_PATH is the default --model-path; with neither, the embedded SmolLM2-135M is evaluated.
# Options: python openclaw-test/run_eval.py --help (README.md explains every number).
set -euo pipefail

PYTHON=${PYTHON:-python}
MODEL_PATH=${MODEL_PATH:-}
export MODEL_PATH
exec "${PYTHON}" "$(dirname "${BASH_SOURCE[0]}")/run_eval.py" "$@"
