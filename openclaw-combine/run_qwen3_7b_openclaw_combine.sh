#!/usr/bin/env bash
# openclaw-combine (recommended): binary RL + OPD, loss w_opd*(teacher - old) + w_rl*reward
# under PPO clipping. Weights: OPENCLAW_COMBINE_W_OPD, OPENCLAW_COMBINE_W_RL (default 1.0 each).
# No GPU and no MODEL_PATH: the embedded CPU preset.
set -euo pipefail

OPENCLAW_COMBINE_W_OPD=${OPENCLAW_COMBINE_W_OPD:-1.0}
OPENCLAW_COMBINE_W_RL=${OPENCLAW_COMBINE_W_RL:-1.0}
METHOD_NAME=openclaw-combine
METHOD_ARGS=${METHOD_ARGS:-"--extra-args-provider-path openclaw-combine/openclaw_combine_args.py \
 --rollout-function-path openclaw-combine/openclaw_combine_rollout.py:generate_rollout \
 --custom-loss-function-path openclaw-combine/combine_loss.py:combine_loss \
 --advantage-estimator grpo --disable-grpo-std-normalization --eps-clip 0.2 \
 --openclaw-combine-w-opd ${OPENCLAW_COMBINE_W_OPD} --openclaw-combine-w-rl ${OPENCLAW_COMBINE_W_RL}"}
export METHOD_NAME METHOD_ARGS OPENCLAW_COMBINE_W_OPD OPENCLAW_COMBINE_W_RL

# shellcheck source-path=SCRIPTDIR source=../openclaw-rl/openclaw_launch.sh
source "$(dirname "${BASH_SOURCE[0]}")/../openclaw-rl/openclaw_launch.sh" "$@"
