"""swe-rl: what scoring an episode costs, with the reward-hardened path vs the plain one.

    python bench/swe_episode_cost.py [--instances 6] [--reps 3]

Each episode: the base repository is copied into a fresh sandbox (setup), the agent's fix is
written into the work tree, and the episode is scored. Two scorers, interleaved on the same
instances in one run:
- plain: `git diff` against the agent's own `base` tag, the listed test files restored in the
  episode's tree, pytest's `-rA` summary read from stdout (how swe-rl scored before);
- hardened (SweEnv.evaluate): the patch from a git dir made from the read-only base, the patch
  check, a fresh copy of the base with the patch applied, pytest with the report plugin.
The last line is the ratio hardened/plain of the median time per episode (setup + scoring).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shlex
import statistics
import sys
import time
from pathlib import Path

from slime.utils.plugins import load_plugin_module

load_plugin_module(str(Path(__file__).resolve().parents[1] / "swe-rl" / "swe_sources.py"))

import swe_sources  # noqa: E402
from swe_env import SweEnv  # noqa: E402
from swe_instances import Instance, base_repo, dependency_dir, shipped_instances  # noqa: E402
from swe_workspace import BASE_MOUNT, DEPS_MOUNT, load_base  # noqa: E402

from openclaw.sandbox import Limits, SandboxConfig, SandboxPool, SandboxSession  # noqa: E402

_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR)\s+(\S+)")


async def plain_score(sb: SandboxSession, inst: Instance, base: Path, runtime: Path, deps: Path) -> bool:
    """The scorer before hardening, kept here only as the comparison."""
    diff = await sb.run("git add -A && git diff --cached --binary base", timeout_s=60)
    assert diff.exit_code == 0, diff.stderr
    restore = " && ".join(f"cp -a {BASE_MOUNT}/{shlex.quote(f)} {shlex.quote(f)}" for f in inst.test_files)
    await sb.run(restore, ro_binds=[(str(base), BASE_MOUNT)], timeout_s=60)
    entries = [("/workspace" if p in ("", ".") else f"/workspace/{p}") for p in inst.python_path]
    paths = ":".join([*entries, "/opt/swe-pytest", DEPS_MOUNT])
    ids = " ".join(shlex.quote(t) for t in inst.test_ids)
    r = await sb.run(f"cd /workspace && PYTHONPATH={paths} python3 -m pytest -q -rA --tb=short -p no:cacheprovider "
                     f"-o addopts= --color=no {ids}", timeout_s=120,
                     ro_binds=[(str(runtime), "/opt/swe-pytest"), (str(deps), DEPS_MOUNT)])
    outcomes = {m.group(2): m.group(1) for ln in r.stdout.splitlines() if (m := _SUMMARY.match(ln.strip()))}
    return all(outcomes.get(t) == "PASSED" for t in inst.test_ids)


def fixed_file(inst: Instance, base: Path) -> tuple[str, str]:
    """The file the gold patch changes, with the fix in it (what the agent's edits leave)."""
    import subprocess
    import tempfile

    rel = inst.mutation["file"]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / rel).parent.mkdir(parents=True, exist_ok=True)
        (Path(tmp) / rel).write_text((base / rel).read_text())
        subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], input=inst.patch.encode(), cwd=tmp, check=True)
        return rel, (Path(tmp) / rel).read_text()


async def episode(pool: SandboxPool, inst: Instance, mode: str) -> float:
    base, runtime, deps = base_repo(inst), swe_sources.pytest_runtime_dir(), dependency_dir(inst)
    rel, text = fixed_file(inst, base)
    t0 = time.perf_counter()
    async with pool.session() as sb:
        await load_base(sb, base)
        sb.write_file(rel, text)
        if mode == "plain":
            ok = await plain_score(sb, inst, base, runtime, deps)
        else:
            env = SweEnv(inst, sb, base, runtime, deps_dir=deps)
            ok = (await env.evaluate()).reward == 1.0
    if not ok:
        raise RuntimeError(f"{mode}: the gold fix of {inst.instance_id} did not score 1")
    return time.perf_counter() - t0


def pick(n: int) -> list[Instance]:
    """Round-robin over projects, so every shipped project is measured."""
    by_project: dict[str, list[Instance]] = {}
    for inst in shipped_instances():
        by_project.setdefault(inst.sdist, []).append(inst)
    out: list[Instance] = []
    while len(out) < n and any(by_project.values()):
        for rows in by_project.values():
            if rows and len(out) < n:
                out.append(rows.pop(0))
    return out


async def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", type=int, default=6)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    pool = SandboxPool(SandboxConfig(limits=Limits(wall_timeout_s=120, cpu_seconds=120)), size=1)
    times: dict[str, list[float]] = {"plain": [], "hardened": []}
    instances = pick(args.instances)
    print(f"load average before: {os.getloadavg()[0]:.1f}; {len(instances)} instances x {args.reps} reps", flush=True)
    for rep in range(args.reps):
        for inst in instances:
            for mode in (("plain", "hardened") if rep % 2 == 0 else ("hardened", "plain")):
                times[mode].append(await episode(pool, inst, mode))
        print(f"rep {rep + 1}: plain {statistics.median(times['plain']):.2f} s, "
              f"hardened {statistics.median(times['hardened']):.2f} s (medians so far)", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    plain, hardened = statistics.median(times["plain"]), statistics.median(times["hardened"])
    print(f"median seconds per episode (setup + scoring): plain {plain:.2f}, hardened {hardened:.2f}")
    print(f"RATIO hardened/plain = {hardened / plain:.3f} (target <= 1.20)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
