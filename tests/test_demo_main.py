"""The main job as a user runs it (`python -m openclaw.demo`, a real subprocess), shortened and on
the tiny model: server + intercept + judge + background trainer + simulated users + evaluation,
ending with a table, a verdict, results.json and the PNG plot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_demo_runs_end_to_end(tiny_model_path: Path, tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "openclaw.demo", "--model-path", str(tiny_model_path), "--interactions", "8",
           "--batch-size", "4", "--evals", "1", "--eval-limit", "4", "--max-tokens", "8", "--eval-max-tokens", "8", "--minutes", "10",
           "--lr", "1e-2", "--out", str(tmp_path)]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "VERDICT:" in out.stdout and "accept%" in out.stdout
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    result = json.loads((run_dir / "results.json").read_text())
    assert result["interactions"] == 8 and result["train_steps"] >= 1 and result["trained_samples"] >= 4
    assert [p["interactions"] for p in result["points"]] == [0, 8]
    assert result["points"][-1]["weight_version"] >= 1  # the evaluated model is the trained one
    assert result["points"][-1]["kl_to_base"] > 0
    assert (result["w_opd"], result["w_rl"]) == (0.5, 1.0)  # combine: the demo's OPD weight, the method's RL weight
    assert [set(e) for e in result["points"][-1]["examples"]] == [
        {"prompt", "reply", "accepted", "on_topic", "meets_preference"}] * 4
    assert result["persona"]["name"] == "brief" and run_dir.name.startswith("brief-combine-s0-")
    assert sorted(s["n"] for s in result["sessions"]) == list(range(1, 9))  # numbered in start order
    assert result["metrics"]["sessions_to_3"]["sessions"] == 8 and "sessions until" in out.stdout
    assert (run_dir / "learning.png").read_bytes()[:4] == b"\x89PNG"


def test_demo_rejects_bad_arguments() -> None:
    out = subprocess.run([sys.executable, "-m", "openclaw.demo", "--reward", "length", "--method", "opd"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "--reward length" in out.stderr


def test_length_check_preset_leaves_the_policy_free_to_game_its_reward() -> None:
    """Under a batch-mean baseline the +/-1 length reward is -1 on nearly every reply, so every
    advantage is 0 and nothing is learned (measured): the check's preset is baseline 0, no KL."""
    from openclaw.demo.__main__ import parse_args

    check = parse_args(["--method", "rl", "--reward", "length"])
    assert (check.baseline, check.rl_score, check.kl_coef, check.lr) == ("zero", "sign", 0.0, 3e-4)
    judged = parse_args(["--method", "rl"])
    assert (judged.baseline, judged.rl_score, judged.kl_coef, judged.lr) == ("batch", "graded", 0.5, 2e-4)
    given = parse_args(["--method", "rl", "--reward", "length", "--kl-coef", "0.2", "--baseline", "batch", "--lr", "1e-4"])
    assert (given.baseline, given.kl_coef, given.lr) == ("batch", 0.2, 1e-4)  # a flag on the command line wins


def test_kl_target_reaches_the_trainer_as_slimes_adaptive_kl_flags() -> None:
    from slime.utils.arguments import parse_config

    from openclaw.demo.__main__ import parse_args
    from openclaw.demo.presets import kl_flags

    args = parse_args([])  # combine's preset steers the weight
    algorithm = parse_config(["--hf-checkpoint", "m", *kl_flags(args.kl_coef, args.kl_target, args.kl_horizon)]).algorithm
    assert (algorithm.use_kl_loss, algorithm.kl_loss_coef, algorithm.kl_loss_target, algorithm.kl_loss_horizon) == (
        True, 0.5, 0.08, 5.0)
    fixed = parse_args(["--kl-target", "0"])
    assert (fixed.kl_coef, fixed.kl_target, fixed.kl_horizon) == (0.5, None, None)
    rl = parse_args(["--method", "rl", "--kl-target", "0.1"])  # rl's preset keeps a fixed weight unless asked
    assert (rl.kl_target, rl.kl_horizon, parse_args(["--method", "rl"]).kl_target) == (0.1, None, None)
    assert parse_args(["--kl-coef", "0"]).kl_target is None  # no KL term, nothing to steer
    assert parse_config(["--hf-checkpoint", "m", *kl_flags(0.5)]).algorithm.kl_loss_target is None
    assert kl_flags(0.0) == []
    out = subprocess.run([sys.executable, "-m", "openclaw.demo", "--kl-target", "0.08", "--kl-coef", "0"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "--kl-target" in out.stderr
