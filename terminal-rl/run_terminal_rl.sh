#!/usr/bin/env bash
# Terminal-agent RL: the policy runs shell commands in a bubblewrap sandbox; reward = fraction of
# the task's tests passed (+ PRM_STEP_COEF * per-step score). Submits slime/train.py as a Ray job.
#
#   ENV_TYPE=terminal MAX_STEPS=20 PARALLEL_ENVS=32 bash terminal-rl/run_terminal_rl.sh
#
# No GPU and no MODEL_PATH: the embedded CPU preset (CPU_PRESET_MODEL=smollm2|tiny).
# Settings are env vars (openclaw/launch/README.md); flags go to the component that declares them.
set -euo pipefail
export OPENCLAW_CALLER_DIR="$PWD"  # relative --config paths are the caller's
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python}" -m openclaw.launch terminal-rl "$@"
