#!/usr/bin/env bash
# Tool-call RL (ReTool-style math): the policy calls a sandboxed Python interpreter and a
# calculator; reward = answer correctness (+ TOOL_USE_BONUS). Submits slime/train.py as a Ray job.
#
#   ENV_TYPE=toolcall TOOLS_CONFIG=./toolcall-rl/tools_config.json PARALLEL_ENVS=64 bash toolcall-rl/run_toolcall_rl.sh
#
# No GPU and no MODEL_PATH: the embedded CPU preset (CPU_PRESET_MODEL=smollm2|tiny).
# Settings are env vars (openclaw/launch/README.md); flags go to the component that declares them.
set -euo pipefail
export OPENCLAW_CALLER_DIR="$PWD"  # relative --config paths are the caller's
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python}" -m openclaw.launch toolcall-rl "$@"
