#!/usr/bin/env bash
# openclaw-opd: on-policy distillation from hint-augmented teacher log-probs (token-level
# advantage teacher - old). No GPU and no MODEL_PATH: the embedded CPU preset.
set -euo pipefail

METHOD_NAME=openclaw-opd
METHOD_ARGS=${METHOD_ARGS:-"--extra-args-provider-path openclaw-opd/openclaw_opd_args.py \
 --rollout-function-path openclaw-opd/openclaw_opd_rollout.py:generate_rollout \
 --advantage-estimator on_policy_distillation --opd-kl-coef 1.0 --eps-clip 0.2"}
export METHOD_NAME METHOD_ARGS

# shellcheck source-path=SCRIPTDIR source=../openclaw-rl/openclaw_launch.sh
source "$(dirname "${BASH_SOURCE[0]}")/../openclaw-rl/openclaw_launch.sh" "$@"
