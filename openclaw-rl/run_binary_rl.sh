#!/usr/bin/env bash
# The second public page's name for Binary RL (GRPO with the judge's score as reward): the same
# launch as run_qwen3_7b_openclaw_rl.sh. Settings are env vars, the page's included (USE_LORA,
# LEARNING_RATE, BATCH_SIZE, MASTER_ADDR, ...; openclaw/launch/README.md); flags go to their component.
set -euo pipefail
export OPENCLAW_CALLER_DIR="$PWD"  # relative --config paths are the caller's
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python}" -m openclaw.launch openclaw-rl "$@"
