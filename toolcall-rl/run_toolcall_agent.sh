#!/usr/bin/env bash
# The second public page's name for tool-call agent training: the same launch as run_toolcall_rl.sh
# TOOLS_CONFIG (default toolcall-rl/tools_config.json): the page sets it from inside toolcall-rl/
# (`export TOOLS_CONFIG=./tools_config.json`), so a path that exists from the caller's folder is made absolute.
set -euo pipefail
if [ -n "${TOOLS_CONFIG:-}" ] && [ -e "$TOOLS_CONFIG" ]; then
  TOOLS_CONFIG="$(realpath "$TOOLS_CONFIG")"
  export TOOLS_CONFIG
fi
export OPENCLAW_CALLER_DIR="$PWD"  # relative --config paths are the caller's
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python}" -m openclaw.launch toolcall-rl "$@"
