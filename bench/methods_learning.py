"""Learning benchmark of the personal-agent methods: runs the main job (`python -m openclaw.demo`)
once per persona x method (x seed) and writes bench/results/methods_learning.md.

    python bench/methods_learning.py                 # the 6-persona suite x combine, rl, opd (+ rl-length)
    python bench/methods_learning.py --personas brief lowercase --methods combine --seeds 0 1 2
    python bench/methods_learning.py --collect demo_out/bench/*/results.json   # only rebuild the report
    python bench/methods_learning.py --personas brief --interactions 320       # other flags go to every demo run

A user is one persona, so every persona is its own run (own server, judge, trainer, adapter) on
the embedded SmolLM2-135M. The default persona runs once per `--seeds` value, the others once
(the first seed). `rl-length` (binary RL on a length-only reward: the reward-hacking check, which
must end FAILED) runs once, for the default persona only. Numbers are the persona's acceptance on 45
held-out prompts with a 95% paired-bootstrap CI, the reference project's metric (sessions until
the preference holds in 3 consecutive live sessions), the 36-question capability probe and
on-topic deltas, and KL to the base model. The last printed line is each method's acceptance gain
(after - before, points; the median over its runs): a learning benchmark compares a run with its own
base model, so its headline is a difference, not a ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from openclaw.demo.metrics import learning_metrics
from openclaw.demo.personas import DEFAULT_PERSONA, load_persona, persona_names

REPO = Path(__file__).resolve().parents[1]

RUNS = {
    "combine": ["--method", "combine"],
    "rl": ["--method", "rl"],
    "opd": ["--method", "opd"],
    "rl-length": ["--method", "rl", "--reward", "length"],
}
# Six personas of different kinds that a 135M model can plausibly learn by surface form (chosen from
# the base model's acceptance, before any training run: openclaw/demo/README.md). `--personas all`
# adds signoff and bullets, whose structure the base model never produces within the token cap.
SUITE = ["brief", "one_sentence", "no_commas", "no_vague", "because", "lowercase"]
TARGET = 25.0  # acceptance points combine must gain (the persona-suite target)
RL_TARGET = 10.0  # ... and binary RL alone


def run_one(persona: str, method: str, seed: int, out: Path, extra: list[str]) -> Path:
    """One demo run; `extra` (e.g. --interactions, --minutes) goes to the demo, whose defaults apply otherwise."""
    before = set(out.glob("*/results.json"))
    cmd = [sys.executable, "-m", "openclaw.demo", "--persona", persona, *RUNS[method], "--seed", str(seed),
           "--out", str(out), *extra]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=REPO, check=True)
    new = sorted(set(out.glob("*/results.json")) - before)
    if not new:
        raise RuntimeError(f"run {persona}/{method}/seed {seed} wrote no results.json under {out}")
    return new[-1]


def plan(personas: list[str], methods: list[str], seeds: list[int]) -> list[tuple[str, str, int]]:
    runs = []
    for persona in personas:
        for method in methods:
            if method == "rl-length" and persona != DEFAULT_PERSONA:
                continue  # the length-only reward is the default persona's preference, blind to content
            for seed in (seeds if persona == DEFAULT_PERSONA and method != "rl-length" else seeds[:1]):
                runs.append((persona, method, seed))
    return runs


def machine() -> str:
    cores = os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{platform.processor() or platform.machine()}, {cores} cores, load average at report time {load:.1f}"


# --- one run's row ---------------------------------------------------------------------------

def _persona_name(r: dict[str, Any]) -> str:
    p = r.get("persona")
    if isinstance(p, dict):
        return str(p.get("name", "-"))
    return "brief (old rule)"  # runs before personas were data: <= 25 whitespace-separated words


def _method_name(r: dict[str, Any]) -> str:
    return r["method"] + ("-length" if r.get("reward") == "length" else "")


def _fmt_ci(c: dict[str, Any] | None, signed: bool = False) -> str:
    if not c:
        return "-"
    if signed:
        return f"{c['estimate']:+.1f} [{c['low']:+.1f}, {c['high']:+.1f}]"
    return f"{c['estimate']:.1f} [{c['low']:.1f}, {c['high']:.1f}]"


def sessions_from_buffer(run_dir: Path, persona_name: str) -> list[dict[str, Any]] | None:
    """Live sessions of a run that predates `sessions` in results.json, rebuilt from its trajectory
    buffer: session `demo-user-<i>` is the i-th started (the users' tasks were created and admitted
    in index order), accepted when the user's answer was one of the persona's acceptance phrasings
    (the persona's verdict on the live reply, as the user told it)."""
    from openclaw.buffer import TrajectoryBuffer

    if not (run_dir / "rl_buffer").is_dir():
        return None
    accepted = set(load_persona(persona_name).feedback.accepted)
    buf = TrajectoryBuffer.open(run_dir / "rl_buffer")
    try:
        out = []
        for sid in buf.session_ids():
            if not sid.startswith("demo-user-"):
                continue
            turns = [t for t in buf.session_turns(sid) if t.turn_type == "main" and t.next_state]
            if turns:
                out.append({"n": int(sid.rsplit("-", 1)[1]) + 1,
                            "accepted": str(turns[0].next_state.get("content", "")) in accepted})
    finally:
        buf.close()
    return sorted(out, key=lambda x: x["n"]) or None


def load_result(path: Path) -> dict[str, Any]:
    r = json.loads(path.read_text())
    if "sessions" not in r:
        sessions = sessions_from_buffer(path.parent, "brief" if "persona" not in r else r["persona"]["name"])
        if sessions:
            r["sessions"] = sessions
            r["sessions_note"] = "rebuilt from the run's trajectory buffer"
    return r


def row_metrics(r: dict[str, Any]) -> dict[str, Any]:
    """results.json's `metrics`, or rebuilt from its points and sessions (older runs)."""
    return r.get("metrics") or learning_metrics(r["points"], r.get("sessions"))


def row(r: dict[str, Any]) -> str:
    m = row_metrics(r)
    acc = m.get("acceptance")
    b, a = r["points"][0], r["points"][-1]
    before_after = (f"{_fmt_ci(acc['before'])} -> {_fmt_ci(acc['after'])}" if acc
                    else f"{b['acceptance']:.1f} -> {a['acceptance']:.1f}")
    delta = _fmt_ci(acc["delta"], signed=True) if acc else f"{a['acceptance'] - b['acceptance']:+.1f}"
    s3 = m.get("sessions_to_3")
    kl = "-" if a.get("kl_to_base") is None else f"{a['kl_to_base']:.3f}"
    cap = f"{b['capability']:.0f} -> {a['capability']:.0f} ({a['capability'] - b['capability']:+.0f})"
    topic = f"{b['on_topic']:.0f} -> {a['on_topic']:.0f} ({a['on_topic'] - b['on_topic']:+.0f})"
    return (f"| {_persona_name(r)} | {_method_name(r)} | {r.get('seed', '-')} | {r['interactions']} | {before_after} | "
            f"{delta} | {s3['text'] if s3 else '-'} | {cap} | {topic} | {kl} | {r['verdict']} | "
            f"{r['minutes']:.1f} | `{r.get('command', '-')}` |")


# --- the summary -------------------------------------------------------------------------------

def _delta(r: dict[str, Any]) -> float:
    return r["points"][-1]["acceptance"] - r["points"][0]["acceptance"]


def summary(results: list[dict[str, Any]]) -> list[str]:
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        by.setdefault((_persona_name(r), _method_name(r)), []).append(r)
    lines = ["## Summary", ""]
    methods = sorted({m for _, m in by})
    personas = sorted({p for p, _ in by}, key=lambda p: (p != DEFAULT_PERSONA, p))
    lines.append("Acceptance gain per persona (points; the median over seeds where there are several) and the "
                 "reference's metric (sessions until 3 consecutive accepted live sessions; first seed).")
    lines.append("")
    lines.append("| persona | " + " | ".join(methods) + " |")
    lines.append("|---|" + "---|" * len(methods))
    for p in personas:
        cells = []
        for m in methods:
            runs = by.get((p, m))
            if not runs:
                cells.append("-")
                continue
            med = statistics.median(_delta(r) for r in runs)
            s3 = row_metrics(runs[0]).get("sessions_to_3")
            flag = " FAILED" if any(r["verdict"].startswith("FAILED") for r in runs) else ""
            cells.append(f"{med:+.1f}{flag}, s3 {s3['text'] if s3 else '-'}")
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    lines.append("")
    for m, target in (("combine", TARGET), ("rl", RL_TARGET)):
        ps = [p for p in personas if (p, m) in by]
        if not ps:
            continue
        ok = [p for p in ps if statistics.median(_delta(r) for r in by[(p, m)]) >= target
              and not any(r["verdict"].startswith("FAILED") for r in by[(p, m)])]
        lines.append(f"- **{m}**: {len(ok)} of {len(ps)} personas gain >= +{target:.0f} points without being flagged "
                     f"({', '.join(ok) or 'none'}).")
    for (p, m), runs in sorted(by.items()):
        if len(runs) > 1:
            d = [_delta(r) for r in runs]
            lines.append(f"- **{p} / {m}** over {len(runs)} seeds: acceptance gain median {statistics.median(d):+.1f}, "
                         f"mean {statistics.mean(d):+.1f} +- {statistics.stdev(d):.1f} (sd) points; "
                         "sessions to 3: " + ", ".join((row_metrics(r).get('sessions_to_3') or {}).get('text', '-')
                                                        for r in runs) + ".")
    lines.append("")
    return lines


def render(results: list[dict[str, Any]], command: str) -> str:
    lines = ["# Personal-agent methods: learning from simulated users (CPU)", "",
             f"Command: `{command}`  ", f"Machine: {machine()}  ",
             f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             "Each row is one run of the main job: one persona (its IFEval instructions AND the prompt's reference "
             "facts decide acceptance), one method, one seed. Acceptance in % on the held-out prompts, before -> "
             "after with 95% bootstrap CIs over prompts; the change with a paired-bootstrap CI. s3 = the reference "
             "project's metric: the session (in start order) that completes the first 3 consecutive accepted live "
             "sessions, or 'not reached (> N)'. Capability and on topic in %, before -> after (change). KL = mean "
             "per-token KL(policy || base) on the held-out replies. '-' = not recorded by that run.", ""]
    lines += summary(results)
    lines += ["## Runs", "",
              "| persona | method | seed | interactions | acceptance before -> after [95% CI] | change [CI] | s3 | "
              "capability | on topic | KL | verdict | minutes | command |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [row(r) for r in results]
    lines.append("")
    for r in results:
        lines.append(f"**{_persona_name(r)} / {_method_name(r)} / seed {r.get('seed', '-')}**: {r['verdict']}: "
                     f"{r['reason']}  ")
        ex = r["points"][-1]["examples"][0]
        lines.append(f"after, held-out `{ex['prompt']}` -> \"{ex['reply'][:200]}\"")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    names = persona_names()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--personas", nargs="+", default=SUITE,
                   help=f"shipped persona names or persona files, or 'all' ({' '.join(names)}); "
                        f"default: {' '.join(SUITE)}")
    p.add_argument("--methods", nargs="+", choices=sorted(RUNS), default=["combine", "rl", "opd", "rl-length"],
                   help="rl-length runs for the default persona only")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2],
                   help="seeds of the default persona's runs; the other personas run with the first")
    p.add_argument("--out", default=str(REPO / "demo_out" / "bench"))
    p.add_argument("--report", default=str(REPO / "bench" / "results" / "methods_learning.md"))
    p.add_argument("--collect", nargs="*", default=None, help="results.json files to report instead of running")
    args, extra = p.parse_known_args(argv)
    if args.personas == ["all"]:
        args.personas = names
    if args.collect is not None:
        paths = [Path(x) for x in args.collect]
        command = "python bench/methods_learning.py " + " ".join(argv if argv is not None else sys.argv[1:])
    else:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        paths = [run_one(persona, method, seed, out, extra)
                 for persona, method, seed in plan(args.personas, args.methods, args.seeds)]
        command = "python bench/methods_learning.py " + " ".join(argv if argv is not None else sys.argv[1:])
    results = [load_result(path) for path in paths]
    report = Path(args.report)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(render(results, command) + "\n")
    print(report.read_text())
    gains: dict[str, list[float]] = {}
    for r in results:
        gains.setdefault(_method_name(r), []).append(_delta(r))
    print("acceptance gain, after - before (points, median over the runs): "
          + ", ".join(f"{m} {statistics.median(d):+.1f} ({len(d)} runs)" for m, d in sorted(gains.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
