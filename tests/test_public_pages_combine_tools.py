"""The second public page's `python -m openclaw_combine.test_rollout --num-samples N
--output-dir DIR` collects real rollouts from a running server (real HTTP, tiny model, RL intercept,
the API key required), and `openclaw_combine.utils.inspect_sessions(dir)` reads the buffer or the
export and prints main/side counts per session as the page shows."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
KEY = "sk-test-rollout-key"


@pytest.fixture(scope="module")
def server(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory):
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.intercept.config import InterceptConfig
    from openclaw.server.app import create_app
    from openclaw.server.config import RLConfig, ServerConfig
    from openclaw.server.runner import serve_in_background

    buf_dir = tmp_path_factory.mktemp("combine_tools") / "rl_buffer"
    engine = HFEngine.load(str(tiny_model_path), dtype="float32", device="cpu", max_batch_size=8)
    app = create_app(ServerConfig(api_key=KEY, rl=RLConfig(enabled=True, intercept=InterceptConfig(buffer_dir=buf_dir))),
                     engine=engine)
    srv = serve_in_background(app)
    try:
        yield {"url": srv.base_url, "buffer": buf_dir}
    finally:
        srv.stop()
        asyncio.run(engine.shutdown())


def _test_rollout(server: dict, out: Path, key: str | None, n: int = 2) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "OPENCLAW_API_KEY"}
    if key:
        env["OPENCLAW_API_KEY"] = key
    return subprocess.run([sys.executable, "-m", "openclaw_combine.test_rollout", "--num-samples", str(n),
                           "--output-dir", str(out), "--server-url", server["url"], "--rl-buffer-dir",
                           str(server["buffer"]), "--max-tokens", "4"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)


def test_test_rollout_collects_real_sessions_and_inspect_sessions_reads_them(server: dict, tmp_path: Path, capsys):
    from openclaw_combine.utils import inspect_sessions

    res = _test_rollout(server, tmp_path / "debug_rollouts", KEY)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "wrote 2 session(s)" in res.stdout and "Main-line turns: 2" in res.stdout and "Side turns: 1" in res.stdout
    export = inspect_sessions(tmp_path / "debug_rollouts")
    printed = capsys.readouterr().out
    assert len(export) == 2
    for sid, data in export.items():
        assert sid.startswith("test-rollout-")
        assert [t["type"] for t in data].count("main") == 2 and [t["type"] for t in data].count("side") == 1
        main = [t for t in data if t["type"] == "main"]
        assert main[0]["next_state"] and main[0]["trainable"] is True  # the follow-up is the first turn's next state
        assert f"Session {sid}:\n  Total turns: 3\n  Main-line turns: 2\n  Side turns: 1\n" in printed
    # the same from the server's buffer itself
    from_buffer = inspect_sessions(server["buffer"], show=False)
    for sid, data in export.items():
        assert [t["type"] for t in from_buffer[sid]] == [t["type"] for t in data]


def test_without_the_key_it_says_so(server: dict, tmp_path: Path):
    res = _test_rollout(server, tmp_path / "out", None, n=1)
    assert res.returncode == 1 and "401" in res.stderr and "OPENCLAW_API_KEY" in res.stderr
    assert not (tmp_path / "out").exists()


def test_a_buffer_that_is_not_the_servers_is_an_error_before_sending(server: dict, tmp_path: Path):
    res = _test_rollout({**server, "buffer": tmp_path / "nowhere"}, tmp_path / "out", KEY, n=1)
    assert res.returncode == 2 and "nowhere" in res.stderr
