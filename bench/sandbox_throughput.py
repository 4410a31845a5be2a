"""Sandbox throughput: episodes/s and per-step overhead of the bubblewrap sandbox vs a plain
subprocess, PARALLEL_ENVS concurrent episodes running the same commands.

    python bench/sandbox_throughput.py [--episodes 64] [--parallel-envs 32] [--out bench/results/sandbox_throughput.md]

An episode = a fresh work dir + STEPS shell commands (what a terminal-rl episode does between
model turns). The last printed line is the ratio sandbox/plain of episodes per second.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from openclaw.sandbox import SandboxConfig, SandboxPool

STEPS = (
    "mkdir -p src && echo 'print(40 + 2)' > src/main.py",
    "ls -la src && wc -c src/main.py",
    "python3 src/main.py",
    "tar czf src.tgz src && tar tzf src.tgz | sort",
)


async def plain_episode(sem: asyncio.Semaphore, step_times: list[float]) -> None:
    async with sem:
        workdir = tempfile.mkdtemp(prefix="bench-plain-")
        try:
            for cmd in STEPS:
                t0 = time.perf_counter()
                proc = await asyncio.create_subprocess_exec(
                    "bash", "-c", cmd, cwd=workdir, stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
                )
                await proc.communicate()
                if proc.returncode != 0:
                    raise RuntimeError(f"plain step failed: {cmd}")
                step_times.append(time.perf_counter() - t0)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


async def sandbox_episode(pool: SandboxPool, step_times: list[float]) -> None:
    async with pool.session() as sb:
        for cmd in STEPS:
            t0 = time.perf_counter()
            r = await sb.run(cmd)
            if r.exit_code != 0:
                raise RuntimeError(f"sandbox step failed: {cmd}: {r.stderr}")
            step_times.append(time.perf_counter() - t0)


async def measure(mode: str, episodes: int, parallel: int) -> dict[str, float]:
    step_times: list[float] = []
    if mode == "sandbox":
        pool = SandboxPool(SandboxConfig(), parallel)
        make = lambda: sandbox_episode(pool, step_times)  # noqa: E731
    else:
        sem = asyncio.Semaphore(parallel)
        make = lambda: plain_episode(sem, step_times)  # noqa: E731
    await asyncio.gather(*(make() for _ in range(min(parallel, episodes))))  # warm-up round
    step_times.clear()
    t0 = time.perf_counter()
    await asyncio.gather(*(make() for _ in range(episodes)))
    wall = time.perf_counter() - t0
    return {
        "episodes_per_s": episodes / wall,
        "wall_s": wall,
        "step_ms_mean": 1000 * statistics.mean(step_times),
        "step_ms_p50": 1000 * statistics.median(step_times),
        "step_ms_p95": 1000 * statistics.quantiles(step_times, n=20)[-1],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=64)
    p.add_argument("--parallel-envs", type=int, default=int(os.environ.get("PARALLEL_ENVS", "32")))
    p.add_argument("--cores", type=int, default=2, help="pin the benchmark to this many cores")
    p.add_argument("--out", default=None, help="write a markdown report here")
    args = p.parse_args(argv)
    if shutil.which("bwrap") is None:
        print("error: bubblewrap (bwrap) is not installed: apt-get install bubblewrap", file=sys.stderr)
        return 2
    cores = sorted(os.sched_getaffinity(0))[: args.cores]
    os.sched_setaffinity(0, cores)
    load_before = os.getloadavg()[0]
    results = {}
    for mode in ("plain", "sandbox"):
        # One episode at a time first: the per-step cost without queueing.
        results[mode + "-serial"] = asyncio.run(measure(mode, max(4, args.episodes // 8), 1))
        results[mode] = asyncio.run(measure(mode, args.episodes, args.parallel_envs))
    plain, sbx = results["plain"], results["sandbox"]
    serial_overhead_ms = results["sandbox-serial"]["step_ms_p50"] - results["plain-serial"]["step_ms_p50"]
    overhead_ms = sbx["step_ms_mean"] - plain["step_ms_mean"]
    ratio = sbx["episodes_per_s"] / plain["episodes_per_s"]
    lines = [
        f"machine: {platform.node()} {platform.machine()}, {len(cores)} cores pinned ({cores}), "
        f"PARALLEL_ENVS={args.parallel_envs}, episodes={args.episodes}, steps/episode={len(STEPS)}, "
        f"1-min load average at start {load_before:.1f} (a shared machine)",
        "| mode | concurrency | episodes/s | step mean ms | step p50 ms | step p95 ms |",
        "|---|---|---|---|---|---|",
    ]
    for mode in ("plain-serial", "sandbox-serial", "plain", "sandbox"):
        r = results[mode]
        conc = 1 if mode.endswith("serial") else args.parallel_envs
        lines.append(f"| {mode.split('-')[0]} | {conc} | {r['episodes_per_s']:.2f} | {r['step_ms_mean']:.1f} "
                     f"| {r['step_ms_p50']:.1f} | {r['step_ms_p95']:.1f} |")
    lines.append(f"per-step sandbox overhead, one episode at a time (p50): {serial_overhead_ms:.1f} ms")
    lines.append(f"per-step sandbox overhead at PARALLEL_ENVS={args.parallel_envs} (mean, incl. queueing): "
                 f"{overhead_ms:.1f} ms")
    lines.append(f"ratio sandbox/plain episodes per second: {ratio:.3f}")
    print("\n".join(lines))
    if args.out:
        cmd = "python bench/sandbox_throughput.py " + " ".join(argv if argv is not None else sys.argv[1:])
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(
            "# Sandbox throughput (bubblewrap vs plain subprocess)\n\n"
            f"Command: `{cmd.strip()}`\n\n" + "\n".join(lines[:1]) + "\n\n" + "\n".join(lines[1:-3]) + "\n\n"
            + "\n".join(f"- {x}" for x in lines[-3:]) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
