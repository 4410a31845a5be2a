#!/usr/bin/env bash
# A local Tinker-API server (skyrl, JAX on CPU) for a HF model folder: what the tests train
# against, and what `TINKER_ENDPOINT=http://127.0.0.1:PORT bash deploy_to_tinker.sh` can use.
#
#   bash openclaw-tinker/run_skyrl_server.sh --base-model "$(python -m openclaw.models tiny --arch qwen3)" --port 8001
#
# Flags: --base-model DIR (required: a Qwen3 or Llama HF folder), --port (8001), --host (127.0.0.1),
# --workdir DIR (its SQLite database and checkpoints; default ./skyrl-tinker), --max-lora-rank (32).
# Creates the venv first if needed (openclaw-tinker/setup_skyrl_tx.sh, a few minutes once).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
base_model="" port=8001 host=127.0.0.1 workdir=./skyrl-tinker max_rank=32
while [[ $# -gt 0 ]]; do
  case "$1" in
    --base-model) base_model="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --host) host="$2"; shift 2 ;;
    --workdir) workdir="$2"; shift 2 ;;
    --max-lora-rank) max_rank="$2"; shift 2 ;;
    *) echo "run_skyrl_server.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n "$base_model" && -d "$base_model" ]] || { echo "run_skyrl_server.sh: --base-model must be a HF model folder" >&2; exit 2; }
VENV="$(bash "$HERE/setup_skyrl_tx.sh" | tail -1)"
mkdir -p "$workdir"
workdir="$(cd "$workdir" && pwd)"
export PATH="$VENV/shim:$PATH" JAX_PLATFORMS=cpu
# The server starts its engine with the same `uv run` options it was started with (see the shim).
exec "$VENV/shim/uv" run --extra tinker --extra jax -m skyrl.tinker.api \
  --base-model "$base_model" --host "$host" --port "$port" \
  --database-url "sqlite:///$workdir/tinker.db" --checkpoints-base "$workdir/checkpoints" \
  --backend-config "{\"max_lora_adapters\": 4, \"max_lora_rank\": $max_rank}"
