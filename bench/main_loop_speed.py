"""Speed of the main job's learning loop: training steps and interactions per minute of the
chat/training phase, this tree against a baseline commit, run alternately on the same machine.

    python bench/main_loop_speed.py --baseline-ref 7f4d178                  # 2 rounds x 6 min each
    python bench/main_loop_speed.py --baseline-ref HEAD --rounds 1 --minutes 3 -- --model-path PATH

Each run is `python -m openclaw.demo` at its default settings with a shorter budget (--minutes)
and one evaluation point (the bench measures speed, not learning): the baseline from a git
worktree of `--baseline-ref` (its own code first on PYTHONPATH), this tree with `--profile`, so
the report also gives this tree's per-phase profile and its freshness (turn answered -> served
weights trained on it). Arguments after `--` go to both runs. The rate is the run's training
steps (and interactions) over its phase's budget: both runs spend the whole budget (the demo
stops talking at the deadline) unless `--interactions` ends one first, which the report flags.
The last line is the ratio this tree / baseline of both rates (medians over rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def worktree(ref: str, into: Path) -> Path:
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(into), ref], check=True,
                   capture_output=True, text=True)
    return into


def run_demo(code: Path, out: Path, minutes: float, extra: list[str], profile: bool) -> dict[str, Any]:
    """One main-job run from the tree at `code`; returns its results.json."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(code), str(code / "slime")]))
    cmd = [sys.executable, "-m", "openclaw.demo", "--minutes", str(minutes), "--evals", "1", "--out", str(out),
           *(["--profile"] if profile else []), *extra]
    print(f"$ (in {code}) {' '.join(cmd)}", flush=True)
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=code, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"run failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    (result,) = out.glob("*/results.json")
    data = json.loads(result.read_text())
    data["_process_s"] = time.monotonic() - t0
    return data


def rates(result: dict[str, Any], minutes: float) -> dict[str, float]:
    return {"steps_per_min": result["train_steps"] / minutes, "interactions_per_min": result["interactions"] / minutes,
            "steps": result["train_steps"], "interactions": result["interactions"]}


def main() -> int:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline-ref", required=True, help="git commit (or branch) of the baseline")
    p.add_argument("--rounds", type=int, default=2, help="baseline + this tree pairs, order alternating")
    p.add_argument("--minutes", type=float, default=6.0, help="chat/training budget of every run")
    p.add_argument("--out", default=str(REPO / "bench" / "results" / "main_loop_speed.md"))
    p.add_argument("--workdir", default=None, help="where runs write (default: a temp folder, removed after)")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.minutes <= 0:
        p.error("--rounds and --minutes must be positive")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="main_loop_speed_"))
    base_tree = worktree(args.baseline_ref, work / "baseline-tree")
    load_before = os.getloadavg()
    rows: list[tuple[str, int, dict[str, float]]] = []
    profiles: list[dict[str, Any]] = []
    try:
        for r in range(args.rounds):
            order = [("baseline", base_tree), ("this tree", REPO)]
            for name, code in order if r % 2 == 0 else order[::-1]:
                res = run_demo(code, work / f"{name.replace(' ', '_')}-{r}", args.minutes, extra, profile=code == REPO)
                rows.append((name, r, {**rates(res, args.minutes), "load": os.getloadavg()[0]}))
                if code == REPO:
                    profiles.append({"profile": res.get("profile"), "freshness": res.get("freshness")})
                print(f"  {name}, round {r + 1}: {rows[-1][2]['steps']} steps, {rows[-1][2]['interactions']} "
                      f"interactions in {args.minutes:g} min", flush=True)
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base_tree)], capture_output=True)

    def median(name: str, key: str) -> float:
        return statistics.median(v[key] for n, _, v in rows if n == name)

    ratio = {k: median("this tree", k) / max(median("baseline", k), 1e-9) for k in ("steps_per_min", "interactions_per_min")}
    fresh = [p["freshness"] for p in profiles if p["freshness"] and p["freshness"].get("turns")]
    lines = [f"# main_loop_speed: this tree vs {args.baseline_ref}", "",
             f"Command: `python bench/main_loop_speed.py {' '.join(sys.argv[1:])}`", "",
             f"Machine: {platform.platform()}, {os.cpu_count()} CPUs; measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
             f"load average before {load_before[0]:.1f}", "",
             "| run | round | steps | interactions | steps/min | interactions/min | load after |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {n} | {r + 1} | {v['steps']:.0f} | {v['interactions']:.0f} | {v['steps_per_min']:.2f} | "
              f"{v['interactions_per_min']:.1f} | {v['load']:.1f} |" for n, r, v in rows]
    if fresh:
        lines += ["", "Freshness of this tree (turn answered -> served weights trained on it), per round: "
                  + "; ".join(f"median {f['median_s']:.0f} s, p90 {f['p90_s']:.0f} s" for f in fresh)]
    last_profile = next((p["profile"] for p in reversed(profiles) if p["profile"]), None)
    if last_profile:
        lines += ["", "Profile of this tree's last run (openclaw/demo/profile.py):", ""]
        lines += [f"- {r['phase']}: {r['per_step']:.2f} s per step"
                  + (f", {r['gflops']:.1f} GFLOP/s ({100 * r['share_of_peak']:.0f}% of peak)" if r["gflops"] else "")
                  for r in last_profile["phases"]]
    head = (f"RATIO this tree/baseline: steps per minute = {ratio['steps_per_min']:.2f}, "
            f"interactions per minute = {ratio['interactions_per_min']:.2f}")
    lines += ["", f"**{head}**"]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines[6:-2]))
    print(head)
    return 0


if __name__ == "__main__":
    sys.exit(main())
