#!/usr/bin/env bash
# The second public page's name for on-policy distillation: the same launch as
# run_qwen3_7b_openclaw_opd.sh. Settings are env vars (openclaw/launch/README.md).
set -euo pipefail
export OPENCLAW_CALLER_DIR="$PWD"  # relative --config paths are the caller's
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python}" -m openclaw.launch openclaw-opd "$@"
