#!/usr/bin/env bash
# The second public page's name for terminal-agent training: the same launch as run_terminal_rl.sh.
# TASK_TYPE=bash_commands (the page's) is this track's task family; MAX_STEPS, PARALLEL_ENVS, TASKS_PATH as there.
set -euo pipefail
export OPENCLAW_CALLER_DIR="$PWD"  # relative --config paths are the caller's
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python}" -m openclaw.launch terminal-rl "$@"
