#!/usr/bin/env bash
# SWE agent RL: the policy fixes real bugs in real projects (bash / view / str_replace / submit in
# a bubblewrap sandbox); reward = 1 if the instance's FAIL_TO_PASS tests pass and no PASS_TO_PASS
# test breaks. Submits slime/train.py as a Ray job.
#
#   ENV_TYPE=swe SWE_BENCH_PATH=/path/to/swe-bench PARALLEL_ENVS=8 MAX_STEPS=20 bash swe-rl/run_swe_rl.sh
#
# No GPU and no MODEL_PATH: the embedded CPU preset (CPU_PRESET_MODEL=smollm2|tiny).
# Settings are env vars (swe-rl/README.md); flags go to the component that declares them.
set -euo pipefail
export OPENCLAW_CALLER_DIR="$PWD"  # relative --config paths are the caller's
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python}" -m openclaw.launch swe-rl "$@"
