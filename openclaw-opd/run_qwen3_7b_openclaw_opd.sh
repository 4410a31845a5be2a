#!/usr/bin/env bash
# openclaw-opd: on-policy distillation from hint-augmented teacher log-probs (token-level
# advantage teacher - old). No GPU and no MODEL_PATH: the embedded CPU preset.
# Settings are env vars (openclaw/launch/README.md); flags go to the component that declares them.
set -euo pipefail
export OPENCLAW_CALLER_DIR="$PWD"  # relative --config paths are the caller's
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python}" -m openclaw.launch openclaw-opd "$@"
