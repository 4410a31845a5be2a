"""`python -m openclaw.judge`:

    python -m openclaw.judge --rl-buffer-dir DIR [--num-judge-workers N] [--judge-backend cpu|llm|custom]
                             [--prm-m M | --majority-vote-n M] [--majority-vote-threshold T] [--until-idle S]
    python -m openclaw.judge eval --data FILE.jsonl [judge flags]
    python -m openclaw.judge train-head [--train FILE] [--dev FILE] [--out FILE.npz]
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from pathlib import Path

from openclaw.judge.config import JudgeConfig, JudgeConfigError, add_judge_args


def _add_judge_args_or_exit(p: argparse.ArgumentParser) -> None:
    try:
        add_judge_args(p)
    except JudgeConfigError as e:  # e.g. MAJORITY_VOTE_N=many: a usage error, not a traceback
        p.error(str(e))


def _run(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m openclaw.judge", description="judge workers on a trajectory buffer")
    p.add_argument("--rl-buffer-dir", required=True)
    p.add_argument("--until-idle", type=float, default=None,
                   help="exit once no turn has been ready for this many seconds (batch jobs, benchmarks)")
    p.add_argument("--stats-interval", type=float, default=30.0)
    p.add_argument("--log-level", default="info")
    _add_judge_args_or_exit(p)
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = JudgeConfig.from_args(args)
    except JudgeConfigError as e:
        p.error(str(e))
    from openclaw.buffer import TrajectoryBuffer
    from openclaw.judge.worker import JudgeService

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    buf = TrajectoryBuffer.open(args.rl_buffer_dir)
    service = JudgeService(config, args.rl_buffer_dir, buffer=buf).start()
    t0 = time.monotonic()
    last_stats = t0
    idle_since: float | None = None
    try:
        while not stop.wait(0.2):
            now = time.monotonic()
            if now - last_stats >= args.stats_interval:
                print(f"judge: {service.stats.snapshot()} collapse={service.monitor.stats().shares}", flush=True)
                last_stats = now
            if args.until_idle is not None:
                ready = buf.stats()["by_state"].get("ready", 0)
                if ready == 0:
                    idle_since = idle_since or now
                    if now - idle_since >= args.until_idle:
                        break
                else:
                    idle_since = None
    finally:
        service.stop()
        buf.close()
    snap = service.stats.snapshot()
    elapsed = time.monotonic() - t0
    print(f"judge: done: {snap['judged']} judged, {snap['failed']} failures, {elapsed:.1f}s", flush=True)
    return 0


def _eval(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m openclaw.judge eval")
    p.add_argument("--data", required=True, help="JSONL: response, next_state, next_state_role, label in {1,-1,0}")
    _add_judge_args_or_exit(p)
    args = p.parse_args(argv)
    try:
        config = JudgeConfig.from_args(args)
    except JudgeConfigError as e:
        p.error(str(e))
    from openclaw.judge.dataset import load_labeled
    from openclaw.judge.evaluate import run_eval

    try:
        load_labeled(args.data)  # validate before loading any model
        run_eval(config, args.data)
    except (FileNotFoundError, ValueError) as e:
        print(f"openclaw.judge eval: error: {e}", file=sys.stderr)
        return 2
    return 0


def _train_head(argv: list[str]) -> int:
    from openclaw.judge.dataset import DEV_PATH, TRAIN_PATH
    from openclaw.judge.head import DEFAULT_HEAD_PATH
    from openclaw.judge.training import DEFAULT_L2, train_head

    p = argparse.ArgumentParser(prog="python -m openclaw.judge train-head")
    p.add_argument("--train", type=Path, default=TRAIN_PATH)
    p.add_argument("--dev", type=Path, default=DEV_PATH, help="report accuracy here (never trained on)")
    p.add_argument("--out", type=Path, default=DEFAULT_HEAD_PATH)
    p.add_argument("--l2", type=float, default=DEFAULT_L2)
    args = p.parse_args(argv)
    train_head(args.train, args.dev, args.out, args.l2)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "eval":
        return _eval(argv[1:])
    if argv and argv[0] == "train-head":
        return _train_head(argv[1:])
    if argv and argv[0] == "run":
        argv = argv[1:]
    return _run(argv)


if __name__ == "__main__":
    sys.exit(main())
