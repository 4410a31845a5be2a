#!/usr/bin/env bash
# Run a model as a GUI agent on MiniWoB++ held-out seeds; prints success per task and writes
# report.json and first/last screenshots to gui-rl/eval_out/agent.
#
#   bash gui-rl/run_gui_agent.sh --model smollm2                 # CPU: embedded engine, accessibility tree
#   bash gui-rl/run_gui_agent.sh --model qwen3.5-vl --base-url http://HOST:30000/v1   # GPU: SGLang, screenshots
#
# Without a GPU a vision-language name (qwen3.5-vl, ...) stops and says it needs the GPU/SGLang path.
# Env vars: PARALLEL_ENVS (browsers), MAX_STEPS (turns per episode), SCREENSHOT_BACKEND.
set -euo pipefail
echo "run_gui_agent.sh evaluates a model as a GUI agent and does not train it; to train: bash gui-rl/run_gui_rl.sh" >&2
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python}" gui-rl/gui_agent.py "$@"
