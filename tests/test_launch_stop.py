"""A real launch (`bash openclaw-rl/run_qwen3_7b_openclaw_rl.sh` on the tiny model) stops exactly what
it started, by PID: on Ctrl-C (SIGINT) and when a child fails. Checked through the PID file the
launcher writes (`$LOG_DIR/launch.pids.json`) and through the launch tag every process it started,
and everything those spawned, carries in its environment."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from openclaw.launch.processes import alive, tagged_pids

REPO = Path(__file__).resolve().parents[1]
SCRIPT = "openclaw-rl/run_qwen3_7b_openclaw_rl.sh"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(tmp_path: Path, model: Path, **extra: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "OPENCLAW_DRY_RUN", "DRY_RUN",
                                                            "OPENCLAW_API_KEY", "METHOD_ARGS")}
    env.update(MODEL_PATH=str(model), OPENCLAW_PORT=str(_free_port()), RAY_DASHBOARD_PORT=str(_free_port()),
               LOG_DIR=str(tmp_path / "logs"), RL_BUFFER_DIR=str(tmp_path / "buf"), CKPT_SAVE_DIR=str(tmp_path / "ck"),
               RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1", **extra)
    # Its own session, as a terminal's foreground job: SIGINT goes to the launcher alone, here.
    return subprocess.Popen(["bash", SCRIPT], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def _read_until(proc: subprocess.Popen, marker: str) -> list[str]:
    """Launcher output up to the line containing `marker` (blocking reads: the launcher's own order)."""
    seen = []
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line)
        if marker in line:
            return seen
    raise AssertionError(f"launcher exited ({proc.wait()}) before {marker!r}:\n{''.join(seen)[-4000:]}")


def _pids(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "logs" / "launch.pids.json").read_text())


def _assert_all_stopped(info: dict) -> None:
    left = {name: pid for name, pid in info["children"].items() if alive(pid)}
    assert not left, f"still running after the launcher exited: {left}"
    stray = [p for p in tagged_pids(info["launch_id"]) if alive(p)]
    assert not stray, f"processes of this launch outlived it: {stray}"


def _finish(proc: subprocess.Popen, seen: list[str]) -> tuple[int, str]:
    rest, _ = proc.communicate(timeout=120)
    return proc.returncode, "".join(seen) + rest


def test_ctrl_c_while_starting_stops_server_and_judge(tmp_path: Path, tiny_model_path: Path) -> None:
    proc = _launch(tmp_path, tiny_model_path)
    try:
        seen = _read_until(proc, "started the judge")  # the server and the judge are running now
        info = _pids(tmp_path)
        assert set(info["children"]) == {"server", "judge"} and all(alive(p) for p in info["children"].values())
        os.kill(proc.pid, signal.SIGINT)  # bash exec'd the launcher: same PID
        rc, out = _finish(proc, seen)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 130, out
    assert "interrupted: stopping what this launcher started" in out and "stopped server, judge in" in out
    _assert_all_stopped(info)


@pytest.mark.slow
def test_failed_child_stops_the_rest(tmp_path: Path, tiny_model_path: Path) -> None:
    """`ray job submit` to a cluster that is not there fails: the server and judge are stopped."""
    proc = _launch(tmp_path, tiny_model_path, RAY_ADDRESS=f"http://127.0.0.1:{_free_port()}")
    rc, out = _finish(proc, [])
    assert rc == 1, out
    assert "OpenClaw-RL server ready" in out and "openclaw.json provider snippet" in out  # where to chat
    assert "the job ended with status 1" in out and "stopped server, judge, submit" in out
    _assert_all_stopped(_pids(tmp_path))


@pytest.mark.slow
@pytest.mark.ray
def test_ctrl_c_with_a_private_ray_head_stops_it_in_seconds(tmp_path: Path, tiny_model_path: Path) -> None:
    """The whole stack (server, judge, private Ray head, submitted job) is gone within seconds of
    Ctrl-C (the bash launcher took about two minutes to bring the head down)."""
    proc = _launch(tmp_path, tiny_model_path, RAY_NUM_CPUS="2", OPENCLAW_PROGRESS_INTERVAL="5")
    try:
        seen = _read_until(proc, "submitting the trainer")
        seen += _read_until(proc, "serving weights v")  # a progress line: the run is live
        info = _pids(tmp_path)
        assert {"server", "judge", "ray-head", "submit"} <= set(info["children"])
        assert len(tagged_pids(info["launch_id"])) > len(info["children"])  # Ray's own processes carry the tag
        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        rc, out = _finish(proc, seen)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 130, out[-4000:]
    assert "turns " in out and "steps " in out  # live progress instead of an ETA
    _assert_all_stopped(info)
    assert took < 30, f"stopping took {took:.1f} s"
    print(f"stopped the whole launch in {took:.1f} s after SIGINT")
