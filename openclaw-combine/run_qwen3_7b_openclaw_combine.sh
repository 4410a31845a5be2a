#!/usr/bin/env bash
# openclaw-combine (recommended): binary RL + OPD, loss w_opd*(teacher - old) + w_rl*reward
# under PPO clipping. Weights: OPENCLAW_COMBINE_W_OPD, OPENCLAW_COMBINE_W_RL (defaults: openclaw_combine_args.py).
# No GPU and no MODEL_PATH: the embedded CPU preset. Settings are env vars (openclaw/launch/README.md); flags go to the component that declares them.
set -euo pipefail
export OPENCLAW_CALLER_DIR="$PWD"  # relative --config paths are the caller's
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python}" -m openclaw.launch openclaw-combine "$@"
