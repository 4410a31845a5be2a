#!/usr/bin/env bash
# Install OpenClaw-RL on a fresh CPU machine (idempotent). GPU extras: requirements-gpu.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# torch first and pinned: anything that asks for plain `torch` would otherwise pull a CUDA build.
$PY -m pip install -q "torch==2.13.0"
$PY -m pip install -q -r requirements.txt
$PY -m pip install -q --no-deps -r requirements-embedded.txt
$PY -m pip install -q --no-deps -e . -e slime
if [ -f scripts/setup-system.sh ]; then bash scripts/setup-system.sh; fi
# gui-rl: chromium + chromedriver, Playwright, Selenium (SCREENSHOT_BACKEND=selenium), MiniWoB++ pages.
bash gui-rl/setup_gui.sh
# swe-rl: the pinned sdists its instances are rebuilt from, and the pinned pytest its sandboxes run (cached).
bash swe-rl/setup_swe.sh
# Convert the embedded default model once (offline, ~20 s, cached in $OPENCLAW_HOME).
HF_HUB_OFFLINE=1 $PY -m openclaw.models prepare
