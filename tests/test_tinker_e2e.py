"""The Tinker backend end to end against a live Tinker-API server on this machine.

skyrl (JAX on CPU, its own venv: openclaw-tinker/setup_skyrl_tx.sh) serves the Tinker API for the
tiny Qwen3; the official SDK talks to it. Our server runs `--backend tinker` with the RL intercept,
the CPU judge scores the turns, and openclaw-tinker trains combine through Tinker: server ->
buffer -> judge -> Tinker forward_backward/optim_step -> new sampler serving the chat endpoint.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from slime.utils.plugins import load_plugin_module

from openclaw.buffer import JUDGED, TrajectoryBuffer
from openclaw.proctree import stop_child

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

FEEDBACK = ["Thanks, perfect.", "No, that's too long. I asked for a short answer: one or two sentences."] * 2
PROBE = [{"role": "user", "content": "Tell me about the sea."}]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(proc: subprocess.Popen, health_url: str, timeout_s: float, log: Path, poll_s: float) -> None:
    """Return once `health_url` answers 200; fail with the log's tail if `proc` exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            if httpx.get(health_url, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"{health_url} did not come up: " + log.read_text()[-3000:]
        time.sleep(poll_s)  # polling a child process's start-up


@pytest.fixture(scope="module")
def tinker_api(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory):
    """skyrl's Tinker API server on a free loopback port (the venv is created on first use)."""
    work = tmp_path_factory.mktemp("skyrl")
    port = _free_port()
    log = open(work / "server.log", "w")  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen(["bash", str(ROOT / "openclaw-tinker/run_skyrl_server.sh"), "--base-model", str(tiny_model_path),
                             "--port", str(port), "--workdir", str(work), "--max-lora-rank", "8"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        # the timeout includes creating the venv on a fresh machine
        _wait_healthy(proc, url + "/api/v1/healthz", 900, work / "server.log", poll_s=1)
        yield url
    finally:
        stop_child(proc, grace_s=60)
        log.close()


def _chat(client: httpx.Client, messages: list[dict], max_tokens: int, sid: str | None = None,
          done: bool = False, temperature: float = 1.0) -> dict:
    headers = {**({"X-Session-Id": sid} if sid else {}), **({"X-Session-Done": "true"} if done else {})}
    r = client.post("/v1/chat/completions", headers=headers,
                    json={"model": "m", "messages": messages, "max_tokens": max_tokens, "temperature": temperature,
                          "logprobs": True})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]


def test_combine_trains_through_tinker_and_the_served_policy_changes(
        tinker_api: str, tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from openclaw.engines.tinker_engine import TinkerEngine
    from openclaw.intercept.config import InterceptConfig
    from openclaw.judge.config import JudgeConfig
    from openclaw.judge.worker import JudgeService
    from openclaw.server.app import create_app
    from openclaw.server.config import RLConfig, ServerConfig
    from openclaw.server.runner import serve_in_background

    monkeypatch.setenv("TINKER_API_KEY", "tml-local-test")
    buf_dir = tmp_path / "rl_buffer"
    engine = TinkerEngine.load(str(tiny_model_path), base_url=tinker_api)
    app = create_app(ServerConfig(rl=RLConfig(enabled=True, intercept=InterceptConfig(buffer_dir=buf_dir, session_idle_timeout=600))),
                     engine=engine)
    server = serve_in_background(app)
    judge = JudgeService(JudgeConfig(backend="cpu", batch_size=16, poll_interval_s=0.2), buf_dir).start()
    try:
        with httpx.Client(base_url=server.base_url, timeout=600) as client:
            before = _chat(client, PROBE, 12, temperature=0.0)
            for i, feedback in enumerate(FEEDBACK):
                q = {"role": "user", "content": f"What is the capital of country number {i}?"}
                reply = _chat(client, [q], 6, sid=f"s{i}")["message"]["content"] or ""
                _chat(client, [q, {"role": "assistant", "content": reply}, {"role": "user", "content": feedback}], 1,
                      sid=f"s{i}", done=True)
            deadline = time.monotonic() + 300
            with TrajectoryBuffer.open(buf_dir) as buf:
                while buf.stats()["by_state"].get(JUDGED, 0) < 2 * len(FEEDBACK):
                    assert time.monotonic() < deadline, f"judge did not finish: {buf.stats()['by_state']}"
                    time.sleep(0.2)  # polling the judge thread's progress
                turns = buf.fetch_judged("inspect", limit=100)
            # The intercept recorded Tinker's ids and log-probs 1:1, at weight version 0.
            main = [t for t in turns if t.response_ids]
            assert main and all(len(t.response_logprobs) == len(t.response_ids) for t in main)
            assert all(t.weight_version == 0 for t in main)

            train = load_plugin_module(str(ROOT / "openclaw-tinker" / "tinker_train.py"))
            cfg = train.parse_args(["--method", "combine", "--base-model", str(tiny_model_path),
                                    "--rl-buffer-dir", str(buf_dir), "--server-url", server.base_url,
                                    "--tinker-url", tinker_api, "--steps", "1", "--batch-size", "4",
                                    "--lora-rank", "8", "--lr", "0.05", "--baseline", "zero",
                                    "--save", str(tmp_path / "ckpt"), "--buffer-wait-timeout", "60"])
            history = train.run(cfg)
            assert len(history) == 1 and history[0]["step"] == 1.0
            assert engine.weight_version == 1 and engine.sampler_path.startswith("tinker://")
            # The served completion for the same greedy prompt now comes from the trained sampler.
            after = _chat(client, PROBE, 12, temperature=0.0)
            lp = lambda c: [x["logprob"] for x in c["logprobs"]["content"]]  # noqa: E731
            assert (after["message"]["content"], lp(after)) != (before["message"]["content"], lp(before))
            assert after["message"]["content"] != before["message"]["content"], (before, after)
            # Exactly once: the trained turns are consumed, with the checkpoint as the tag.
            with TrajectoryBuffer.open(buf_dir) as buf:
                assert buf.consumer_position(cfg.consumer_id)["checkpoint_tag"] == "checkpoint-1"
            assert (tmp_path / "ckpt" / "checkpoint-latest").read_text().strip() == "checkpoint-1"
    finally:
        judge.stop()
        server.stop()
        asyncio.run(engine.shutdown())


def test_deploy_to_tinker_runs_against_the_local_server(tinker_api: str, tiny_model_path: Path, tmp_path: Path) -> None:
    """The pages' command with a local Tinker-API address: server (--backend tinker, intercept,
    judge) + one rl step over Tinker, then a clean exit."""
    port = _free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TINKER_")},
           "TINKER_API_KEY": "tml-local-test", "TINKER_ENDPOINT": tinker_api}
    log = open(tmp_path / "deploy.log", "w")  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen(["bash", str(ROOT / "deploy_to_tinker.sh"), "--model-path", str(tiny_model_path),
                             "--method", "rl", "--steps", "1", "--batch-size", "2", "--lora-rank", "8", "--lr", "0.05",
                             "--baseline", "zero", "--port", str(port), "--rl-buffer-dir", str(tmp_path / "buf"),
                             "--save", str(tmp_path / "ckpt"), "--buffer-wait-timeout", "300"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(proc, url + "/health", 300, tmp_path / "deploy.log", poll_s=0.5)
        with httpx.Client(base_url=url, timeout=600) as client:
            for i, feedback in enumerate(FEEDBACK[:2]):
                q = {"role": "user", "content": f"Name a colour, number {i}."}
                reply = _chat(client, [q], 6, sid=f"d{i}")["message"]["content"] or ""
                _chat(client, [q, {"role": "assistant", "content": reply}, {"role": "user", "content": feedback}], 1,
                      sid=f"d{i}", done=True)
        assert proc.wait(timeout=600) == 0, (tmp_path / "deploy.log").read_text()[-3000:]
        out = (tmp_path / "deploy.log").read_text()
        assert '"step": 1' in out and "tinker://" in out
        assert (tmp_path / "ckpt" / "checkpoint-latest").read_text().strip() == "checkpoint-1"
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=60)
        log.close()
