#!/usr/bin/env bash
# openclaw-opd, top-k distillation variant: reverse KL to the hinted teacher over its top-k
# tokens plus a tail bin (topk_distillation_loss.py). OPD_TOPK sets k (default 16).
# Settings are env vars (openclaw/launch/README.md); flags go to the component that declares them.
set -euo pipefail
export OPENCLAW_CALLER_DIR="$PWD"  # relative --config paths are the caller's
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python}" -m openclaw.launch openclaw-opd-topk "$@"
