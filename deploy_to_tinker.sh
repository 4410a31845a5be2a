#!/usr/bin/env bash
# Train a personal agent over the Tinker API: no local GPU. The OpenAI server runs here with
# --backend tinker (completions sampled by Tinker), the RL intercept records turns, the judge
# scores them, and openclaw-tinker trains a LoRA through Tinker, refreshing the served sampler
# after every step. Docs: openclaw-tinker/README.md.
#
#   export TINKER_API_KEY=...; export TINKER_PROJECT_ID=...; bash deploy_to_tinker.sh
#   TINKER_ENDPOINT=http://127.0.0.1:8001 TINKER_API_KEY=tml-local bash deploy_to_tinker.sh \
#       --model-path /path/to/hf-model --method combine      # a local Tinker-API server (skyrl-tx)
#   bash deploy_to_tinker.sh --ray-address http://HEAD:8265 ...   # the same, as a Ray job
#
# Env: TINKER_API_KEY (required), TINKER_PROJECT_ID (the hosted service's project; optional for a
# local server), TINKER_ENDPOINT (the Tinker API URL; default: the SDK's hosted service),
# MODEL_PATH (base model as Tinker names it; default Qwen/Qwen3-8B), OPENCLAW_METHOD (combine).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

if [[ -z "${TINKER_API_KEY:-}" ]]; then
  cat >&2 <<'MSG'
deploy_to_tinker.sh: TINKER_API_KEY is not set.
Set:
  TINKER_API_KEY     your Tinker API key (required; any non-empty value for a local skyrl-tx server)
  TINKER_PROJECT_ID  your Tinker project (hosted service)
  TINKER_ENDPOINT    the Tinker API URL (default: the hosted service; e.g. http://127.0.0.1:8001 for skyrl-tx)
MSG
  exit 2
fi
if [[ -z "${TINKER_ENDPOINT:-}" && -z "${TINKER_PROJECT_ID:-}" ]]; then
  echo "deploy_to_tinker.sh: warning: TINKER_PROJECT_ID is not set (the hosted service may ask for it)" >&2
fi

args=("$@")
ray_address=""
for ((i = 0; i < ${#args[@]}; i++)); do
  if [[ "${args[i]}" == "--ray-address" ]]; then
    ray_address="${args[i + 1]:?--ray-address needs a value: the Ray dashboard address, e.g. http://HEAD:8265}"
    args=("${args[@]:0:i}" "${args[@]:i+2}")
    break
  fi
done

have_model=0
for a in "${args[@]}"; do [[ "$a" == --model-path || "$a" == --base-model ]] && have_model=1; done
if [[ $have_model == 0 ]]; then args+=(--model-path "${MODEL_PATH:-Qwen/Qwen3-8B}"); fi

if [[ -n "$ray_address" ]]; then
  # The job runs the same launcher on the cluster. The key travels in a runtime-env file (0600),
  # not in argv, where `ps` would show it.
  env_file=$(mktemp --suffix=.json)
  trap 'rm -f "$env_file"' EXIT
  python -c 'import json, os, sys; json.dump({"env_vars": {k: os.environ[k] for k in ("TINKER_API_KEY", "TINKER_PROJECT_ID", "TINKER_ENDPOINT") if os.environ.get(k)}}, open(sys.argv[1], "w"))' "$env_file"
  RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}" ray job submit --address "$ray_address" --working-dir . \
    --runtime-env "$env_file" -- python openclaw-tinker/tinker_launch.py "${args[@]}"
  exit $?
fi
exec python openclaw-tinker/tinker_launch.py "${args[@]}"
