"""Start the OpenAI server on the Tinker backend (RL intercept + judge workers) and train over Tinker.

    python openclaw-tinker/tinker_launch.py --method combine --model-path BASE [trainer flags] \
        [--judge-workers 1 --judge-backend cpu ...] [--port 8000]

What `deploy_to_tinker.sh` and the `run_*_tinker_*.sh` scripts run. The server is a child process
(`python -m openclaw.server --backend tinker ...`); the trainer (`tinker_train.run`) runs here and
pushes each step's sampler weights to it. Flags the trainer does not know go to the server (the
judge's `--majority-vote-n`, `--judge-*`, ...), where its own parser accepts or names them.
Stopping (Ctrl-C, the job ending) stops the server this started.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import httpx

from openclaw.environment import env_value
from openclaw.proctree import stop_child

HERE = Path(__file__).resolve().parent


def _trainer_module():
    # The folder has a hyphen (not a package): load the sibling module by file path.
    spec = importlib.util.spec_from_file_location("openclaw_tinker_train", HERE / "tinker_train.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def server_argv(model_path: str, tinker_url: str | None, buffer_dir: str, port: int, judge_workers: int,
                tokenizer_path: str | None, extra: list[str]) -> list[str]:
    argv = [sys.executable, "-m", "openclaw.server", "--backend", "tinker", "--model-path", model_path,
            "--port", str(port), "--enable-rl-intercept", "--rl-buffer-dir", buffer_dir,
            "--judge-workers", str(judge_workers)]
    if tinker_url:
        argv += ["--engine-url", tinker_url]
    if tokenizer_path:
        raise SystemExit("--tokenizer-path: the server reads the tokenizer from --model-path; use a local folder there")
    return argv + extra


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with code {proc.returncode} before it was healthy")
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)  # polling a child process's start-up
    raise SystemExit(f"the server at {url} was not healthy after {timeout:.0f} s")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--port", type=int, default=int(env_value("OPENCLAW_PORT") or "8000"))
    pre.add_argument("--judge-workers", type=int, default=1)
    pre.add_argument("--server-start-timeout", type=float, default=300.0)
    own, rest = pre.parse_known_args(argv)
    train = _trainer_module()
    # What the trainer's parser knows is the trainer's; the rest goes to the server (and the judge).
    ns, server_extra = train.build_parser().parse_known_args(rest)
    url = f"http://127.0.0.1:{own.port}"
    ns.server_url = url
    try:
        cfg = train.config_from(ns)
    except train.Refused as exc:
        print(f"openclaw-tinker: refused: {exc}", file=sys.stderr)
        return 2
    cmd = server_argv(cfg.base_model, cfg.tinker_url, str(cfg.buffer_dir), own.port, own.judge_workers,
                      cfg.tokenizer_path, server_extra)
    if env_value("OPENCLAW_DRY_RUN") or env_value("DRY_RUN"):
        # The plan only, in the launcher's shape (openclaw/launch/README.md).
        print("would run server:", shlex.join(cmd[1:] if cmd[0] == sys.executable else cmd))
        shown = {**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}, "method": cfg.method.name}
        print("would run trainer:", json.dumps({k: str(v) for k, v in shown.items()}))
        return 0
    print("starting:", " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd)
    try:
        wait_healthy(url, proc, own.server_start_timeout)
        print(f"server ready at {url}/v1 (backend tinker); training {cfg.method} over Tinker", flush=True)
        train.run(cfg)
    finally:
        stop_child(proc, grace_s=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
