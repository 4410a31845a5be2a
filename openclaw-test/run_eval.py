"""Evaluate a model folder or checkpoint with the personal-agent harness (openclaw.demo.evaluate).

    python openclaw-test/run_eval.py --model-path $CKPT_SAVE_DIR/checkpoint-latest \
        [--eval-tasks conversation,capability,kl] [--base-model-path PATH] [--out results.json]

Tasks:
  conversation  the "brief" persona's own rule on its held-out prompts (acceptance = short AND
                on topic; on-topic rate; mean words), greedy replies from the embedded engine
  capability    the fixed capability probe (short questions with known answers)
  kl            mean per-token KL(model || base) on the held-out replies (checkpoints holding a
                LoRA adapter: the base is the adapter's base model)
Tasks this repository has no benchmark for (e.g. coding, tool-use) are reported as skipped,
with the list of supported ones.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

SUPPORTED = ("conversation", "capability", "kl")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="openclaw-test/run_eval.sh", description="Evaluate a model or checkpoint.")
    p.add_argument("--model-path", default=os.environ.get("MODEL_PATH") or None,
                   help="HF model folder, PEFT adapter folder, or a checkpoint (default: $MODEL_PATH, else the embedded model)")
    p.add_argument("--eval-tasks", default="conversation,capability,kl", help=f"comma-separated; supported: {', '.join(SUPPORTED)}")
    p.add_argument("--max-tokens", type=int, default=100)
    p.add_argument("--limit", type=int, default=None, help="only the first N prompts/questions of each set")
    p.add_argument("--out", default=None, help="also write the results as JSON here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tasks = [t.strip() for t in args.eval_tasks.split(",") if t.strip()]
    run = [t for t in tasks if t in SUPPORTED]
    skipped = [t for t in tasks if t not in SUPPORTED]
    if skipped:
        print(f"skipped: {', '.join(skipped)} (no benchmark for them in this repository; supported: {', '.join(SUPPORTED)})",
              file=sys.stderr)
    if not run:
        print("error: none of the requested --eval-tasks is supported", file=sys.stderr)
        return 2
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    from openclaw.demo import evaluate as ev
    from openclaw.demo.personas import PERSONAS
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.models import resolve_model_path
    from openclaw.server.app import create_app
    from openclaw.server.config import ServerConfig
    from openclaw.server.runner import serve_in_background

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    model_path = str(resolve_model_path(args.model_path)) if not args.model_path else args.model_path
    if not Path(model_path).exists():
        print(f"error: --model-path {model_path} does not exist", file=sys.stderr)
        return 2
    model_path = str(Path(model_path).resolve())
    engine = HFEngine.load(model_path, dtype="float32", device="cpu", max_batch_size=16)
    server = serve_in_background(create_app(ServerConfig(), engine=engine))
    try:
        heldout = ev.heldout_prompts()[: args.limit] if "conversation" in run or "kl" in run else []
        probe = ev.load_probe()[: args.limit] if "capability" in run else []
        kl_model = _peft_model(model_path) if "kl" in run else None
        point = ev.evaluate(server.base_url, engine.tokenizer, PERSONAS["brief"], heldout, probe, interactions=0,
                            weight_version=0, max_tokens=args.max_tokens, kl_model=kl_model)
    finally:
        server.stop()
        asyncio.run(engine.shutdown())
    result = {"model_path": model_path, "tasks": run, "skipped": skipped}
    if "conversation" in run:
        result["conversation"] = {"acceptance": point.acceptance, "preference": point.preference,
                                  "on_topic": point.on_topic, "mean_words": point.mean_words, "n": len(heldout)}
    if "capability" in run:
        result["capability"] = {"accuracy": point.capability, "n": len(probe)}
    if "kl" in run:
        result["kl"] = {"kl_to_base": point.kl_to_base,
                        "note": None if point.kl_to_base is not None else "not a LoRA checkpoint: no base to compare"}
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
    return 0


def _peft_model(path: str):
    """The checkpoint as a PEFT model (adapter on its base), or None for a full model folder."""
    if not (Path(path) / "adapter_config.json").is_file():
        return None
    from peft import PeftConfig, PeftModel
    from transformers import AutoModelForCausalLM

    base = PeftConfig.from_pretrained(path).base_model_name_or_path
    model = AutoModelForCausalLM.from_pretrained(base, dtype="float32")
    return PeftModel.from_pretrained(model, path)


if __name__ == "__main__":
    sys.exit(main())
