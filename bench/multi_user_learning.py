"""Several users, one server: does each user's adapter learn its own user as well as a server of its own would?

    python bench/multi_user_learning.py [--personas brief no_vague] [--minutes 14] [-- demo flags]

Runs the main job three ways in the same wall time (`--minutes`), one after the other on this
machine: `python -m openclaw.demo --personas a,b` (one server, a user per persona, an adapter and a
trainer each, stepped in turn side by side), and `--persona a`, `--persona b` alone (a server each, all of the
machine for one user). For each user: the gain of their own persona's held-out acceptance in the
two-user run against the single-user run's (target: no more than 10 points short), and how far their
adapter moved the other persona's acceptance (cross-talk; target: within 5 points), each with its
95% paired bootstrap interval. Writes bench/results/multi_user_learning.md; the plot is the
two-user run's learning.png. The last line holds the smallest own-gain margin (two-user gain minus
single-user gain, points).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OWN_GAIN_SLACK = 10.0
CROSS_TALK = 5.0


def _run(flags: list[str], out: Path, extra: list[str]) -> dict[str, Any]:
    before = set(out.glob("*/results.json"))
    cmd = [sys.executable, "-m", "openclaw.demo", *flags, "--out", str(out), *extra]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=REPO, check=True)
    new = sorted(set(out.glob("*/results.json")) - before)
    if not new:
        raise RuntimeError(f"{' '.join(flags)} wrote no results.json under {out}")
    result = json.loads(new[-1].read_text())
    result["path"] = str(new[-1])
    return result


def _ci(c: dict[str, Any]) -> str:
    return f"{c['estimate']:+.1f} [{c['low']:+.1f}, {c['high']:+.1f}]"


def _accepted(examples: list[dict[str, Any]]) -> list[float]:
    return [float(bool(e["accepted"])) for e in examples]


def alone_cross(result: dict[str, Any], persona: str) -> tuple[list[float], list[float]]:
    """A single-user run's first and last held-out replies, judged by another `persona`: how far
    that user's model alone moves the other persona's acceptance (the personas' preferences overlap:
    shorter replies also hold fewer vague phrases)."""
    from openclaw.demo.evaluate import heldout_prompts, judge_examples
    from openclaw.demo.personas import load_persona

    first, last = result["points"][0]["examples"], result["points"][-1]["examples"]
    heldout = heldout_prompts()[: len(first)]
    judge = load_persona(persona)
    return _accepted(judge_examples(judge, first, heldout)), _accepted(judge_examples(judge, last, heldout))


def report(users: dict[str, Any], single: dict[str, dict[str, Any]], command: str) -> tuple[list[str], float, float]:
    """Markdown lines, the smallest own-gain margin and the largest cross-talk beyond what the
    user's model alone does to the other persona (points)."""
    from openclaw.demo.metrics import paired_bootstrap_delta

    rows = {r["user"]: r for r in users["table"]}
    first, last = users["points"][0], users["points"][-1]
    lines = [f"`{command}`", "",
             f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average at "
             f"report time {os.getloadavg()[0]:.1f}. Two-user run: {users['path']}.", "",
             "| user | own acceptance gain, two users | alone | margin | other persona's acceptance change: two "
             "users (cross-talk) / alone / two users beyond alone | capability | on topic | steps, two users / alone |",
             "|---|---|---|---|---|---|---|---|"]
    margins, beyond_all = [], []
    for user, r in rows.items():
        alone = single[user]["metrics"]["acceptance"]["delta"]
        margin = r["own"]["estimate"] - alone["estimate"]
        margins.append(margin)
        cells = []
        for other, c in r["cross"].items():
            two = [a - b for b, a in zip(_accepted(first[user]["judged"][other]), _accepted(last[user]["judged"][other]),
                                         strict=True)]
            ab, aa = alone_cross(single[user], other)
            solo = paired_bootstrap_delta(ab, aa).to_dict()
            beyond = paired_bootstrap_delta([a - b for b, a in zip(ab, aa, strict=True)], two).to_dict()
            beyond_all.append(abs(beyond["estimate"]))
            cells.append(f"{other} {_ci(c)} / {_ci(solo)} / {_ci(beyond)}")
        steps = f"{len(users['steps'][user])} / {single[user]['train_steps']}"
        lines.append(f"| {user} | {_ci(r['own'])} | {_ci(alone)} | {margin:+.1f} | " + ", ".join(cells)
                     + f" | {_ci(r['capability']) if r['capability'] else '-'} | {_ci(r['on_topic'])} | {steps} |")
    lines += ["", f"Targets: margin >= -{OWN_GAIN_SLACK:g} points for every user; cross-talk within "
                  f"+-{CROSS_TALK:g} points. Intervals: 95% paired bootstrap over the held-out prompts. \"beyond "
                  "alone\" is, prompt by prompt, the two-user change minus the change the user's model made alone: "
                  "what sharing the server added."]
    return lines, min(margins), max(beyond_all, default=0.0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--personas", nargs="+", default=["brief", "no_vague"])
    p.add_argument("--minutes", type=float, default=14.0, help="each run's interaction/training budget")
    p.add_argument("--out", default=str(REPO / "demo_out" / "multi_user_learning"))
    p.add_argument("--report", default=str(REPO / "bench" / "results" / "multi_user_learning.md"))
    p.add_argument("--reuse", nargs="+", metavar="RESULTS_JSON", default=None,
                   help="report from finished runs instead of running: the two-user run's results.json, then one "
                        "per persona (in --personas order)")
    p.add_argument("demo", nargs=argparse.REMAINDER, help="after --: flags for every demo run")
    args = p.parse_args(argv)
    if len(args.personas) < 2:
        p.error("--personas needs two or more")
    if args.reuse is not None:
        if len(args.reuse) != len(args.personas) + 1:
            p.error(f"--reuse takes {len(args.personas) + 1} results.json files (the two-user run, then one per persona)")
        loaded = [{**json.loads(Path(f).read_text()), "path": str(Path(f).resolve())} for f in args.reuse]
        users, single = loaded[0], dict(zip(args.personas, loaded[1:], strict=True))
    else:
        extra = [a for a in args.demo if a != "--"] + ["--minutes", str(args.minutes)]
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        users = _run(["--personas", ",".join(args.personas)], out, extra)
        single = {name: _run(["--persona", name], out, extra) for name in args.personas}
    command = "python bench/multi_user_learning.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines, margin, cross = report(users, single, command)
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"RESULT smallest own-gain margin (two users - alone) = {margin:+.1f} points; largest cross-talk beyond "
          f"what the user's model does alone {cross:.1f} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
