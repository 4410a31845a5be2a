"""Verdict parsing, thresholded majority vote, hint acceptance, prompts, metrics, config and the
collapse guard: pure functions with hand-worked cases."""

from __future__ import annotations

import argparse

import pytest

from openclaw.judge.collapse import ADVICE, CollapseMonitor
from openclaw.judge.config import JudgeConfig, JudgeConfigError, add_judge_args
from openclaw.judge.feedback_hint import feedback_hint
from openclaw.judge.hints import HintVote, aggregate_hints, parse_hint_vote
from openclaw.judge.metrics import evaluate_predictions
from openclaw.judge.prompts import build_hint_messages, build_prm_messages
from openclaw.judge.votes import majority_vote, parse_verdict


@pytest.mark.parametrize("text,expected", [
    ("reasoning... \\boxed{1}", 1),
    ("\\boxed{-1}", -1),
    ("\\boxed{0}", 0),
    ("\\boxed{ +1 }", 1),
    ("first \\boxed{1} then I changed my mind \\boxed{-1}", -1),  # last box wins
    ("\\boxed{-1} ... final: \\boxed{0}", 0),
    ("no verdict here", None),
    ("", None),
    (None, None),
    ("\\boxed{2}", None),
    ("\\boxed{good}", None),
    ("\\boxed{}", None),
    ("\\boxed{1} but finally \\boxed{5}", None),  # the last box is what counts, and it is invalid
    ("boxed{1}", None),
])
def test_parse_verdict(text, expected) -> None:
    assert parse_verdict(text) == expected


def test_majority_clear_win() -> None:
    r = majority_vote([1, 1, 1], 0.6)
    assert (r.reward, r.reason, r.counts[1], r.n_valid) == (1.0, "majority", 3, 3)


def test_threshold_edge_exactly_three_of_five_wins() -> None:
    # 3/5 = 0.6 exactly: reaches the default threshold, so the label wins.
    r = majority_vote([-1, -1, -1, 1, 0], 0.6)
    assert r.reward == -1.0 and r.reason == "majority" and r.winner_share == pytest.approx(0.6)


def test_threshold_edge_just_below() -> None:
    # 2/4 = 0.5 < 0.6 (after dropping the invalid vote): no winner, reward 0.
    r = majority_vote([1, 1, -1, 0, None], 0.6)
    assert r.reward == 0.0 and r.reason == "below_threshold" and r.n_valid == 4
    # 3/5 with threshold 0.61 is below.
    assert majority_vote([1, 1, 1, -1, -1], 0.61).reward == 0.0


def test_invalid_votes_do_not_dilute_share() -> None:
    # 2 of 3 valid votes = 0.667 >= 0.6 even though 2 of 5 total would not be.
    r = majority_vote([1, 1, -1, None, None], 0.6)
    assert r.reward == 1.0 and r.n_valid == 3 and r.votes == [1, 1, -1, None, None]


def test_tie_is_zero_even_with_low_threshold() -> None:
    r = majority_vote([1, 1, -1, -1], 0.5)
    assert r.reward == 0.0 and r.reason == "tie"
    assert majority_vote([1, -1], 0.5).reason == "tie"


def test_all_invalid_is_zero_and_flagged() -> None:
    r = majority_vote([None, None, None], 0.6)
    assert r.reward == 0.0 and r.all_invalid and r.reason == "all_invalid"
    assert majority_vote([], 0.6).all_invalid


def test_single_vote() -> None:
    assert majority_vote([-1], 0.6).reward == -1.0
    assert majority_vote([0], 1.0).reward == 0.0
    r = majority_vote([None], 0.6)
    assert r.all_invalid and r.reward == 0.0


def test_zero_label_can_win() -> None:
    assert majority_vote([0, 0, 1], 0.6).reason == "majority"


def test_bad_threshold_and_votes_rejected() -> None:
    with pytest.raises(ValueError):
        majority_vote([1], 0.0)
    with pytest.raises(ValueError):
        majority_vote([1], 1.5)
    with pytest.raises(ValueError):
        majority_vote([2], 0.6)


def test_hint_votes_and_acceptance() -> None:
    good = "Use metric units; the user is in Germany. [HINT_START]The user wants kilometres, not miles.[HINT_END] \\boxed{1}"
    v = parse_hint_vote(good)
    assert v.accept and v.hint == "The user wants kilometres, not miles."
    assert parse_hint_vote("nothing to learn \\boxed{-1}") == HintVote(False, None)
    assert parse_hint_vote("garbage").accept is None
    # 2 of 3 accept with long enough hints: accepted, the longest kept.
    r = aggregate_hints([v, parse_hint_vote("[HINT_START]Use kilometres.[HINT_END]\\boxed{1}"),
                         HintVote(False, None)], min_chars=10)
    assert r.reason == "accepted" and r.hint == "The user wants kilometres, not miles."
    # 1 of 2 is not a strict majority.
    assert aggregate_hints([v, HintVote(False, None)]).hint is None
    # a majority accepts but the hints are too short.
    short = parse_hint_vote("[HINT_START]km[HINT_END]\\boxed{1}")
    assert aggregate_hints([short, short, v], min_chars=10).reason == "too_short"


def test_prompts_are_role_aware() -> None:
    user = build_prm_messages("resp", "no, I meant X", "user")
    tool = build_prm_messages("resp", "Traceback ...", "tool")
    assert "user's next message" in user[0]["content"] and "tool call" in tool[0]["content"]
    assert "\\boxed{1}" in user[0]["content"] and "no, I meant X" in user[1]["content"]
    assert "(empty" in build_prm_messages("resp", "", "user")[1]["content"]
    hint = build_hint_messages("resp", "no, I meant X", "user", prompt=[{"role": "user", "content": "Q"}])
    assert "[HINT_START]" in hint[0]["content"] and "user: Q" in hint[1]["content"]


def test_feedback_hint_uses_the_feedback() -> None:
    v = feedback_hint("No, I meant in kilometers, not miles.", "user", -1)
    assert v.accept and v.hint == "No, I meant in kilometers, not miles."
    assert not feedback_hint("Thanks, perfect!", "user", 1).accept
    assert not feedback_hint("What's the weather in Paris?", "user", 0).accept
    assert not feedback_hint("", "user", 0).accept
    assert not feedback_hint("Try again.", "user", -1).accept  # no information beyond "wrong"
    tool = feedback_hint("Traceback (most recent call last):\nKeyError: 'id'", "tool", -1)
    assert tool.accept and "KeyError: 'id'" in tool.hint


def test_metrics_hand_worked() -> None:
    rep = evaluate_predictions([1, 1, 0, -1, -1, -1], [1, 0, 0, -1, -1, 1])
    assert rep.accuracy == pytest.approx(4 / 6)
    assert rep.precision[1] == pytest.approx(1 / 2) and rep.recall[1] == pytest.approx(1 / 2)
    assert rep.precision[-1] == 1.0 and rep.recall[-1] == pytest.approx(2 / 3)
    assert rep.confusion[-1][1] == 1 and rep.confusion[1][0] == 1
    assert "confusion" in rep.format()
    with pytest.raises(ValueError):
        evaluate_predictions([2], [1])


def _cfg(argv: list[str], env: dict[str, str]) -> JudgeConfig:
    p = add_judge_args(argparse.ArgumentParser(), env)
    return JudgeConfig.from_args(p.parse_args(argv))


def test_config_flags_and_env() -> None:
    c = _cfg([], {"MAJORITY_VOTE_N": "5", "MAJORITY_VOTE_THRESHOLD": "0.8"})
    assert (c.backend, c.m, c.threshold) == ("cpu", 5, 0.8)
    assert _cfg(["--majority-vote-n", "7"], {"MAJORITY_VOTE_N": "5"}).m == 7
    assert _cfg(["--prm-m", "2"], {}).m == 2
    assert _cfg(["--judge-url", "http://127.0.0.1:1/v1"], {}).backend == "llm"
    assert _cfg([], {"JUDGE_MODEL_PATH": "/m"}).prm_model_path == "/m"
    assert _cfg(["--custom-rm-path", "./x.py"], {}).backend == "custom"
    assert _cfg(["--judge-backend", "cpu", "--judge-url", "http://h/v1"], {}).backend == "cpu"  # explicit wins
    for bad in (["--majority-vote-threshold", "0"], ["--prm-m", "0"], ["--judge-backend", "llm"],
                ["--num-judge-workers", "0"]):
        with pytest.raises(JudgeConfigError):
            _cfg(bad, {})


def test_collapse_monitor_warns_once_per_window_with_advice() -> None:
    mon = CollapseMonitor(window=20, threshold=0.9, min_count=20)
    msgs = [mon.observe(0.0) for _ in range(19)]
    assert all(m is None for m in msgs)  # not enough verdicts yet
    msg = mon.observe(0.0)
    assert msg is not None and "100% of the last 20" in msg and ADVICE in msg and "--majority-vote-n 7" in msg
    assert all(mon.observe(0.0) is None for _ in range(19))  # rate limited
    assert mon.observe(0.0) is not None and mon.warnings == 2


def test_collapse_monitor_quiet_on_mixed_rewards() -> None:
    mon = CollapseMonitor(window=20, threshold=0.9, min_count=20)
    rewards = [1.0, -1.0, 0.0, 0.0, 0.0] * 8
    assert all(mon.observe(r) is None for r in rewards)
    st = mon.stats()
    assert not st.collapsed and st.shares["0"] == pytest.approx(0.6)
    # 19 zeros and 1 one: 95% > 90% collapses.
    mon2 = CollapseMonitor(window=20, threshold=0.9, min_count=20)
    outs = [mon2.observe(r) for r in [1.0] + [0.0] * 19]
    assert outs[-1] is not None
