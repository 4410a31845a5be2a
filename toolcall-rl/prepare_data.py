"""Write toolcall-rl's prompt JSONL files.

    python toolcall-rl/prepare_data.py [--train-size 512] [--eval-limit 200] [--out-dir toolcall-rl/data]

train.jsonl: templated multi-step arithmetic word problems generated here (seeded).
eval.jsonl:  GSM8K test from toolcall-rl/data/gsm8k_test.json, shipped in the repo (override with GSM8K_PATH or --gsm8k).
Rows: {"input": question, "label": answer, "metadata": {"question", "answer"}}.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from toolcall_tasks import (  # run as a script: Python puts this folder first on the import path
    generate_train_set,
    load_gsm8k,
)


def _write(path: Path, tasks) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        for t in tasks:
            fh.write(json.dumps({"input": t.question, "label": t.answer,
                                 "metadata": {"question": t.question, "answer": t.answer}}) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train-size", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-limit", type=int, default=None, help="first N GSM8K questions (default: all)")
    p.add_argument("--gsm8k", default=None, help="GSM8K JSON/JSONL (default: $GSM8K_PATH or toolcall-rl/data/gsm8k_test.json)")
    p.add_argument("--out-dir", default=str(Path(__file__).resolve().parent / "data"))
    args = p.parse_args(argv)
    if args.train_size < 1:
        p.error("--train-size must be >= 1")
    out = Path(args.out_dir)
    train = generate_train_set(args.train_size, args.seed)
    _write(out / "train.jsonl", train)
    evals = load_gsm8k(args.gsm8k, args.eval_limit)
    _write(out / "eval.jsonl", evals)
    print(f"wrote {len(train)} training and {len(evals)} eval problems to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
