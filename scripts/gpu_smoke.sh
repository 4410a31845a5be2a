#!/usr/bin/env bash
# One-GPU smoke test of the production path, in two parts. Expected output: slime/docs/megatron.md.
#  1. slime alone: megatron-core training + SGLang rollout, a 2-step GRPO run, weight sync to the
#     rollout engine, checkpoint save.
#  2. the live loop (scripts/live_smoke.py): the LoRA run script serves the model with the RL
#     intercept on the GPU, a judge scores chats, the Ray job trains 2 LoRA steps on the GPU and
#     pushes each adapter to the server, which serves the second trained version after its canary.
#
#   bash scripts/gpu_smoke.sh                 # the embedded SmolLM2-135M (local, no download)
#   MODEL_PATH=/path/to/Qwen3-0.6B bash scripts/gpu_smoke.sh
#   TP=2 bash scripts/gpu_smoke.sh            # tensor parallel over 2 GPUs (needs 2)
#   ROLLOUT_BACKEND=embedded bash scripts/gpu_smoke.sh   # no SGLang: the transformers engine on the GPU
#   TRAIN_BACKEND=fsdp bash scripts/gpu_smoke.sh         # the FSDP backend instead of megatron-core
#   LIVE=0 bash scripts/gpu_smoke.sh                      # part 1 only
#
# Installs nothing: it checks for the driver, CUDA torch and the backends' packages and says
# what is missing. Everything it writes goes to $OUT (default: a fresh /tmp folder).
set -euo pipefail
cd "$(dirname "$0")/.."

TP=${TP:-1}
STEPS=${STEPS:-2}
TRAIN_BACKEND=${TRAIN_BACKEND:-megatron}
ROLLOUT_BACKEND=${ROLLOUT_BACKEND:-sglang}
LIVE=${LIVE:-1}
case "$LIVE" in 0|1) ;; *) echo "error: LIVE must be 0 or 1, not '$LIVE'" >&2; exit 2;; esac
case "$TRAIN_BACKEND" in megatron|fsdp) ;; *) echo "error: TRAIN_BACKEND must be megatron or fsdp, not '$TRAIN_BACKEND'" >&2; exit 2;; esac
case "$ROLLOUT_BACKEND" in sglang|embedded) ;; *) echo "error: ROLLOUT_BACKEND must be sglang or embedded, not '$ROLLOUT_BACKEND'" >&2; exit 2;; esac
if [ "$TRAIN_BACKEND" = fsdp ] && [ "$TP" != 1 ]; then
  echo "error: TP=$TP needs TRAIN_BACKEND=megatron (the FSDP backend has no tensor parallelism)" >&2; exit 2
fi

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "error: nvidia-smi not found: this smoke test needs an NVIDIA GPU and its driver." >&2
  echo "       On a CPU machine run the CPU tests instead: python -m pytest -q slime/tests/test_megatron_*.py" >&2
  exit 2
fi
echo "== GPUs"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader

echo "== Python packages"
python - "$TP" "$TRAIN_BACKEND" "$ROLLOUT_BACKEND" <<'PY'
import importlib.util, sys
tp, train_backend, rollout_backend = int(sys.argv[1]), sys.argv[2], sys.argv[3]
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
needed = [("ray", "pip install -r requirements.txt")]
if train_backend == "megatron":
    needed.append(("megatron.core", "pip install megatron-core==0.16.1, or TRAIN_BACKEND=fsdp"))
if rollout_backend == "sglang":
    needed.append(("sglang", "pip install -r requirements-gpu.txt (SGLang), or ROLLOUT_BACKEND=embedded"))
for mod, hint in needed:
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
echo "== backends: train $TRAIN_BACKEND, rollout $ROLLOUT_BACKEND"
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

# slime names no engine of its own: the embedded one is the runtime's server, given by command
ENGINE_FLAGS=(--rollout-engine-command "python -m openclaw.engines.serve")
if [ "$ROLLOUT_BACKEND" = sglang ]; then
  ENGINE_FLAGS=(--sglang-mem-fraction-static 0.4 --sglang-context-length 2048)
fi
PARALLEL_FLAGS=()
if [ "$TRAIN_BACKEND" = megatron ]; then
  PARALLEL_FLAGS=(--tensor-model-parallel-size "$TP")
fi

export RAY_AUTH_MODE=disabled
set -x
python slime/train.py \
  --train-backend "$TRAIN_BACKEND" "${PARALLEL_FLAGS[@]}" \
  --hf-checkpoint "$MODEL" \
  --actor-num-gpus-per-node "$TP" --colocate \
  --rollout-backend "$ROLLOUT_BACKEND" --rollout-num-gpus "$TP" --rollout-num-gpus-per-engine "$TP" \
  "${ENGINE_FLAGS[@]}" \
  --prompt-data "$OUT/prompts.jsonl" --apply-chat-template --label-key label --rm-type math \
  --rollout-batch-size 4 --n-samples-per-prompt 4 --rollout-max-response-len 64 --rollout-temperature 1.0 \
  --num-rollout "$STEPS" --global-batch-size 16 --micro-batch-size 4 \
  --advantage-estimator grpo --lr 1e-6 --bf16 \
  --save "$OUT/ckpt" --save-interval "$STEPS" --log-dir "$OUT/logs"
set +x

echo "== checks"
python - "$OUT" "$STEPS" "$ROLLOUT_BACKEND" <<'PY'
import json, pathlib, sys
out, steps, rollout_backend = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
records = [json.loads(line) for line in (out / "logs" / "metrics.jsonl").read_text().splitlines() if line.strip()]
assert len(records) >= steps, f"expected {steps} logged steps, found {len(records)}"
for r in records:
    print(f"step {r['step']}: loss/total={r.get('loss/total')} reward/mean={r.get('reward/mean')} "
          f"gradient/norm={r.get('gradient/norm')} weights/version={r.get('weights/version')}")
assert records[-1].get("weights/version", 0) >= 1, "no weight sync happened"
ckpt = out / "ckpt" / "checkpoint-latest"
assert (ckpt / "model.safetensors").is_file() or any(ckpt.glob("model-*.safetensors")), f"no HF weights in {ckpt}"
print(f"OK: {len(records)} GRPO steps, weights synced to the {rollout_backend} engine, checkpoint at {ckpt.resolve()}")
PY

if [ "$LIVE" = 1 ]; then
  echo "== live loop"
  LIVE_BACKEND=sglang  # the server's engine: SGLang (TP GPUs), or the embedded one where SGLang is not wanted
  if [ "$ROLLOUT_BACKEND" = embedded ]; then LIVE_BACKEND=hf; fi
  # SGLang shares the card with the trainer here: leave it most of the memory
  TP="$TP" MEM_FRACTION_STATIC="${MEM_FRACTION_STATIC:-0.4}" python scripts/live_smoke.py --model "$MODEL" --backend "$LIVE_BACKEND" --steps 2 --out "$OUT/live" \
    --expect-gpu --timeout 420
fi
