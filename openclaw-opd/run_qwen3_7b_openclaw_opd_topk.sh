#!/usr/bin/env bash
# openclaw-opd, top-k distillation variant: reverse KL to the hinted teacher over its top-k
# tokens plus a tail bin (topk_distillation_loss.py). OPD_TOPK sets k.
set -euo pipefail

OPD_TOPK=${OPD_TOPK:-16}
METHOD_NAME=openclaw-opd-topk
METHOD_ARGS=${METHOD_ARGS:-"--extra-args-provider-path openclaw-opd/openclaw_opd_args.py \
 --rollout-function-path openclaw-opd/openclaw_opd_rollout.py:generate_rollout \
 --advantage-estimator on_policy_distillation --opd-topk ${OPD_TOPK} \
 --custom-loss-function-path openclaw-opd/topk_distillation_loss.py:topk_distillation_loss"}
export METHOD_NAME METHOD_ARGS OPD_TOPK

# shellcheck source-path=SCRIPTDIR source=../openclaw-rl/openclaw_launch.sh
source "$(dirname "${BASH_SOURCE[0]}")/../openclaw-rl/openclaw_launch.sh" "$@"
