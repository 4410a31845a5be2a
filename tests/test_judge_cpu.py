"""The CPU default judge with the real MiniLM embedding model and the shipped head."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from openclaw.judge.cpu_judge import CpuJudge
from openclaw.judge.dataset import DEV_PATH, TRAIN_PATH, load_labeled
from openclaw.judge.evaluate import evaluate_judge
from openclaw.judge.schema import JudgeInput

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cpu_judge() -> CpuJudge:
    return CpuJudge()


def test_dev_set_is_big_varied_and_disjoint_from_training() -> None:
    dev = [json.loads(line) for line in DEV_PATH.read_text(encoding="utf-8").splitlines()]
    train = [json.loads(line) for line in TRAIN_PATH.read_text(encoding="utf-8").splitlines()]
    assert len(dev) >= 150
    cats = {r["category"] for r in dev}
    for needed in ("thanks_acceptance", "redo_retry", "correction", "restatement", "tool_error",
                   "tool_success", "unrelated_followup", "silence"):
        assert needed in cats
    assert {r["label"] for r in dev} == {1, 0, -1}
    assert any(any("\u4e00" <= ch <= "\u9fff" for ch in r["next_state"]) for r in dev)  # Chinese
    norm = lambda s: " ".join(s.lower().split())  # noqa: E731
    train_states = {norm(r["next_state"]) for r in train if norm(r["next_state"])}
    assert not [r for r in dev if norm(r["next_state"]) in train_states]


def test_cpu_judge_accuracy_on_dev(cpu_judge: CpuJudge) -> None:
    report, failures = evaluate_judge(cpu_judge, DEV_PATH)
    print(report.format())
    assert failures == 0
    assert report.accuracy >= 0.85
    for label in (1, 0, -1):
        assert report.recall[label] >= 0.7, f"recall of {label} collapsed: {report.recall}"


def test_cpu_judge_result_shape_and_hints(cpu_judge: CpuJudge) -> None:
    items = [
        JudgeInput("Here is the SQL query.", "No, I meant the count of rows per day, not the rows.", "user"),
        JudgeInput("Here is the SQL query.", "Thanks, works great!", "user"),
        JudgeInput("Running it.", "Traceback (most recent call last):\n  File \"a.py\", line 1\nNameError: x", "tool"),
        JudgeInput("Running it.", "", "tool"),
    ]
    res = cpu_judge.judge_batch(items)
    assert [r.reward for r in res] == [-1.0, 1.0, -1.0, 0.0]
    assert res[0].hint == items[0].next_state
    assert res[1].hint is None and res[1].hint_reason == "no_majority"
    assert "NameError" in res[2].hint and res[2].extra["rule"] == "tool_traceback"
    assert res[3].extra["rule"] == "silence"
    assert all(r.votes == [int(r.reward)] and r.backend == "cpu" and r.rationale for r in res)
    assert all(r.timings["score_s"] >= 0 for r in res)


def test_eval_cli_prints_report(tmp_path: Path) -> None:
    data = tmp_path / "mini.jsonl"
    rows = [
        {"response": "Done.", "next_state": "Thank you so much, this is perfect!", "next_state_role": "user", "label": 1},
        {"response": "Done.", "next_state": "That's wrong, redo it.", "next_state_role": "user", "label": -1},
        {"response": "Running.", "next_state": "bash: foo: command not found", "next_state_role": "tool", "label": -1},
        {"response": "Done.", "next_state": "", "next_state_role": "user", "label": 0},
    ]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "openclaw.judge", "eval", "--data", str(data)], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "n=4  accuracy=1.000" in r.stdout and "confusion" in r.stdout and "precision" in r.stdout


def test_eval_cli_rejects_bad_data(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"response": "a", "next_state": "b", "label": 5}\n', encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "openclaw.judge", "eval", "--data", str(bad)], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "label must be 1, -1 or 0" in r.stderr
    with pytest.raises(ValueError, match="missing field 'next_state'"):
        bad.write_text('{"response": "a", "label": 1}\n', encoding="utf-8")
        load_labeled(bad)
