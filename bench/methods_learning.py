"""Learning benchmark of the personal-agent methods: runs the main job (`python -m openclaw.demo`)
once per configuration and writes bench/results/methods_learning.md.

    python bench/methods_learning.py                       # combine, rl, opd, rl + length-only reward
    python bench/methods_learning.py --runs combine --minutes 14
    python bench/methods_learning.py --collect demo_out/*/results.json   # only rebuild the report

Each run is a fresh process (server, judge, trainer, simulated users) on the embedded
SmolLM2-135M; numbers are the persona's own acceptance on 45 held-out prompts, the 36-question
capability probe, and KL to the base model, before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNS = {
    "combine": ["--method", "combine"],
    "rl": ["--method", "rl"],
    "opd": ["--method", "opd"],
    "rl-length": ["--method", "rl", "--reward", "length"],
}


def run_one(name: str, minutes: float, interactions: int, out: Path, extra: list[str]) -> Path:
    before = set(out.glob("*/results.json"))
    cmd = [sys.executable, "-m", "openclaw.demo", *RUNS[name], "--minutes", str(minutes),
           "--interactions", str(interactions), "--out", str(out), *extra]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=REPO, check=True)
    new = sorted(set(out.glob("*/results.json")) - before)
    if not new:
        raise RuntimeError(f"run {name} wrote no results.json under {out}")
    return new[-1]


def machine() -> str:
    cores = os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{platform.processor() or platform.machine()}, {cores} cores, load average at report time {load:.1f}"


def render(results: list[dict], command: str) -> str:
    lines = ["# Personal-agent methods: learning from simulated users (CPU)", "",
             f"Command: `{command}`  ", f"Machine: {machine()}  ", f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             "Persona 'brief' (accepts replies of at most 25 words that contain the prompt's reference facts). "
             "Acceptance, on-topic and capability in %, before -> after; KL = mean per-token KL(policy || base) "
             "on the held-out replies.", "",
             "| run | settings | interactions | steps | minutes | acceptance | short | on topic | capability | words | KL | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        b, a = r["points"][0], r["points"][-1]
        kl = "-" if a.get("kl_to_base") is None else f"{a['kl_to_base']:.3f}"
        name = r["method"] + (" + length-only reward" if r.get("reward") == "length" else "")
        settings = f"baseline {r.get('baseline', 'zero')}, KL coef {r.get('kl_coef', 0):g}, lr {r.get('lr', 0):g}"
        if r.get("w_opd") is not None:
            settings += f", w_opd {r['w_opd']:g}, w_rl {r['w_rl']:g}"
        lines.append(f"| {name} | {settings} | {r['interactions']} | {r['train_steps']} | {r['minutes']:.1f} | "
                     f"{b['acceptance']:.0f} -> {a['acceptance']:.0f} | {b['preference']:.0f} -> {a['preference']:.0f} | "
                     f"{b['on_topic']:.0f} -> {a['on_topic']:.0f} | {b['capability']:.0f} -> {a['capability']:.0f} | "
                     f"{b['mean_words']:.0f} -> {a['mean_words']:.0f} | {kl} | {r['verdict']} |")
    lines.append("")
    for r in results:
        lines.append(f"**{r['method']}{' + length' if r.get('reward') == 'length' else ''}**: {r['verdict']}: {r['reason']}  ")
        ex = r["points"][-1]["examples"][0]
        lines.append(f"after, held-out `{ex['prompt']}` -> \"{ex['reply'][:200]}\"")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", nargs="+", choices=sorted(RUNS), default=["combine", "rl", "opd", "rl-length"])
    p.add_argument("--minutes", type=float, default=14.0)
    p.add_argument("--interactions", type=int, default=320)
    p.add_argument("--out", default=str(REPO / "demo_out" / "bench"))
    p.add_argument("--report", default=str(REPO / "bench" / "results" / "methods_learning.md"))
    p.add_argument("--collect", nargs="*", default=None, help="results.json files to report instead of running")
    args, extra = p.parse_known_args(argv)
    if args.collect is not None:
        paths = [Path(x) for x in args.collect]
        command = "; ".join(json.loads(Path(x).read_text()).get("command", "?") for x in args.collect)
    else:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        paths = [run_one(name, args.minutes, args.interactions, out, extra) for name in args.runs]
        command = "python bench/methods_learning.py " + " ".join(argv if argv is not None else sys.argv[1:])
    results = [json.loads(path.read_text()) for path in paths]
    report = Path(args.report)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(render(results, command) + "\n")
    print(report.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
