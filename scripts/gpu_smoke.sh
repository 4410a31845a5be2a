#!/usr/bin/env bash
# One-GPU smoke test of the production path: megatron-core training + SGLang rollout,
# a 2-step GRPO run, weight sync to SGLang, checkpoint save. Expected output: slime/docs/megatron.md.
#
#   bash scripts/gpu_smoke.sh                 # the embedded SmolLM2-135M (local, no download)
#   MODEL_PATH=/path/to/Qwen3-0.6B bash scripts/gpu_smoke.sh
#   TP=2 bash scripts/gpu_smoke.sh            # tensor parallel over 2 GPUs (needs 2)
#
# Installs nothing: it checks for the driver, CUDA torch, megatron-core and SGLang and says
# what is missing. Everything it writes goes to $OUT (default: a fresh /tmp folder).
set -euo pipefail
cd "$(dirname "$0")/.."

TP=${TP:-1}
STEPS=${STEPS:-2}

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "error: nvidia-smi not found: this smoke test needs an NVIDIA GPU and its driver." >&2
  echo "       On a CPU machine run the CPU tests instead: python -m pytest -q slime/tests/test_megatron_*.py" >&2
  exit 2
fi
echo "== GPUs"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader

echo "== Python packages"
python - "$TP" <<'PY'
import importlib.util, sys
tp = int(sys.argv[1])
missing = []
try:
    import torch
except ImportError:
    sys.exit("error: torch is not installed (pip install -r requirements.txt, then a CUDA build of torch)")
print(f"torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}, devices: {torch.cuda.device_count()}")
if not torch.cuda.is_available():
    missing.append("a CUDA build of torch (this one is CPU-only: pip install torch==<version>+cu12x from the PyTorch index)")
elif torch.cuda.device_count() < tp:
    missing.append(f"{tp} GPUs for TP={tp} (found {torch.cuda.device_count()})")
for mod, hint in (("megatron.core", "pip install megatron-core==0.16.1"),
                  ("sglang", "pip install -r requirements-gpu.txt (SGLang)")):
    if importlib.util.find_spec(mod) is None:
        missing.append(f"{mod}: {hint}")
    else:
        m = importlib.import_module(mod)
        print(f"{mod} {getattr(m, '__version__', '?')}")
if missing:
    print("error: missing prerequisites:\n  - " + "\n  - ".join(missing), file=sys.stderr)
    sys.exit(3)
PY

MODEL=${MODEL_PATH:-$(python -m openclaw.models path)}
OUT=${OUT:-$(mktemp -d /tmp/openclaw-gpu-smoke.XXXXXX)}
mkdir -p "$OUT"
echo "== model: $MODEL"
echo "== output: $OUT"

# 8 arithmetic prompts with answers: the built-in math reward scores \boxed{} / last number
python - "$OUT/prompts.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for a, b in [(2, 3), (4, 5), (7, 1), (6, 6), (9, 2), (3, 8), (5, 5), (1, 1)]:
        f.write(json.dumps({"input": [{"role": "user", "content": f"What is {a}+{b}? Answer with the number only."}],
                            "label": str(a + b)}) + "\n")
PY

export RAY_AUTH_MODE=disabled
set -x
python slime/train.py \
  --train-backend megatron --tensor-model-parallel-size "$TP" \
  --hf-checkpoint "$MODEL" \
  --actor-num-gpus-per-node "$TP" --colocate \
  --rollout-backend sglang --rollout-num-gpus "$TP" --rollout-num-gpus-per-engine "$TP" \
  --sglang-mem-fraction-static 0.4 --sglang-context-length 2048 \
  --prompt-data "$OUT/prompts.jsonl" --apply-chat-template --label-key label --rm-type math \
  --rollout-batch-size 4 --n-samples-per-prompt 4 --rollout-max-response-len 64 --rollout-temperature 1.0 \
  --num-rollout "$STEPS" --global-batch-size 16 --micro-batch-size 4 \
  --advantage-estimator grpo --lr 1e-6 --bf16 \
  --save "$OUT/ckpt" --save-interval "$STEPS" --log-dir "$OUT/logs"
set +x

echo "== checks"
python - "$OUT" "$STEPS" <<'PY'
import json, pathlib, sys
out, steps = pathlib.Path(sys.argv[1]), int(sys.argv[2])
records = [json.loads(line) for line in (out / "logs" / "metrics.jsonl").read_text().splitlines() if line.strip()]
assert len(records) >= steps, f"expected {steps} logged steps, found {len(records)}"
for r in records:
    print(f"step {r['step']}: loss/total={r.get('loss/total')} reward/mean={r.get('reward/mean')} "
          f"gradient/norm={r.get('gradient/norm')} weights/version={r.get('weights/version')}")
assert records[-1].get("weights/version", 0) >= 1, "no weight sync happened"
ckpt = out / "ckpt" / "checkpoint-latest"
assert (ckpt / "model.safetensors").is_file() or any(ckpt.glob("model-*.safetensors")), f"no HF weights in {ckpt}"
print(f"OK: {len(records)} GRPO steps, weights synced to SGLang, checkpoint at {ckpt.resolve()}")
PY
