#!/usr/bin/env bash
# deploy_to_fireworks.sh --gpus N --method rl|opd|combine
#
# Decided: this script does NOT provision Fireworks training; it checks its arguments and the key,
# then refuses, saying what it would need. Why: provisioning a Fireworks trainer goes through the
# pre-release Training SDK (`pip install --pre "fireworks-ai[training]"`: TrainerJobManager and a
# training shape that fixes the GPU type and count), which is billed and cannot be reached or
# tested from this project's machines; a provisioning path nobody can run is worse than none.
# What does work: a provisioned Fireworks trainer speaks the Tinker API, so once you have one,
#   TINKER_API_KEY=$FIREWORKS_API_KEY TINKER_ENDPOINT=<trainer URL> bash deploy_to_tinker.sh --method M
# runs the same LoRA training loop as the Tinker backend (openclaw-tinker/README.md, "Fireworks").
set -euo pipefail

usage() { echo "usage: deploy_to_fireworks.sh --gpus N --method rl|opd|combine" >&2; exit 2; }
gpus="" method=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --gpus) gpus="${2:-}"; shift 2 || usage ;;
    --method) method="${2:-}"; shift 2 || usage ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "deploy_to_fireworks.sh: unknown argument $1" >&2; usage ;;
  esac
done
[[ "$gpus" =~ ^[1-9][0-9]*$ ]] || { echo "deploy_to_fireworks.sh: --gpus needs a positive integer" >&2; usage; }
[[ "$method" =~ ^(rl|opd|combine)$ ]] || { echo "deploy_to_fireworks.sh: --method must be rl, opd or combine" >&2; usage; }

if [[ -z "${FIREWORKS_API_KEY:-}" ]]; then
  echo "deploy_to_fireworks.sh: FIREWORKS_API_KEY is not set (your Fireworks API key)." >&2
  exit 2
fi

cat >&2 <<MSG
deploy_to_fireworks.sh: refused: provisioning a Fireworks trainer ($gpus GPUs, method $method) is not
automated by this project. It would need:
  1. pip install --pre "fireworks-ai[training]"  (Fireworks' Training SDK; pre-release, not pinned here)
  2. a Fireworks account with training quota and a training shape for $gpus GPUs
     (accounts/fireworks/trainingShapes/...), provisioned with TrainerJobManager.create_and_wait
  3. then the trainer's Tinker-compatible URL:
       TINKER_API_KEY=\$FIREWORKS_API_KEY TINKER_ENDPOINT=<trainer URL> \\
         bash deploy_to_tinker.sh --method $method --model-path <base model as Fireworks names it>
Why refused rather than attempted: that path is billed and cannot be exercised from this project's
machines (no route to Fireworks), so it could not be tested. See openclaw-tinker/README.md.
MSG
exit 3
