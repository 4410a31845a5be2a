#!/usr/bin/env bash
# openclaw-rl with LoRA adapters (the weights pushed to the engine are the adapter only).
set -euo pipefail

export LORA_ARGS=${LORA_ARGS:-"--use-lora --lora-rank 64 --lora-alpha 128 --lora-dropout 0.0 --lora-target-modules all-linear"}
export OPTIMIZER_ARGS=${OPTIMIZER_ARGS:-"--lr 1e-5 --weight-decay 0.0 --adam-beta1 0.9 --adam-beta2 0.999"}
exec bash "$(dirname "${BASH_SOURCE[0]}")/run_qwen3_7b_openclaw_rl.sh" "$@"
