#!/usr/bin/env bash
# Create the skyrl-tx virtual environment: an open-source Tinker-API server (JAX on CPU) that the
# tests and the local deploy path train against. The project published it as `skyrl-tx` (<= 0.3.0,
# module `tx`) and now as `skyrl` (module `skyrl`). skyrl-tx 0.3.0 predates the SDK's
# `/api/v1/client/config` handshake, so the tinker SDK cannot talk to it (404); skyrl 0.3.0 has it.
# Its own venv: it pins transformers 5.6-5.8 and peft 0.18 (the project runs 5.23 / 0.21) and
# brings JAX.
#
#   bash openclaw-tinker/setup_skyrl_tx.sh        # idempotent; prints the venv path last
#
# Env: SKYRL_TX_VENV (default ~/.cache/openclaw/skyrl-tx-venv).
set -euo pipefail

VENV="${SKYRL_TX_VENV:-$HOME/.cache/openclaw/skyrl-tx-venv}"
STAMP="$VENV/.openclaw-skyrl-0.3.0-r2"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# One creator at a time (two test sessions on a fresh machine would interleave pip runs).
mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
if [[ -f "$STAMP" ]]; then
  echo "$VENV"
  exit 0
fi

python3 -m venv "$VENV"
PIP=("$VENV/bin/pip" install --disable-pip-version-check -q)
# torch first, from the CPU wheel: peft (a skyrl-tx dependency) would otherwise pull a CUDA build.
"${PIP[@]}" torch==2.13.0
# skyrl's own "jax" extra asks for jax[cuda12] on Linux, so its CPU deps are listed by hand.
"${PIP[@]}" "skyrl[tinker]==0.3.0" transformers==5.8.0 peft==0.18.1 tokenizers==0.22.2 \
  "jax[cpu]==0.10.2" flax==0.12.8 optax==0.2.8 torch==2.13.0

# skyrl-tx's API server starts its engine as `uv run --extra tinker --extra jax -m tx.tinker.engine
# ...` (it expects a source checkout managed by uv). Installed from the wheel, the engine module is
# importable from this venv, so a `uv` on the server's PATH that runs this venv's python stands in.
# skyrl 0.3.0 declares Python >= 3.11 but its types.py builds a pydantic model on typing.TypedDict,
# which pydantic refuses below 3.12 ("Please use `typing_extensions.TypedDict`"). This machine's
# torch CPU wheel is for 3.11, so the one import is patched to what pydantic asks for.
TYPES="$("$VENV/bin/python" -c 'import importlib.util as u; print(u.find_spec("skyrl").submodule_search_locations[0])')/tinker/types.py"
if ! grep -q '^from typing_extensions import TypedDict' "$TYPES"; then
  grep -q '^from typing import Annotated, Any, Literal, TypedDict$' "$TYPES" \
    || { echo "setup_skyrl_tx.sh: $TYPES changed; the TypedDict patch no longer applies" >&2; exit 1; }
  sed -i 's/^from typing import Annotated, Any, Literal, TypedDict$/from typing import Annotated, Any, Literal\nfrom typing_extensions import TypedDict/' "$TYPES"
fi

mkdir -p "$VENV/shim"
install -m 0755 "$HERE/skyrl_tx_uv_shim.sh" "$VENV/shim/uv"

touch "$STAMP"
echo "$VENV"
