"""Binary RL's reward signal: the judge's graded score and a baseline
carried across steps, so a new user whose preference makes nearly every turn -1 still gives binary
RL something to learn from.

Real parts: the real CPU judge (MiniLM + head) judges hand-written turns in a real SQLite buffer
through the worker's `judge_once`; openclaw-rl's own rollout plugin drains them; the launcher's
dry-run plan is parsed by slime's own parser.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from slime.utils.arguments import parse_config
from slime.utils.plugins import load_plugin_module

from openclaw.bridge import BufferDataSource
from openclaw.bridge.flags import DEFAULT_RL_BASELINE, DEFAULT_RL_SCORE
from openclaw.bridge.reward import RlSignal, RunningBaseline
from openclaw.bridge.source import drain
from openclaw.buffer import TrajectoryBuffer, TurnRecord
from openclaw.judge.config import JudgeConfig
from openclaw.judge.graded import graded_score

REPO = Path(__file__).resolve().parents[1]
rollout = load_plugin_module("openclaw-rl/openclaw_buffer_rollout.py")

LONG_REPLY = ("Photosynthesis is the process by which green plants, algae and some bacteria convert light energy "
              "into chemical energy. Using sunlight, water and carbon dioxide, they produce glucose and release "
              "oxygen as a by-product. It takes place mainly in the chloroplasts of leaf cells.")
# What a user says next, from pleased to fed up (hand-written; none of these is in the judge's training pools).
THANKS = "Great, that's exactly what I needed."
MILD = "Almost, just a touch shorter next time."
HARSH = "Ugh, way, way too long. I said brief. This is an essay."
OFF_TOPIC = "That doesn't answer my question at all. Please answer what I asked."
SILENCE = "..."
FEEDBACK = [THANKS, MILD, HARSH, OFF_TOPIC, SILENCE]


@pytest.fixture(scope="module")
def judged_buffer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One turn per feedback message, judged by the real CPU judge (the server's worker path)."""
    from openclaw.judge.cpu_judge import CpuJudge
    from openclaw.judge.worker import JudgeStats, judge_once

    buf_dir = tmp_path_factory.mktemp("graded") / "buf"
    with TrajectoryBuffer.open(buf_dir) as buf:
        for i, feedback in enumerate(FEEDBACK):
            buf.append_turn(TurnRecord(session_id=f"s{i}", turn_index=0, turn_type="main",
                                       messages=[{"role": "user", "content": "What is photosynthesis?"}],
                                       prompt_ids=[1, 2, 3 + i], response_ids=[7, 8, 9],
                                       response_logprobs=[-0.5, -1.0, -0.25], response_text=LONG_REPLY,
                                       weight_version=0))
            buf.attach_next_state(f"s{i}", {"role": "user", "content": feedback})
        judge = CpuJudge()
        config = JudgeConfig(backend="cpu", num_workers=1, batch_size=16)
        assert judge_once(buf, judge, config, "judge-test", JudgeStats()) == len(FEEDBACK)
    return buf_dir


def _judgements(buf_dir: Path) -> dict[str, dict[str, Any]]:
    with TrajectoryBuffer.open(buf_dir) as buf:
        recs = buf.fetch_judged("inspect", limit=100, turn_type="main")
    by_session = {r.session_id: r.judgement for r in recs}
    return {fb: by_session[f"s{i}"] for i, fb in enumerate(FEEDBACK)}


def _args(buf_dir: Path, batch: int, consumer: str, **kw: Any) -> argparse.Namespace:
    base = dict(rl_buffer_dir=str(buf_dir), buffer_consumer_id=consumer, rollout_batch_size=batch,
                buffer_wait_timeout=2.0, buffer_min_batch=1, buffer_poll_interval=0.05, buffer_progress_interval=30.0,
                max_staleness=None, save=None, load=None, openclaw_method="rl", custom_rm_path=None,
                n_samples_per_prompt=1, advantage_estimator="grpo", rewards_normalization=False,
                openclaw_rl_score="graded", openclaw_rl_baseline="running", openclaw_rl_baseline_decay=0.5)
    return argparse.Namespace(**{**base, **kw})


def test_graded_score_orders_real_cpu_judge_verdicts(judged_buffer: Path) -> None:
    j = _judgements(judged_buffer)
    graded = {fb: graded_score(j[fb]) for fb in FEEDBACK}
    assert all(-1.0 <= g <= 1.0 for g in graded.values()), graded
    # a mild complaint scores above a harsh one, and thanks above both
    assert graded[THANKS] > graded[MILD] > graded[HARSH], graded
    assert graded[THANKS] > 0.5 and graded[HARSH] < -0.5, graded
    # The sign cannot tell them apart, or drops the mild one as "no signal"; the grade is the head's expectation.
    assert j[HARSH]["score"] == -1.0 and j[MILD]["score"] in (0.0, -1.0)
    p = j[MILD]["extra"]["proba"]
    assert graded[MILD] == pytest.approx(p["1"] - p["-1"])
    # a decisive rule (silence) is certain: its label, 0 = no signal, in either mode
    assert j[SILENCE]["extra"]["rule"] == "silence" and graded[SILENCE] == 0.0


def test_graded_score_of_llm_votes_and_unreadable_judgements() -> None:
    assert graded_score({"backend": "llm", "score": 1.0, "votes": [1, 1, -1, None]}) == pytest.approx(1 / 3)
    assert graded_score({"backend": "llm", "score": 0.0, "votes": [None, None], "all_invalid": True}) == 0.0
    assert graded_score({"backend": "custom", "score": 0.3, "votes": []}) == pytest.approx(0.3)
    assert graded_score({"backend": "custom", "score": 7.0}) == 1.0  # clipped to [-1, 1]
    assert graded_score({"score": float("nan")}) == 0.0 and graded_score(None) == 0.0


def test_graded_drain_trains_on_the_mild_complaint_sign_drain_does_not(judged_buffer: Path) -> None:
    j = _judgements(judged_buffer)
    sign = BufferDataSource(_args(judged_buffer, 10, "sign", openclaw_rl_score="sign", openclaw_rl_baseline="slime"))
    graded = BufferDataSource(_args(judged_buffer, 10, "graded"))
    sign_turns = {r.session_id for r in sign.take(10).records}
    graded_turns = {r.session_id for r in graded.take(10).records}
    silence = f"s{FEEDBACK.index(SILENCE)}"
    assert silence not in graded_turns and silence not in sign_turns  # no signal either way
    if j[MILD]["score"] == 0.0:  # the head calls it neutral: the sign drops it, the grade keeps it
        assert f"s{FEEDBACK.index(MILD)}" in graded_turns - sign_turns
    assert graded_turns == {f"s{i}" for i, fb in enumerate(FEEDBACK) if fb != SILENCE}


def test_combine_drain_rewards_the_graded_score(judged_buffer: Path) -> None:
    """openclaw-combine's binary-RL half with --openclaw-rl-score graded: the drained samples' reward is
    the judge's graded score (combine's provider defines the score flag, not the baseline ones)."""
    j = _judgements(judged_buffer)
    args = _args(judged_buffer, 10, "combine", openclaw_method="combine")
    del args.openclaw_rl_baseline, args.openclaw_rl_baseline_decay
    samples, _ = drain(args, BufferDataSource(args), "combine")
    by_session = {s.session_id: s.reward for s in samples}
    assert by_session == pytest.approx({f"s{i}": graded_score(j[fb]) for i, fb in enumerate(FEEDBACK) if fb != SILENCE})
    args.openclaw_rl_score = "sign"
    sign = BufferDataSource(argparse.Namespace(**{**vars(args), "buffer_consumer_id": "combine-sign"}))
    assert not sign.graded


def test_rollout_centres_by_the_running_baseline_and_carries_it(judged_buffer: Path) -> None:
    """openclaw-rl's rollout with --openclaw-rl-score graded --openclaw-rl-baseline running: rewards
    are graded score - b, b carried from step to step and through the data source's state."""
    j = _judgements(judged_buffer)
    order = [fb for fb in FEEDBACK if fb != SILENCE]  # oldest first, as drained
    g = [graded_score(j[fb]) for fb in order]
    args = _args(judged_buffer, 2, "rollout")
    ds = BufferDataSource(args)
    first = rollout.generate_rollout(args, 0, ds)
    s1 = [s for group in first.samples for s in group]
    assert [s.metadata["raw_reward"] for s in s1] == pytest.approx(g[:2])
    b1 = (g[0] + g[1]) / 2  # the first step's baseline is its own mean
    assert [s.reward for s in s1] == pytest.approx([g[0] - b1, g[1] - b1])
    assert first.metrics["rollout/reward_baseline"] == pytest.approx(b1)
    # A new data source restored from the state (a resumed trainer) carries the baseline on.
    resumed = BufferDataSource(args)
    resumed.load_state_dict(ds.state_dict())
    resumed.pending = set(ds.pending)
    second = rollout.generate_rollout(args, 1, resumed)
    s2 = [s for group in second.samples for s in group]
    assert [s.metadata["raw_reward"] for s in s2] == pytest.approx(g[2:4])
    assert [s.reward for s in s2] == pytest.approx([g[2] - b1, g[3] - b1])  # b from the past, not this batch
    assert resumed.reward_baseline.value == pytest.approx(0.5 * b1 + 0.5 * (g[2] + g[3]) / 2)


def test_running_baseline_arithmetic_over_steps() -> None:
    b = RunningBaseline(decay=0.9)
    centred, used = b.centre([-1.0, -1.0, -1.0, 1.0])
    assert used == pytest.approx(-0.5) and centred == pytest.approx([-0.5, -0.5, -0.5, 1.5])
    # An all-bad batch: batch-mean centring would give four zeros; the carried baseline gives -0.5 each.
    centred, used = b.centre([-1.0] * 4)
    assert used == pytest.approx(-0.5) and centred == pytest.approx([-0.5] * 4)
    assert b.value == pytest.approx(0.9 * -0.5 + 0.1 * -1.0)
    # The rare good turn after mostly bad ones: a large positive advantage.
    centred, used = b.centre([1.0, -1.0, -1.0, -1.0])
    assert used == pytest.approx(-0.55) and centred[0] == pytest.approx(1.55)
    assert b.steps == 3
    again = RunningBaseline(decay=0.9)
    again.load_state_dict(b.state_dict())
    assert (again.value, again.steps) == (b.value, b.steps)
    assert RunningBaseline().centre([]) == ([], 0.0)


def test_running_baseline_refuses_slime_group_centring() -> None:
    ns = argparse.Namespace(openclaw_rl_score="graded", openclaw_rl_baseline="running", openclaw_rl_baseline_decay=0.9,
                            n_samples_per_prompt=8, rewards_normalization=True)
    with pytest.raises(ValueError, match="--n-samples-per-prompt 1 --disable-rewards-normalization"):
        RlSignal.from_args(ns)
    ns.n_samples_per_prompt, ns.rewards_normalization = 1, False
    assert RlSignal.from_args(ns) == RlSignal("graded", "running", 0.9)
    # another method's args (no openclaw-rl flags): the reference's binary RL
    assert RlSignal.from_args(argparse.Namespace()) == RlSignal(DEFAULT_RL_SCORE, DEFAULT_RL_BASELINE)


def _dry_run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MODEL_PATH", "RAY_ADDRESS", "ROLLOUT_ARGS", "METHOD_ARGS")}
    env.update(OPENCLAW_DRY_RUN="1", RL_BUFFER_DIR=str(tmp_path / "buf"), CKPT_SAVE_DIR=str(tmp_path / "ckpt"),
               LOG_DIR=str(tmp_path / "logs"), CPU_PRESET_MODEL="tiny", RAY_AUTH_MODE="disabled", PYTHON=sys.executable)
    return subprocess.run(["bash", "openclaw-rl/run_binary_rl.sh", *argv], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


def test_flags_route_through_the_launcher_and_bad_values_are_errors(tmp_path: Path) -> None:
    from openclaw.launch import LaunchError, build_plan

    out = _dry_run(tmp_path, "--openclaw-rl-score", "graded", "--openclaw-rl-baseline", "running",
                   "--n-samples-per-prompt", "1", "--rollout-batch-size", "8", "--disable-rewards-normalization")
    assert out.returncode == 0, out.stderr
    submit = next(line for line in out.stdout.splitlines() if line.startswith("would run submit:"))
    trainer = submit.split(" -- python slime/train.py ", 1)[1].split()
    args = parse_config(trainer, env={}).to_namespace()
    assert (args.openclaw_rl_score, args.openclaw_rl_baseline, args.n_samples_per_prompt) == ("graded", "running", 1)
    assert args.rewards_normalization is False
    bad = _dry_run(tmp_path, "--openclaw-rl-score", "loud")
    assert bad.returncode != 0 and "--openclaw-rl-score" in bad.stderr and "loud" in bad.stderr, bad.stderr
    # The same plan in-process (what the script execs): the preset's defaults are the reference's binary RL,
    # and every bad value stops the launch naming its flag.
    env = {k: v for k, v in os.environ.items() if k not in ("MODEL_PATH", "RAY_ADDRESS", "ROLLOUT_ARGS")}
    env.update(RL_BUFFER_DIR=str(tmp_path / "buf"), CKPT_SAVE_DIR=str(tmp_path / "ckpt"), LOG_DIR=str(tmp_path / "logs"),
               CPU_PRESET_MODEL="tiny", RAY_AUTH_MODE="disabled")
    plain = build_plan("openclaw-rl", [], env, REPO).trainer_argv()
    plain_args = parse_config(plain[2:], env={}).to_namespace()
    assert (plain_args.openclaw_rl_score, plain_args.openclaw_rl_baseline) == (DEFAULT_RL_SCORE, DEFAULT_RL_BASELINE)
    assert (DEFAULT_RL_SCORE, DEFAULT_RL_BASELINE) == ("sign", "slime")
    for flag, value in (("--openclaw-rl-baseline", "median"), ("--openclaw-rl-baseline-decay", "1.5")):
        with pytest.raises(LaunchError, match=flag):
            build_plan("openclaw-rl", [flag, value], env, REPO)
    # A rule across flags (the provider's check_args) also stops the launch, before any server starts:
    # the preset's groups of 8 would be centred again by slime, undoing the running baseline.
    with pytest.raises(LaunchError, match="running replaces slime's group baseline: pass --n-samples-per-prompt 1"):
        build_plan("openclaw-rl", ["--openclaw-rl-baseline", "running"], env, REPO)
    with pytest.raises(LaunchError, match="groups of one gives every advantage 0"):
        build_plan("openclaw-combine", ["--n-samples-per-prompt", "1"], env, REPO)


def test_demo_presets_pick_the_signal_per_method() -> None:
    from openclaw.demo.__main__ import parse_args
    from openclaw.demo.presets import method_flags

    rl = parse_args(["--method", "rl"])
    assert (rl.baseline, rl.rl_score) == ("batch", "graded")
    assert parse_args(["--method", "rl", "--baseline", "running"]).baseline == "running"
    length = parse_args(["--method", "rl", "--reward", "length"])  # the reward-hacking check: free to game it
    assert (length.baseline, length.rl_score) == ("zero", "sign")
    assert (parse_args([]).baseline, parse_args([]).rl_score) == ("batch", "sign")  # combine unchanged
    flags = method_flags("rl", model_path="m", engine_addr="127.0.0.1:1", buffer_dir="/b", batch_size=8, lr=2e-4,
                         lora_rank=4, wait_timeout=None, baseline="running", rl_score="graded")
    args = parse_config(flags, env={}).to_namespace()
    assert (args.rollout_batch_size, args.n_samples_per_prompt, args.rewards_normalization) == (8, 1, False)
    assert (args.openclaw_rl_baseline, args.openclaw_rl_score) == ("running", "graded")
    with pytest.raises(ValueError, match="binary RL"):
        method_flags("combine", model_path="m", engine_addr="e", buffer_dir="/b", batch_size=8, lr=1e-4, lora_rank=4,
                     wait_timeout=None, baseline="running")
    # combine's binary-RL half takes the graded score too; its data source reads the flag
    combine = parse_args(["--rl-score", "graded"])
    assert (combine.method, combine.baseline, combine.rl_score) == ("combine", "batch", "graded")
    flags = method_flags("combine", model_path="m", engine_addr="127.0.0.1:1", buffer_dir="/b", batch_size=8, lr=2e-4,
                         lora_rank=4, wait_timeout=None, rl_score=combine.rl_score)
    args = parse_config(flags, env={}).to_namespace()
    assert args.openclaw_rl_score == "graded" and not hasattr(args, "openclaw_rl_baseline")
    assert RlSignal.from_args(args).score == "graded"
    with pytest.raises(ValueError, match="opd has none"):
        method_flags("opd", model_path="m", engine_addr="e", buffer_dir="/b", batch_size=8, lr=1e-4, lora_rank=4,
                     wait_timeout=None, rl_score="graded")
    for argv, needs in ((["--method", "combine", "--baseline", "running"], "--method rl"),
                        (["--method", "opd", "--rl-score", "graded"], "--method rl or combine")):
        bad = subprocess.run([sys.executable, "-m", "openclaw.demo", *argv], cwd=REPO, capture_output=True, text=True,
                             timeout=60)
        assert bad.returncode == 2 and needs in bad.stderr, bad.stderr
