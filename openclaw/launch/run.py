"""Execute a plan: start in order, watch, and stop exactly what was started.

Order: data preparation (tracks), server and judge (live methods), wait for the server's /health,
print where to chat, import DATA_PATH sessions, a private Ray head (only when RAY_ADDRESS is unset),
`ray job submit --working-dir .`. Then one loop watches every child: the job ending ends the run
with its status; any other child exiting is a failed run. On exit, Ctrl-C, SIGTERM or a failure,
`Supervisor.stop_all` stops the children newest first by PID (seconds, not minutes: the Ray head
gets a short grace period, then SIGKILL to its process group and to every process tagged with this
launch's id), and a job submitted to an external cluster is stopped by its submission id.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

from openclaw.launch.plan import Plan, env_for_children
from openclaw.launch.processes import Child, Supervisor
from openclaw.launch.progress import server_banner, snapshot
from openclaw.launch.settings import LaunchError

PID_FILE = "launch.pids.json"
HEAD_GRACE_S = 5.0  # `ray start --block` stops its processes one by one with long timeouts: cut it short


def _say(msg: str) -> None:
    print(msg, flush=True)


def _tail(path: Path | None, n: int = 2000) -> str:
    if path is None or not path.is_file():
        return ""
    return path.read_text(encoding="utf-8", errors="replace")[-n:]


def _wait(what: str, ready: callable, child: Child | None, deadline_s: float) -> None:  # type: ignore[valid-type]
    """Poll `ready()` until true; fail at once when `child` exits, or at the deadline."""
    t0 = time.monotonic()
    while not ready():
        if child is not None and child.proc.poll() is not None:
            raise LaunchError(f"the {child.name} exited (status {child.proc.returncode}) before {what}; "
                              f"log {child.log}:\n{_tail(child.log)}")
        if time.monotonic() - t0 > deadline_s:
            raise LaunchError(f"{what}: not within {deadline_s:.0f} s (log {child.log if child else '-'})")
        time.sleep(0.5)  # polling a process that is starting up


def _http_ok(url: str, api_key: str | None = None) -> bool:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        return httpx.get(url, headers=headers, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def execute(plan: Plan, env: Mapping[str, str]) -> int:
    s = plan.settings
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_interrupt)
    s.log_dir.mkdir(parents=True, exist_ok=True)
    if plan.recipe.kind == "live":
        s.rl_buffer_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    child_env = env_for_children(env)
    sup = Supervisor(pid_file=s.log_dir / PID_FILE)
    submit: Child | None = None
    rc = 1
    t_interrupt: float | None = None
    try:
        for msg in plan.messages:
            _say(msg)
        if plan.server is not None:
            server = sup.start("server", plan.server.argv, {**child_env, **plan.server.env}, s.repo, plan.server.log)
            _say(f"{plan.recipe.name}: started the server (pid {server.proc.pid}, log {plan.server.log})")
        else:
            server = None
        if plan.judge is not None:
            shown = " ".join(f"{k}={v}" for k, v in plan.judge_settings.items())
            judge = sup.start("judge", plan.judge.argv, {**child_env, **plan.judge.env}, s.repo, plan.judge.log)
            _say(f"{plan.recipe.name}: started the judge (pid {judge.proc.pid}, {shown}, log {plan.judge.log})")
        if plan.base_url is not None:
            _wait(f"the server at {plan.base_url} was healthy", lambda: _http_ok(f"{plan.base_url}/health", s.api_key),
                  server, 900)
            banner = server_banner(plan.server.log) if plan.server and plan.server.log else None
            _say(banner or f"{plan.recipe.name}: chat at {plan.base_url}/v1 (the server's banner with the provider "
                           f"snippet is in {plan.server.log if plan.server else 'its log'})")
        for cmd in plan.imports:
            done = subprocess.run(cmd.argv, cwd=s.repo, env=child_env)
            if done.returncode != 0:
                raise LaunchError(f"importing sessions failed (exit {done.returncode}): {cmd.shell()}")
        if plan.ray_head is not None:
            head = sup.start("ray-head", plan.ray_head.argv, {**child_env, **plan.ray_head.env}, s.repo, plan.ray_head.log,
                             grace_s=HEAD_GRACE_S)
            _wait(f"the Ray head at {plan.ray_address} answered", lambda: _http_ok(f"{plan.ray_address}/api/version"),
                  head, s.ray_start_timeout)
            _say(f"{plan.recipe.name}: started a private Ray head at {plan.ray_address} (pid {head.proc.pid}); "
                 "it is stopped when this launcher exits")
        _write_private(plan.runtime_env_file, json.dumps(plan.runtime_env))
        job_log = s.log_dir / "job.log" if plan.recipe.kind == "live" else None
        _say(f"{plan.recipe.name}: submitting the trainer to {plan.ray_address} as {plan.submission_id} "
             f"(logs: {s.log_dir}/training.log{', ' + str(job_log) if job_log else ''})")
        submit = sup.start("submit", plan.submit.argv, child_env, s.repo, job_log, grace_s=5.0)
        rc = _watch(plan, sup, submit)
    except KeyboardInterrupt:
        t_interrupt = time.monotonic()
        _say(f"\n{plan.recipe.name}: interrupted: stopping what this launcher started")
        rc = 130
    except LaunchError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        rc = 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
        if plan.ray_head is None and submit is not None and submit.proc.poll() is None:
            # An external cluster outlives us: stop the job we submitted there, by its id.
            subprocess.run(["ray", "job", "stop", "--address", plan.ray_address, "--no-wait", plan.submission_id],
                           env=child_env, capture_output=True, timeout=60)
        took = sup.stop_all()
        plan.runtime_env_file.unlink(missing_ok=True)
        if sup.children:
            since = f" ({time.monotonic() - t_interrupt:.1f} s after the interrupt)" if t_interrupt else ""
            _say(f"{plan.recipe.name}: stopped {', '.join(c.name for c in sup.children)} in {took:.1f} s{since}")
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return rc


def _write_private(path: Path, text: str) -> None:
    """0600 from the start: the runtime env may carry OPENCLAW_API_KEY."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


def _watch(plan: Plan, sup: Supervisor, submit: Child) -> int:
    """Until the job ends: a progress line per interval (live runs), and fail on any child's exit."""
    s = plan.settings
    next_progress = time.monotonic() + (s.progress_interval if plan.recipe.kind == "live" else float("inf"))
    while True:
        gone = sup.failed()
        if gone is submit:
            status = submit.proc.returncode
            _say(f"{plan.recipe.name}: the job ended with status {status}"
                 + (f" (log {submit.log}):\n{_tail(submit.log)}" if status and submit.log else ""))
            return status
        if gone is not None:
            raise LaunchError(f"the {gone.name} exited (status {gone.proc.returncode}); log {gone.log}:\n{_tail(gone.log)}")
        if time.monotonic() >= next_progress and plan.base_url:
            line = snapshot(s.rl_buffer_dir, s.log_dir, plan.base_url, s.api_key).line(plan.recipe.name)
            _say(f"{line} | chat {plan.base_url}/v1")
            next_progress = time.monotonic() + s.progress_interval
        time.sleep(0.5)  # the watch loop's tick (children are checked, not awaited)
