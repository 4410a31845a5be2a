"""prepare_data writes the same training file every time; rehearsal tasks join it at their own share."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPEN = ["click-button", "click-link", "focus-text-2", "click-dialog", "click-dialog-2", "click-widget"]


def prepare(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "gui-rl/prepare_data.py", *args, "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True)


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_same_file_every_time(tmp_path: Path) -> None:
    for name in ("a.jsonl", "b.jsonl"):
        assert prepare(tmp_path / name, "--tasks", *OPEN, "--rehearsal-tasks", "click-test").returncode == 0
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()


def test_rehearsal_tasks_join_at_their_own_share(tmp_path: Path) -> None:
    out = tmp_path / "mix.jsonl"
    done = prepare(out, "--tasks", *OPEN, "--seeds-per-task", "50", "--rehearsal-tasks", "click-test",
                   "click-test-2", "focus-text", "--rehearsal-seeds-per-task", "15")
    assert done.returncode == 0, done.stderr
    assert "345 episodes (6 tasks, 3 rehearsed)" in done.stdout
    counts = Counter(r["metadata"]["task"] for r in rows(out))
    assert counts == {**{t: 50 for t in OPEN}, "click-test": 15, "click-test-2": 15, "focus-text": 15}


def test_a_task_cannot_be_both_trained_and_rehearsed(tmp_path: Path) -> None:
    done = prepare(tmp_path / "x.jsonl", "--tasks", "click-test", "click-button", "--rehearsal-tasks", "one-step")
    assert done.returncode != 0
    assert "both trained and rehearsed: click-button, click-test" in done.stderr
    assert not (tmp_path / "x.jsonl").exists()


def test_a_rehearsal_share_without_rehearsal_tasks_is_refused(tmp_path: Path) -> None:
    done = prepare(tmp_path / "x.jsonl", "--tasks", "click-button", "--rehearsal-seeds-per-task", "15")
    assert done.returncode != 0
    assert "--rehearsal-seeds-per-task needs --rehearsal-tasks" in done.stderr
    assert not (tmp_path / "x.jsonl").exists()
