"""Write the trainer's prompt JSONL from terminal tasks.

    python terminal-rl/prepare_data.py [--tasks PATH] [--out terminal-rl/data/train.jsonl]

Each row: {"input": instruction, "label": task id, "metadata": {"task_id", "task": {...}}}; the
whole task travels in the metadata so rollout workers need no access to the task files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from terminal_tasks import load_tasks  # run as a script: Python puts this folder first on the import path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default=None, help="task file or folder (default: terminal-rl/tasks)")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "data" / "train.jsonl"))
    p.add_argument("--ids", nargs="*", default=None, help="only these task ids")
    args = p.parse_args(argv)
    tasks = load_tasks(args.tasks)
    if args.ids:
        missing = set(args.ids) - {t.id for t in tasks}
        if missing:
            p.error(f"unknown task ids: {sorted(missing)}")
        tasks = [t for t in tasks if t.id in set(args.ids)]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as fh:
        for t in tasks:
            task = t.to_dict()
            task.pop("solution")  # reference solutions stay out of training data
            fh.write(json.dumps({"input": t.instruction, "label": t.id,
                                 "metadata": {"task_id": t.id, "task": task}}) + "\n")
    print(f"wrote {len(tasks)} tasks to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
