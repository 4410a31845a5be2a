"""Write the trainer's prompt JSONL for gui-rl: one row per (task, training seed).

    python gui-rl/prepare_data.py [--tasks NAME ...] [--seeds-per-task 50] [--out gui-rl/data/train.jsonl]

Each row: {"input": task name, "label": task name, "metadata": {"task", "seed"}}. The page (and
so the goal) is made by the seed when the episode starts; seeds come from TRAIN_SEEDS only.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from gui_tasks import TASKS, TRAIN_SEEDS, resolve_task_names  # run as a script: this folder is on the path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="*", default=[t.name for t in TASKS], help="names, or one-step / train / all")
    p.add_argument("--seeds-per-task", type=int, default=50)
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "data" / "train.jsonl"))
    args = p.parse_args(argv)
    tasks = resolve_task_names(args.tasks)
    rng = random.Random(0)  # a fixed draw from the training range: the same file every time
    rows = [{"input": t, "label": t, "metadata": {"task": t, "seed": rng.choice(TRAIN_SEEDS)}}
            for t in tasks for _ in range(args.seeds_per_task)]
    rng.shuffle(rows)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {len(rows)} episodes ({len(tasks)} tasks) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
