#!/usr/bin/env bash
# GUI-agent RL: the policy acts on MiniWoB++ pages in headless Chromium (one browser per env,
# PARALLEL_ENVS of them, reused); reward = the task's own reward. Submits slime/train.py as a Ray job.
#
#   ENV_TYPE=gui SCREENSHOT_BACKEND=playwright PARALLEL_ENVS=16 MAX_STEPS=6 bash gui-rl/run_gui_rl.sh
#
# No GPU and no MODEL_PATH: the embedded CPU preset (CPU_PRESET_MODEL=smollm2|tiny).
# Settings are env vars (openclaw/launch/README.md, gui-rl/README.md); flags go to the trainer.
set -euo pipefail
export OPENCLAW_CALLER_DIR="$PWD"  # relative --config paths are the caller's
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python}" -m openclaw.launch gui-rl "$@"
