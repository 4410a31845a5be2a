"""The launcher end to end, as a user runs it: `bash openclaw-rl/run_qwen3_7b_openclaw_rl.sh` on the tiny
model starts the server, the judge and a private Ray head, submits the trainer with
`ray job submit --working-dir .`; a few chats are judged, the job trains one step, pushes the new
weights to the server (its served weight version goes up), ends, and the launcher stops everything.
With OPENCLAW_API_KEY set (the second page's first setup step) the same run works: every client of
ours (the launcher's probes, the trainer's engine client, the weight sync, the buffer rollout) sends
the key, and a request without it is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from openclaw.launch.processes import alive, tagged_pids

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.ray]

FEEDBACK = ["Thanks, perfect.", "No, that's too long. I asked for a short answer: one or two sentences."] * 2


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("api_key", [None, "e2e-secret-key-1234"], ids=["no-key", "api-key"])
def test_launch_trains_one_step_and_syncs_weights(tmp_path: Path, tiny_model_path: Path, api_key: str | None) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "OPENCLAW_DRY_RUN", "DRY_RUN",
                                                            "OPENCLAW_API_KEY", "METHOD_ARGS")}
    env.update(MODEL_PATH=str(tiny_model_path), OPENCLAW_PORT=str(port), RAY_DASHBOARD_PORT=str(_free_port()),
               LOG_DIR=str(tmp_path / "logs"), RL_BUFFER_DIR=str(tmp_path / "buf"), CKPT_SAVE_DIR=str(tmp_path / "ck"),
               NUM_ROLLOUT="1", LORA_ARGS="", CKPT_ARGS="", OPTIMIZER_ARGS="--lr 1e-3", RAY_NUM_CPUS="2",
               ROLLOUT_ARGS="--rollout-batch-size 1 --n-samples-per-prompt 2 --rollout-temperature 1.0",
               BUFFER_WAIT_TIMEOUT="600", OPENCLAW_PROGRESS_INTERVAL="5", RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1")
    if api_key:
        env["OPENCLAW_API_KEY"] = api_key
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    proc = subprocess.Popen(["bash", "openclaw-rl/run_qwen3_7b_openclaw_rl.sh"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    submitted = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "submitting the trainer" in line:
                submitted.set()
        submitted.set()  # exited: unblock the waiter, which then sees the exit

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    base = f"http://127.0.0.1:{port}"
    versions: list[str] = []
    try:
        assert submitted.wait(600) and proc.poll() is None, "".join(lines)[-4000:]
        if api_key:
            assert httpx.get(f"{base}/v1/models", timeout=30).status_code == 401  # the key is required
        with httpx.Client(base_url=base, timeout=300, headers=headers) as client:
            for i, feedback in enumerate(FEEDBACK):  # two judged turns per feedback pair: one training step
                sid = f"launch-e2e-{i}"
                q = {"role": "user", "content": f"What is the capital of country number {i}?"}
                r = client.post("/v1/chat/completions", headers={"X-Session-Id": sid},
                                json={"model": "m", "messages": [q], "max_tokens": 6})
                assert r.status_code == 200, r.text
                reply = r.json()["choices"][0]["message"].get("content") or ""
                r = client.post("/v1/chat/completions", headers={"X-Session-Id": sid, "X-Session-Done": "true"},
                                json={"model": "m", "max_tokens": 1, "messages": [
                                    q, {"role": "assistant", "content": reply}, {"role": "user", "content": feedback}]})
                assert r.status_code == 200, r.text
            while proc.poll() is None:  # the served weight version, until the job ends and all stops
                try:
                    versions.append(str(client.get("/v1/models").json()["data"][0]["weight_version"]))
                except httpx.HTTPError:
                    pass  # the launcher is stopping the server
                time.sleep(1)  # sampling the served version
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=120)
        reader.join(timeout=30)
    out = "".join(lines)
    assert rc == 0, out[-6000:]
    assert "the job ended with status 0" in out
    rows = [json.loads(x) for x in (tmp_path / "logs" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "step" in r] == [0]
    assert versions and versions[0] == "0" and "1" in versions, versions  # weights pushed to the server
    info = json.loads((tmp_path / "logs" / "launch.pids.json").read_text())
    assert not [p for p in info["children"].values() if alive(p)]
    assert not [p for p in tagged_pids(info["launch_id"]) if alive(p)]
