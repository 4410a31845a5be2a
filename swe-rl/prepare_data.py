"""Write the trainer's prompt JSONL from SWE instances.

    python swe-rl/prepare_data.py [--split train] [--swe-bench-path FILE_OR_DIR] [--ids ...] [--out swe-rl/data/train.jsonl]

Each row: {"input": problem_statement, "label": instance_id, "metadata": {"instance_id", "instance"}};
the whole instance travels in the metadata (minus nothing: the gold patch is needed to rebuild
the base repository of shipped instances, and is never shown to the agent).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# Run as a script (`python swe-rl/prepare_data.py`): Python puts this folder first on the path.
from swe_bench import SweBenchPath
from swe_instances import shipped_instances


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--split", default="train", choices=["train", "heldout"], help="shipped split")
    p.add_argument("--swe-bench-path", default=None, help="a SWE-bench file/folder instead of the shipped instances")
    p.add_argument("--ids", nargs="*", default=None, help="only these instance ids")
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "data" / "train.jsonl"))
    args = p.parse_args(argv)
    rows = SweBenchPath.parse(args.swe_bench_path).load() if args.swe_bench_path else shipped_instances(args.split)
    if args.ids:
        missing = set(args.ids) - {i.instance_id for i in rows}
        if missing:
            p.error(f"unknown instance ids: {sorted(missing)}")
        rows = [i for i in rows if i.instance_id in set(args.ids)]
    if args.limit:
        rows = rows[: args.limit]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as fh:
        for inst in rows:
            fh.write(json.dumps({"input": inst.problem_statement, "label": inst.instance_id,
                                 "metadata": {"instance_id": inst.instance_id, "instance": inst.to_dict()}}) + "\n")
    print(f"wrote {len(rows)} instances to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
