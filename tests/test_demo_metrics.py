"""The main job's metrics: the reference's sessions-to-3-consecutive (in session start order,
censored when not reached) and the bootstrap confidence intervals (paired for the delta)."""

from __future__ import annotations

import pytest

from openclaw.demo import metrics, report
from openclaw.demo.metrics import (
    bootstrap_mean,
    learning_metrics,
    paired_bootstrap_delta,
    sessions_metric,
    sessions_to_consecutive,
)


def test_sessions_to_three_consecutive() -> None:
    T, F = True, False
    assert sessions_to_consecutive([T, T, T]).value == 3
    assert sessions_to_consecutive([F, T, T, F, T, T, T, F]).value == 7
    assert sessions_to_consecutive([T, T, F, T, T, F, T, T, T, T]).value == 9
    assert sessions_to_consecutive([T, T, F], k=2).value == 2
    assert sessions_to_consecutive([T] * 5, k=1).value == 1


def test_sessions_metric_is_censored_when_never_reached() -> None:
    m = sessions_to_consecutive([True, True, False] * 10)
    assert m.value is None and not m.reached and m.sessions == 30
    assert str(m) == "not reached (> 30)"
    assert m.to_dict() == {"value": None, "sessions": 30, "k": 3, "text": "not reached (> 30)"}
    assert str(sessions_to_consecutive([])) == "not reached (> 0)"


def test_sessions_are_read_in_start_order_not_finish_order() -> None:
    # Concurrent users: sessions 4 and 5 finished before 2 and 3. Finish order would show
    # accepted, accepted, rejected, ... ; start order 1..6 has its first run of three at 6.
    finished = [{"n": 1, "accepted": True}, {"n": 4, "accepted": True}, {"n": 5, "accepted": True},
                {"n": 2, "accepted": False}, {"n": 3, "accepted": True}, {"n": 6, "accepted": True}]
    assert sessions_metric(finished).value == 5  # 3, 4, 5 in start order
    assert sessions_metric(finished[:3] + finished[3:4]).value is None  # 1, 2(no), 4, 5: never three in a row
    with pytest.raises(ValueError, match="distinct"):
        sessions_metric([{"n": 1, "accepted": True}, {"n": 1, "accepted": True}])


def test_bootstrap_ci_covers_the_estimate_and_is_deterministic() -> None:
    values = [1] * 13 + [0] * 32  # 28.9% of 45 prompts
    ci = bootstrap_mean(values)
    assert ci.estimate == pytest.approx(100 * 13 / 45)
    assert ci.low < ci.estimate < ci.high and ci.n == 45
    assert 10 < ci.high - ci.low < 40  # a 95% interval for n=45 is about +-13 points
    assert bootstrap_mean(values) == ci  # fixed seed: the same interval every time
    spread = [i / 44 for i in range(45)]  # continuous values: the seed shows in the interval's ends
    assert bootstrap_mean(spread, seed=1) != bootstrap_mean(spread)
    assert metrics.BOOTSTRAP_RESAMPLES >= 2000
    constant = bootstrap_mean([1, 1, 1])
    assert (constant.low, constant.estimate, constant.high) == (100.0, 100.0, 100.0)


def test_paired_bootstrap_is_tighter_than_unpaired_for_correlated_items() -> None:
    before = [0, 0, 1, 1, 0, 1, 0, 0, 1, 0] * 4
    after = [1, 0, 1, 1, 1, 1, 0, 0, 1, 0] * 4  # same prompts, two more accepted per ten
    d = paired_bootstrap_delta(before, after)
    assert d.estimate == pytest.approx(20.0)
    assert d.low <= d.estimate <= d.high and d.low > 0  # every change is an improvement
    assert paired_bootstrap_delta(before, after) == d
    with pytest.raises(ValueError):
        paired_bootstrap_delta([1, 0], [1])


def _point(accepted: list[bool], correct: list[bool], kl: float | None) -> dict:
    return {"acceptance": 100 * sum(accepted) / len(accepted), "preference": 50.0, "on_topic": 90.0,
            "capability": 100 * sum(correct) / len(correct), "kl_to_base": kl,
            "examples": [{"accepted": a, "on_topic": True} for a in accepted],
            "probe_examples": [{"correct": c} for c in correct]}


def test_learning_metrics_and_printed_lines() -> None:
    before = _point([False] * 10, [True, False] * 5, 0.0)
    after = _point([True] * 4 + [False] * 6, [True, False] * 5, 0.05)
    sessions = [{"n": i, "accepted": i > 7} for i in range(1, 13)]
    m = learning_metrics([before, after], sessions)
    assert m["acceptance"]["delta"]["estimate"] == pytest.approx(40.0)
    assert m["sessions_to_3"]["value"] == 10 and m["kl_to_base"] == 0.05
    text = "\n".join(report.metric_lines(m))
    assert "0.0% [0.0, 0.0] -> 40.0%" in text and "+40.0 points" in text
    assert "3 consecutive live sessions: 10" in text and "capability +0.0" in text
    # An older results.json (no per-probe answers, no sessions): those parts are absent, not invented.
    old = learning_metrics([{**before, "probe_examples": []}, {**after, "probe_examples": []}], None)
    assert old["capability"] is None and old["sessions_to_3"] is None
    assert "sessions until" not in "\n".join(report.metric_lines(old))


def _result(path, persona: dict | None, seed: int | None, after_accepted: int, sessions: list | None) -> str:
    import json

    examples = lambda k: [{"prompt": "p", "reply": "r", "accepted": i < k, "on_topic": True} for i in range(10)]  # noqa: E731
    point = lambda n, k: {"interactions": n, "weight_version": 0, "acceptance": 10.0 * k, "preference": 10.0 * k,  # noqa: E731
                          "on_topic": 100.0, "capability": 60.0, "mean_words": 20.0, "kl_to_base": 0.0 if n == 0 else 0.1,
                          "examples": examples(k)}
    r = {"command": "python -m openclaw.demo", "method": "combine", "reward": "judge", "interactions": 40,
         "train_steps": 5, "minutes": 12.0, "verdict": "PASS", "reason": "r", "points": [point(0, 0), point(40, after_accepted)]}
    if persona is not None:
        r.update(persona=persona, seed=seed, sessions=sessions)
    path.write_text(json.dumps(r))
    return str(path)


def test_methods_report_collects_new_and_old_results(tmp_path) -> None:
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    brief = {"name": "brief", "preference": "short", "instructions": []}
    files = [_result(tmp_path / f"r{s}.json", brief, s, k, [{"n": i, "accepted": i >= 5} for i in range(1, 41)])
             for s, k in ((0, 3), (1, 4), (2, 2))]
    files.append(_result(tmp_path / "old.json", None, None, 2, None))  # a run from before personas and sessions
    report = tmp_path / "report.md"
    out = subprocess.run([sys.executable, "bench/methods_learning.py", "--collect", *files, "--report", str(report)],
                         cwd=repo, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    text = report.read_text()
    assert "| brief | combine | 0 | 40 | 0.0 [0.0, 0.0] -> 30.0 [" in text and "| 7 |" in text  # s3: sessions 5, 6, 7
    assert "| brief (old rule) | combine | - | 40 |" in text and "+20.0 [" in text
    assert "brief / combine** over 3 seeds: acceptance gain median +30.0, mean +30.0 +- 10.0 (sd)" in text
    assert "**combine**: 1 of 2 personas gain >= +25" in text


def test_suite_plan_runs_each_persona_alone_and_seeds_the_default() -> None:
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "methods_learning", Path(__file__).resolve().parents[1] / "bench" / "methods_learning.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    runs = bench.plan(["brief", "no_commas"], ["combine", "rl-length"], [0, 1, 2])
    assert runs == [("brief", "combine", 0), ("brief", "combine", 1), ("brief", "combine", 2),
                    ("brief", "rl-length", 0), ("no_commas", "combine", 0)]
    assert len(bench.SUITE) == 6 and bench.SUITE[0] == "brief"
