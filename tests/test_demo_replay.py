"""`python -m openclaw.demo.replay`: a recorded main-job run's turns through the trainer again.

Real parts: a real run of the main job (subprocess, tiny model) records the run folder; the
replay is the real CLI, which starts the embedded engine and slime's trainer in-process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _cli(*args: str | Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openclaw.demo.replay", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def recorded_run(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    cmd = [sys.executable, "-m", "openclaw.demo", "--model-path", str(tiny_model_path), "--interactions", "8",
           "--batch-size", "4", "--evals", "1", "--eval-limit", "2", "--max-tokens", "8", "--eval-max-tokens", "8",
           "--minutes", "10", "--lr", "1e-2", "--out", str(out)]
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


@pytest.mark.slow
def test_replay_repeats_the_recorded_steps_and_is_deterministic(recorded_run: Path, tmp_path: Path) -> None:
    buffer_before = (recorded_run / "rl_buffer" / "buffer.sqlite3").read_bytes()
    recorded = [json.loads(line) for line in (recorded_run / "logs" / "metrics.jsonl").read_text().splitlines()]
    assert len(recorded) >= 2
    for name in ("a", "b"):
        res = _cli(recorded_run, "--steps", "2", "--out", tmp_path / name)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "step 1: 4 turns" in res.stdout and "recorded: same turns" in res.stdout
    steps = json.loads((tmp_path / "a" / "replay.json").read_text())["steps"]
    assert [s["step"] for s in steps] == [0, 1]
    for step, logged in zip(steps, recorded, strict=False):
        assert step["same_turns"] is True and len(step["turn_ids"]) == 4
        assert step["metrics"]["gradient/norm"] == pytest.approx(logged["gradient/norm"], rel=1e-4)
        assert step["metrics"]["loss/total"] == pytest.approx(logged["loss/total"], rel=1e-4, abs=1e-6)
    res = _cli("--compare", tmp_path / "a", tmp_path / "b")
    assert res.returncode == 0, res.stderr
    compared = json.loads(res.stdout)
    assert compared["tensors"] > 0 and compared["max_abs_diff"] <= 1e-6 < compared["max_abs_value"]
    # the recorded run is read, never written
    assert (recorded_run / "rl_buffer" / "buffer.sqlite3").read_bytes() == buffer_before


@pytest.mark.slow
def test_replay_of_the_whole_run_evaluates_as_the_run_did(recorded_run: Path, tmp_path: Path) -> None:
    res = _cli(recorded_run, "--evaluate", "--out", tmp_path / "whole")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    last = json.loads((recorded_run / "results.json").read_text())["points"][-1]
    replayed = json.loads((tmp_path / "whole" / "replay.json").read_text())
    assert len(replayed["steps"]) == last["weight_version"] >= 1
    point = replayed["evaluation"]
    assert [e["reply"] for e in point["examples"]] == [e["reply"] for e in last["examples"]]
    for key in ("acceptance", "on_topic", "capability"):
        assert point[key] == last[key]
    assert point["kl_to_base"] == pytest.approx(last["kl_to_base"], rel=1e-3)
    assert "after" in res.stdout and "the run, base:" in res.stdout


@pytest.mark.slow
def test_trainer_flags_after_the_separator_change_the_update(recorded_run: Path, tmp_path: Path) -> None:
    base = _cli(recorded_run, "--steps", "1", "--out", tmp_path / "base")
    other = _cli(recorded_run, "--steps", "1", "--out", tmp_path / "lr", "--", "--lr", "1e-3")
    assert base.returncode == 0 and other.returncode == 0, other.stdout[-3000:] + other.stderr[-3000:]
    flags = (tmp_path / "lr" / "trainer_flags.txt").read_text().split()
    assert flags[flags.index("--lr") + 1] == "1e-3"
    compared = json.loads(_cli("--compare", tmp_path / "base", tmp_path / "lr").stdout)
    assert compared["max_abs_diff"] > 1e-6


def test_refuses_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    res = _cli(tmp_path, timeout=120)
    assert res.returncode == 2
    assert "is not a finished main-job run: trainer_flags.txt is missing" in res.stderr


def test_compare_refuses_unfinished_replays(tmp_path: Path) -> None:
    res = _cli("--compare", tmp_path / "a", tmp_path / "b", timeout=120)
    assert res.returncode == 2 and "not a finished replay" in res.stderr


def test_argument_errors() -> None:
    assert _cli(timeout=120).returncode == 2  # neither a run nor --compare
    res = _cli("--compare", "a", "b", "--", "--lr", "1", timeout=120)
    assert res.returncode == 2 and "apply to a replay, not to --compare" in res.stderr
    assert _cli("--compare", "a", "b", "--evaluate", timeout=120).returncode == 2
