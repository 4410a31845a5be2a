"""Before/after table of two `gui_eval.py` reports, with a paired bootstrap CI of the change.

    python gui-rl/gui_compare.py BASE/report.json CKPT/report.json [--out compare.md]

Episodes are paired by (task, seed): both reports must hold the same held-out episodes, so the
change is measured on the same pages. The interval resamples those pairs (95%, percentile
bootstrap, the persona suite's `paired_bootstrap_delta`); with equal episodes per task the mean
over episodes is the mean over tasks that `gui_eval.py` prints.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from openclaw.demo.metrics import Interval, paired_bootstrap_delta


def _outcomes(report: dict[str, Any]) -> dict[tuple[str, int], float]:
    return {(e["task"], int(e["seed"])): float(bool(e["success"])) for e in report["episodes"]}


def compare(before: dict[str, Any], after: dict[str, Any]) -> tuple[list[tuple[str, float, float]], Interval]:
    """Per-task success (before, after, in %) and the paired change over all episodes."""
    b, a = _outcomes(before), _outcomes(after)
    if set(b) != set(a):
        missing = sorted(set(b) ^ set(a))[:5]
        raise ValueError(f"the reports hold different episodes (e.g. {missing}); evaluate both on the same "
                         "tasks and --episodes")
    keys = sorted(b)
    tasks = list(dict.fromkeys(e["task"] for e in before["episodes"]))
    rows = []
    for task in tasks:
        mine = [k for k in keys if k[0] == task]
        rows.append((task, 100 * sum(b[k] for k in mine) / len(mine), 100 * sum(a[k] for k in mine) / len(mine)))
    return rows, paired_bootstrap_delta([b[k] for k in keys], [a[k] for k in keys])


def render(rows: list[tuple[str, float, float]], delta: Interval, names: tuple[str, str]) -> str:
    lines = [f"| task | {names[0]} | {names[1]} |", "|---|---|---|"]
    lines += [f"| {task} | {x:.0f}% | {y:.0f}% |" for task, x, y in rows]
    mean_b = sum(r[1] for r in rows) / len(rows)
    mean_a = sum(r[2] for r in rows) / len(rows)
    lines.append(f"| **mean** | **{mean_b:.1f}%** | **{mean_a:.1f}%** |")
    return "\n".join(lines) + (f"\n\nchange {delta.signed()} points (paired 95% bootstrap CI over "
                               f"{delta.n} episodes)\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("--out", type=Path, default=None, help="also write the table here (Markdown)")
    args = p.parse_args(argv)
    before, after = (json.loads(path.read_text()) for path in (args.before, args.after))
    rows, delta = compare(before, after)
    text = render(rows, delta, (args.before.parent.name, args.after.parent.name))
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
