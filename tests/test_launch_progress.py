"""The live-run status line: numbers from the real buffer, the trainer's metrics.jsonl and the
server; a number that cannot be read is shown as `?` with the reason, and never stops the run."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from openclaw.buffer import TrajectoryBuffer
from openclaw.launch.progress import server_banner, snapshot, trainer_counts


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_status_line_from_buffer_and_metrics(tmp_path: Path) -> None:
    TrajectoryBuffer.open(tmp_path / "buf").close()  # an empty buffer, as the server creates it
    logs = tmp_path / "logs"
    logs.mkdir()
    rows = [{"step": 0, "reward/mean": 0.5}, {"step": 1, "reward/mean": -0.25}, {"eval": 1}]
    (logs / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 2, "rew')
    assert trainer_counts(logs) == (2, -0.25)  # a line being written is not counted yet
    url = f"http://127.0.0.1:{_closed_port()}"
    progress = snapshot(tmp_path / "buf", logs, url, None)
    line = progress.line("openclaw-rl")
    assert line.startswith("openclaw-rl: turns 0 awaiting next state, 0 waiting for the judge, 0 judged | steps 2 |")
    assert "last reward -0.250" in line and "serving weights v?" in line
    assert f"warning: no weight version from {url}/v1/models" in line


def test_unreadable_buffer_is_shown_not_fatal(tmp_path: Path) -> None:
    bad = tmp_path / "buf"
    bad.mkdir()
    (bad / "buffer.sqlite3").write_text("not a database")
    line = snapshot(bad, tmp_path, f"http://127.0.0.1:{_closed_port()}", None).line("m")
    assert "turns ? awaiting next state" in line and "warning: buffer stats unreadable" in line


def test_server_banner_is_cut_after_the_provider_snippet(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    snippet = json.dumps({"models": {"providers": {"openclaw-rl": {"baseUrl": "http://127.0.0.1:8000/v1"}}}}, indent=2)
    log.write_text("Loading model...\nOpenClaw-RL server ready\n  OpenAI API   : http://127.0.0.1:8000/v1\n\n"
                   f"openclaw.json provider snippet:\n{snippet}\nINFO: 127.0.0.1 GET /health 200\n")
    banner = server_banner(log)
    assert banner is not None and banner.startswith("OpenClaw-RL server ready")
    assert banner.endswith("}") and "GET /health" not in banner and '"baseUrl"' in banner
    assert server_banner(tmp_path / "missing.log") is None
