#!/usr/bin/env bash
# The second public page's name for Binary RL + OPD: the same launch as run_qwen3_7b_openclaw_combine.sh.
#   bash openclaw-combine/run_combine_training.sh           # as run_qwen3_7b_openclaw_combine.sh
#   bash openclaw-combine/run_combine_training.sh --lora    # as run_qwen3_7b_lora_openclaw_combine.sh (first flag);
#                                                           # USE_LORA / LORA_RANK / LORA_ALPHA / LORA_DROPOUT apply
# Settings are env vars (openclaw/launch/README.md); other flags go to the component that declares them.
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"  # no cd: the launcher reads relative --config paths from the caller's folder
if [ "${1:-}" = "--lora" ]; then shift; exec bash "$here/run_qwen3_7b_lora_openclaw_combine.sh" "$@"; fi
exec bash "$here/run_qwen3_7b_openclaw_combine.sh" "$@"
