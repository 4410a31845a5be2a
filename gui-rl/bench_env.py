"""Measure the environment: env steps per second with N browsers, and memory per browser.

    python gui-rl/bench_env.py --parallel-envs 16 --seconds 60

Each of N threads runs scripted-policy episodes of the training tasks it has plans for on
its own browser; a step = one action + the new observation (tree + PNG). Memory is the summed
PSS (/proc/PID/smaps_rollup) of each browser's Chromium processes, measured while they run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

from gui_eval import run_episode
from gui_policies import PLANNED_TASKS, ScriptedPolicy
from gui_screenshots import make_pool
from gui_tasks import TASKS, train_seed

from openclaw.environment import env_value
from openclaw.proctree import descendants


def pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parallel-envs", type=int, default=int(env_value("PARALLEL_ENVS") or "16"))
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--out", default=None, help="also write the numbers as JSON here")
    args = p.parse_args(argv)
    pool = make_pool(args.parallel_envs, env_value("SCREENSHOT_BACKEND") or "playwright")
    steps, episodes, lock = [0], [0], threading.Lock()
    tasks = [t.name for t in TASKS if t.name in PLANNED_TASKS]  # a refused task would take no step
    stop = threading.Event()

    def worker(i: int) -> None:
        with pool.env_sync() as env:
            n = 0
            while not stop.is_set():
                task = tasks[(i + n) % len(tasks)]
                r = run_episode(env, ScriptedPolicy(), task, train_seed(i * 1000 + n), max_steps=6)
                n += 1
                with lock:
                    steps[0] += r.steps
                    episodes[0] += 1

    # Launch every browser first, so the timed window measures steps, not start-up.
    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.parallel_envs)]
    for t in threads:
        t.start()
    while pool.launched < args.parallel_envs:
        time.sleep(0.1)
    startup = time.perf_counter() - t0
    with lock:
        s0 = steps[0]
    t1 = time.perf_counter()
    time.sleep(args.seconds)  # the measurement window itself
    with lock:
        s1, e1 = steps[0], episodes[0]
    window = time.perf_counter() - t1
    chromium = [q for q in descendants(os.getpid()) if Path(f"/proc/{q}/comm").exists()
                and Path(f"/proc/{q}/comm").read_text().startswith("chrom")]
    total_kb = sum(pss_kb(q) for q in chromium)
    stop.set()
    for t in threads:
        t.join()
    pool.close()
    result = {"parallel_envs": args.parallel_envs, "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0],
              "startup_s": round(startup, 1), "window_s": round(window, 1),
              "env_steps_per_s": round((s1 - s0) / window, 2), "episodes": e1,
              "chromium_processes": len(chromium), "pss_mb_total": round(total_kb / 1024, 1),
              "pss_mb_per_browser": round(total_kb / 1024 / args.parallel_envs, 1)}
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
