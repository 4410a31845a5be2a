"""Before/after table of two `gui_eval.py` reports, with a paired bootstrap CI of the change.

    python gui-rl/gui_compare.py BASE/report.json CKPT/report.json [--out compare.md] [--actions 3]

Episodes are paired by (task, seed): both reports must hold the same held-out episodes, so the
change is measured on the same pages. The interval resamples those pairs (95%, percentile
bootstrap, the persona suite's `paired_bootstrap_delta`); with equal episodes per task the mean
over episodes is the mean over tasks that `gui_eval.py` prints.

Tasks a report lists as unplanned (the scripted policy has no plan for them) are left out of both
sides and named under the table: their episodes measure nothing.

`--actions N` adds each task's N most frequent first actions in both reports: a policy that has
collapsed onto one answer per task (`click('e15')` on every page) shows as one action with every
episode, whatever the page asked for.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from openclaw.demo.metrics import Interval, paired_bootstrap_delta


def unplanned(*reports: dict[str, Any]) -> list[str]:
    """Tasks any of the reports lists as unplanned (gui_eval's `unplanned`)."""
    return sorted({task for report in reports for task in report.get("unplanned", {})})


def _outcomes(report: dict[str, Any], skip: list[str]) -> dict[tuple[str, int], float]:
    return {(e["task"], int(e["seed"])): float(bool(e["success"])) for e in report["episodes"]
            if e["task"] not in skip}


def compare(before: dict[str, Any], after: dict[str, Any]) -> tuple[list[tuple[str, float, float]], Interval]:
    """Per-task success (before, after, in %) and the paired change over all episodes of the
    tasks neither report lists as unplanned."""
    skip = unplanned(before, after)
    b, a = _outcomes(before, skip), _outcomes(after, skip)
    if set(b) != set(a):
        missing = sorted(set(b) ^ set(a))[:5]
        raise ValueError(f"the reports hold different episodes (e.g. {missing}); evaluate both on the same "
                         "tasks and --episodes")
    keys = sorted(b)
    tasks = list(dict.fromkeys(e["task"] for e in before["episodes"] if e["task"] not in skip))
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


def frequent_actions(report: dict[str, Any], top: int) -> dict[str, list[tuple[str, int]]]:
    """Per task, its `top` most frequent first actions (`(none)` for an episode that took none)."""
    per_task: dict[str, Counter[str]] = {}
    for e in report["episodes"]:
        first = e["actions"][0] if e["actions"] else "(none)"
        per_task.setdefault(e["task"], Counter())[first] += 1
    return {task: counts.most_common(top) for task, counts in per_task.items()}


def render_actions(before: dict[str, Any], after: dict[str, Any], top: int, names: tuple[str, str]) -> str:
    b, a = frequent_actions(before, top), frequent_actions(after, top)

    def cell(pairs: list[tuple[str, int]]) -> str:
        return ", ".join(f"`{action}` x{n}" for action, n in pairs).replace("|", "\\|")

    lines = [f"| task | first actions, {names[0]} | first actions, {names[1]} |", "|---|---|---|"]
    lines += [f"| {task} | {cell(b.get(task, []))} | {cell(a.get(task, []))} |" for task in b]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("--out", type=Path, default=None, help="also write the table here (Markdown)")
    p.add_argument("--actions", type=int, default=0, metavar="N",
                   help="also list each task's N most frequent first actions in both reports")
    args = p.parse_args(argv)
    if args.actions < 0:
        p.error("--actions must be 0 or more")
    before, after = (json.loads(path.read_text()) for path in (args.before, args.after))
    rows, delta = compare(before, after)
    names = (args.before.parent.name, args.after.parent.name)
    text = render(rows, delta, names)
    if skipped := unplanned(before, after):
        text += f"\nnot compared (no scripted plan): {', '.join(skipped)}\n"
    if args.actions:
        text += "\n" + render_actions(before, after, args.actions, names)
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
