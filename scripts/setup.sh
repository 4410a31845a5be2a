#!/usr/bin/env bash
# Install OpenClaw-RL on a fresh machine (idempotent).
#   bash scripts/setup.sh                CPU: torch 2.13.0 (CPU) + requirements.txt
#   bash scripts/setup.sh --gpu          CUDA: requirements-gpu.txt (CUDA torch, SGLang) instead of requirements.txt
#   bash scripts/setup.sh --gpu --force  the same where nvidia-smi is missing (building an image for GPU hosts)
set -euo pipefail
GPU=0
FORCE=0
for arg in "$@"; do
    case $arg in
        --gpu) GPU=1 ;;
        --force) FORCE=1 ;;
        -h | --help) sed -n '2,5p' "$0"; exit 0 ;;
        *) echo "setup.sh: unknown option '$arg' (options: --gpu, --force)" >&2; exit 2 ;;
    esac
done
if [ "$FORCE" = 1 ] && [ "$GPU" = 0 ]; then
    echo "setup.sh: --force only applies to --gpu" >&2; exit 2
fi
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ "$GPU" = 1 ]; then
    # Refused rather than installed blind: gigabytes of CUDA wheels are useless without an NVIDIA driver.
    if ! command -v nvidia-smi >/dev/null 2>&1 && [ "$FORCE" = 0 ]; then
        echo "setup.sh --gpu: nvidia-smi not found, so this machine has no usable NVIDIA driver." >&2
        echo "  CPU install: bash scripts/setup.sh" >&2
        echo "  installing the GPU set anyway (e.g. building an image for GPU hosts): bash scripts/setup.sh --gpu --force" >&2
        exit 1
    fi
    TORCH_PIN=$(grep -oE '^torch==[^[:space:]#]+' requirements-gpu.txt)
    # A local CPU build (2.14.1+cpu) satisfies `torch==2.14.1` as well, so pip would keep it.
    if $PY -c 'import importlib.metadata as m, sys; sys.exit("+cpu" not in m.version("torch"))' 2>/dev/null; then
        $PY -m pip uninstall -q -y torch
    fi
    # CUDA torch first, on its own: the largest download, and the rest then resolves against it.
    $PY -m pip install -q "$TORCH_PIN"
    $PY -m pip install -q -r requirements-gpu.txt
    $PY -c 'import torch; assert torch.version.cuda, f"torch {torch.__version__} is not a CUDA build"; print(f"torch {torch.__version__}, CUDA {torch.version.cuda}")'
else
    # torch first and pinned: anything that asks for plain `torch` would otherwise pull a CUDA build.
    $PY -m pip install -q "torch==2.13.0"
    $PY -m pip install -q -r requirements.txt
fi
$PY -m pip install -q --no-deps -r requirements-embedded.txt
# --backend llamacpp: portable flags (requirements-llamacpp.txt says why); the CPU set only (GPU hosts serve with SGLang).
if [ "$GPU" = 0 ]; then
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON" \
        $PY -m pip install -q -r requirements-llamacpp.txt
fi
$PY -m pip install -q --no-deps -e . -e slime
if [ -f scripts/setup-system.sh ]; then bash scripts/setup-system.sh; fi
# gui-rl: chromium + chromedriver, Playwright, Selenium (SCREENSHOT_BACKEND=selenium), MiniWoB++ pages.
bash gui-rl/setup_gui.sh
# swe-rl: the pinned sdists its instances are rebuilt from, and the pinned pytest its sandboxes run (cached).
bash swe-rl/setup_swe.sh
# Convert the embedded default model once (offline, ~20 s, cached in $OPENCLAW_HOME).
HF_HUB_OFFLINE=1 $PY -m openclaw.models prepare
