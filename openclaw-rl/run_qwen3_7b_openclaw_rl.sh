#!/usr/bin/env bash
# openclaw-rl: Binary RL (GRPO-style, PRM judge score as reward) on live conversations: serves
# MODEL_PATH with the RL intercept, judges turns, trains in the background. No GPU and no MODEL_PATH:
# the embedded CPU preset. Settings are env vars (openclaw/launch/README.md); flags go to the component that declares them.
set -euo pipefail
export OPENCLAW_CALLER_DIR="$PWD"  # relative --config paths are the caller's
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python}" -m openclaw.launch openclaw-rl "$@"
