"""What a script needs by default ships in the repository (a fresh clone has no
../shared folder next to it)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

from slime.utils.plugins import load_plugin_module

REPO = Path(__file__).resolve().parents[1]


def test_toolcall_gsm8k_is_read_from_the_repository_copy(monkeypatch):
    monkeypatch.delenv("GSM8K_PATH", raising=False)
    load_plugin_module("toolcall-rl/toolcall_generate.py")  # makes the folder's modules importable by name
    tasks = importlib.import_module("toolcall_tasks")
    path = tasks.gsm8k_path().resolve()
    assert path == REPO / "toolcall-rl" / "data" / "gsm8k_test.json"
    rows = tasks.load_gsm8k()
    assert len(rows) == 1319 and rows[0].answer == "36"


def test_the_gsm8k_copy_is_tracked_not_ignored():
    # toolcall-rl/data also receives generated train/eval files (ignored); the shipped copy must not be.
    ignored = subprocess.run(["git", "check-ignore", "-q", "toolcall-rl/data/gsm8k_test.json"], cwd=REPO)
    assert ignored.returncode == 1
    generated = subprocess.run(["git", "check-ignore", "-q", "toolcall-rl/data/eval.jsonl"], cwd=REPO)
    assert generated.returncode == 0


def test_no_toolcall_file_reads_outside_the_repository():
    for f in (REPO / "toolcall-rl").glob("*.py"):
        assert "../shared" not in f.read_text() and '"shared"' not in f.read_text(), f


def test_prepare_data_writes_eval_from_the_repository_copy(tmp_path, monkeypatch):
    monkeypatch.delenv("GSM8K_PATH", raising=False)
    out = subprocess.run([sys.executable, "toolcall-rl/prepare_data.py", "--train-size", "2", "--eval-limit", "3",
                          "--out-dir", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert len((tmp_path / "eval.jsonl").read_text().splitlines()) == 3
