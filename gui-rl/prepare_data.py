"""Write the trainer's prompt JSONL for gui-rl: one row per (task, training seed).

    python gui-rl/prepare_data.py [--tasks NAME ...] [--seeds-per-task 50] [--out gui-rl/data/train.jsonl]
        [--rehearsal-tasks NAME ... --rehearsal-seeds-per-task 10]

Rehearsal tasks are ones the model already solves, kept in the data at a smaller share so that
training on the others cannot silently unlearn them: while they stay solved, their groups all earn
1 and carry no GRPO advantage; once the policy starts failing them they carry the gradient back.
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

REHEARSAL_SEEDS_PER_TASK = 10


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="*", default=[t.name for t in TASKS], help="names, or one-step / train / all")
    p.add_argument("--seeds-per-task", type=int, default=50)
    p.add_argument("--rehearsal-tasks", nargs="*", default=[], help="names, or one-step / train / all")
    p.add_argument("--rehearsal-seeds-per-task", type=int, default=None,
                   help=f"seeds per rehearsal task (default {REHEARSAL_SEEDS_PER_TASK})")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "data" / "train.jsonl"))
    args = p.parse_args(argv)
    tasks = resolve_task_names(args.tasks)
    rehearsal = resolve_task_names(args.rehearsal_tasks)
    if overlap := sorted(set(tasks) & set(rehearsal)):
        p.error(f"tasks both trained and rehearsed: {', '.join(overlap)}")
    if args.rehearsal_seeds_per_task is not None and not rehearsal:
        p.error("--rehearsal-seeds-per-task needs --rehearsal-tasks")
    rehearsal_seeds = (REHEARSAL_SEEDS_PER_TASK if args.rehearsal_seeds_per_task is None
                       else args.rehearsal_seeds_per_task)
    rng = random.Random(0)  # a fixed draw from the training range: the same file every time
    counts = [(t, args.seeds_per_task) for t in tasks] + [(t, rehearsal_seeds) for t in rehearsal]
    rows = [{"input": t, "label": t, "metadata": {"task": t, "seed": rng.choice(TRAIN_SEEDS)}}
            for t, n in counts for _ in range(n)]
    rng.shuffle(rows)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {len(rows)} episodes ({len(tasks)} tasks, {len(rehearsal)} rehearsed) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
