"""The main job's profile arithmetic (openclaw/demo/profile.py): freshness counts a turn from its
answer to the push that served weights trained on it, even when its own step pushed nothing; phase
rates are FLOPs over seconds against the measured peak, and a phase that did not run has none."""

from __future__ import annotations

import pytest
import torch

from openclaw.demo.profile import (
    Phase,
    Profile,
    forward_flops_per_token,
    freshness,
    matmul_peak_gflops,
    trainer_phases,
)


def test_freshness_waits_for_the_push_that_serves_the_turn() -> None:
    answered = {1: 100.0, 2: 101.0, 3: 110.0, 4: 111.0}
    steps = [(105.0, 1, [1, 2]),   # trained and pushed: 5 s and 4 s
             (118.0, 1, [3]),      # trained, no push (version unchanged): waits for the next push
             (130.0, 2, [4])]      # this push serves turns 3 and 4: 20 s and 19 s
    got = freshness(steps, answered)
    assert got["turns"] == 4 and got["median_s"] == pytest.approx(12.0) and got["max_s"] == pytest.approx(20.0)
    assert freshness([(5.0, 0, [1])], {1: 1.0}) == {"turns": 0}  # never served: no delay to report


def test_phase_rates_use_flops_seconds_and_the_peak_of_their_thread_count() -> None:
    prof = Profile(wall_s=100.0, cpu_s=150.0, cores=2, steps=10, interactions=80, peak_gflops={1: 50.0},
                   phases=[Phase("fwd", 4.0, flops=100e9, threads=1), Phase("skipped", 0.0, flops=100e9),
                           Phase("wait", 20.0)])
    fwd, skipped, wait = prof.rows()
    assert fwd["gflops"] == pytest.approx(25.0) and fwd["share_of_peak"] == pytest.approx(0.5)
    assert fwd["per_step"] == pytest.approx(0.4) and fwd["per_interaction"] == pytest.approx(0.05)
    assert skipped["gflops"] is None and wait["gflops"] is None and wait["share_of_wall"] == pytest.approx(0.2)
    assert "| fwd | 4.0 | 0.40 | 0.050 | 4% | 25.0 | 50% (1 thr) |" in prof.markdown()


def test_trainer_phases_split_the_rollout_into_wait_teacher_and_assembly() -> None:
    steps = [{"time/rollout": 5.0, "rollout/buffer_wait_s": 3.0, "rollout/teacher_s": 1.5, "perf/train_tokens": 10,
              "perf/forward_time": 1.0, "perf/backward_time": 1.0, "perf/ref_log_probs_time": 0.5}] * 2
    phases = {p.name.split(":")[1].split("(")[0].strip(): p for p in trainer_phases(steps, 1e9, threads=1)}
    assert phases["waiting for judged turns"].seconds == 6.0 and phases["teacher log-probs"].seconds == 3.0
    assert phases["rollout assembly"].seconds == pytest.approx(1.0)
    assert phases["forward + loss"].flops == 20e9 and phases["optimizer"].seconds == 0.0


def test_flops_per_token_counts_every_linear_weight_and_the_peak_is_measured() -> None:
    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 8), torch.nn.Linear(8, 10, bias=False))
    assert forward_flops_per_token(model) == 2 * (4 * 8 + 8 * 10)
    assert matmul_peak_gflops(1, size=128, seconds=0.05) > 0.1
