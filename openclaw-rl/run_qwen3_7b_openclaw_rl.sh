#!/usr/bin/env bash
# openclaw-rl: Binary RL (GRPO-style, PRM judge score as reward) on live conversations.
# Serves MODEL_PATH with the RL intercept, judges turns, trains in the background.
# No GPU and no MODEL_PATH: the embedded CPU preset (see openclaw_launch.sh). Extra flags are
# passed to slime/train.py.
set -euo pipefail

METHOD_NAME=openclaw-rl
# Live turns are single responses: each rollout's turns form one GRPO group (baseline = their
# mean score, README.md); for baseline 0 pass --disable-rewards-normalization with --n-samples-per-prompt 1.
METHOD_ARGS=${METHOD_ARGS:-"--extra-args-provider-path openclaw-rl/openclaw_rl_args.py \
 --rollout-function-path openclaw-rl/openclaw_buffer_rollout.py:generate_rollout \
 --advantage-estimator grpo --disable-grpo-std-normalization --eps-clip 0.2"}
export METHOD_NAME METHOD_ARGS

# shellcheck source-path=SCRIPTDIR source=openclaw_launch.sh
source "$(dirname "${BASH_SOURCE[0]}")/openclaw_launch.sh" "$@"
