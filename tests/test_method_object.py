"""A personal-agent method is one object (`openclaw.methods`): the launcher's recipes, the main job,
the Tinker trainer and the buffer-to-trainer bridge all read it. A fourth method is one file plus its
plugins (tests/data/toy_method), and every one of them accepts it."""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from slime.utils.arguments import parse_config

import openclaw.bridge as bridge
from openclaw.buffer import TrajectoryBuffer, TurnRecord
from openclaw.demo.presets import demo_preset, method_flags
from openclaw.launch.recipes import RECIPES, get_recipe
from openclaw.launch.settings import LaunchError
from openclaw.methods import KINDS, MethodError, builtin_methods, get_method

REPO = Path(__file__).resolve().parents[1]
TOY = "tests/data/toy_method/toy_method.py"
# (score, hint): one judged turn of each signal kind
SIGNALS = [(1.0, None), (-1.0, "be brief"), (0.0, "keep it short"), (0.0, None), (1.0, "shorter")]


def _tinker():
    spec = importlib.util.spec_from_file_location("openclaw_tinker_train_m", REPO / "openclaw-tinker" / "tinker_train.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _judged_buffer(buf_dir: Path) -> None:
    with TrajectoryBuffer.open(buf_dir) as buf:
        ids = []
        for i, _ in enumerate(SIGNALS):
            ids.append(buf.append_turn(TurnRecord(
                session_id=f"s{i}", turn_index=0, turn_type="main", messages=[{"role": "user", "content": f"q{i}"}],
                prompt_ids=[1, 2, 3 + i], response_ids=[7, 8], response_logprobs=[-0.5, -1.0], response_text="a")))
            buf.attach_next_state(f"s{i}", {"role": "user", "content": "feedback"})
        by_id = dict(zip(ids, SIGNALS, strict=True))
        for rec in buf.claim_for_judging("w", limit=100):
            score, hint = by_id[rec.turn_id]
            assert buf.write_judgement(rec.turn_id, {"score": score, "hint": hint}, worker_id="w")


def test_builtin_methods_are_what_every_entry_point_runs() -> None:
    methods = builtin_methods()
    assert list(methods) == ["rl", "opd", "combine"]
    for m in methods.values():
        for plugin in (m.provider, m.rollout, m.loss):
            if plugin:
                assert (REPO / plugin.split(":")[0]).is_file(), plugin
        recipe = RECIPES[m.recipe]
        assert recipe.provider == m.provider and recipe.kind == "live"
        assert m.rollout in recipe.trainer_args(None, True) and set(m.trainer_flags) <= set(recipe.trainer_args(None, True))
        assert bridge.trainable_kinds(m.name) == m.trains_on
        flags = method_flags(m.name, model_path="m", engine_addr="127.0.0.1:1", buffer_dir="/b", batch_size=4,
                             lr=1e-4, lora_rank=4, wait_timeout=None)
        assert " ".join(m.plugin_flags()) in " ".join(flags)
        assert demo_preset(m.name) == m.embedded
    # a variant is its own recipe, with the variant's loss and flags in place of the method's
    topk = RECIPES["openclaw-opd-topk"].trainer_args(SimpleNamespace(get=lambda name: "8"), False)
    assert topk[-2:] == ["--opd-topk", "8"] and "openclaw-opd/topk_distillation_loss.py:topk_distillation_loss" in topk
    assert "--opd-kl-coef" not in topk


def test_unknown_methods_are_refused_with_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(MethodError, match="rl, opd, combine"):
        get_method("dpo")
    empty = tmp_path / "no_method.py"
    empty.write_text("X = 1\n")
    with pytest.raises(MethodError, match="defines no METHOD"):
        get_method(str(empty))
    with pytest.raises(LaunchError, match="defines no METHOD"):
        get_recipe(str(empty))
    with pytest.raises(ValueError, match="non-empty subset"):
        type(get_method("rl"))(name="x", summary="", folder="", trains_on=frozenset({"vibes"}), skip_reason="",
                               provider="", rollout="", advantage_estimator="grpo")


def test_a_fourth_method_is_one_file_the_launcher_accepts() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL_PATH", "NUM_GPUS", "OPENCLAW_"))}
    r = subprocess.run([sys.executable, "-m", "openclaw.launch", TOY], cwd=REPO, capture_output=True, text=True,
                       timeout=300, env={**env, "OPENCLAW_DRY_RUN": "1", "MAJORITY_VOTE_N": "5"})
    assert r.returncode == 0, r.stderr[-2000:]
    submit = next(ln for ln in r.stdout.splitlines() if ln.startswith("would run submit: "))
    assert ("--extra-args-provider-path tests/data/toy_method/toy_args.py --rollout-function-path "
            "tests/data/toy_method/toy_rollout.py:generate_rollout --advantage-estimator grpo "
            f"--disable-grpo-std-normalization --eps-clip 0.3 --openclaw-method {TOY}") in submit
    assert "checkpoints/openclaw-toy" in submit
    # the live recipes' settings apply to a method given by file
    assert "MAJORITY_VOTE_N is not used" not in r.stdout and "majority-vote-n=5" in r.stdout


def test_a_fourth_method_trains_in_the_main_job_and_the_bridge_on_its_own_kinds(tmp_path: Path) -> None:
    from openclaw.demo.__main__ import parse_args

    args = parse_args(["--method", TOY])
    assert (args.kl_coef, args.lr, args.baseline) == (0.25, 1e-4, "batch")  # the toy's embedded preset
    with pytest.raises(SystemExit):
        parse_args(["--method", TOY, "--w-opd", "0.5"])  # one signal: no weights to set, refused not ignored
    flags = method_flags(TOY, model_path="m", engine_addr="127.0.0.1:1", buffer_dir=str(tmp_path / "buf"),
                         batch_size=4, lr=args.lr, lora_rank=4, wait_timeout=None)
    trainer_args = parse_config(flags, env={}).to_namespace()
    assert trainer_args.openclaw_method == TOY

    _judged_buffer(tmp_path / "buf")
    ns = argparse.Namespace(rl_buffer_dir=str(tmp_path / "buf"), buffer_consumer_id=None, rollout_batch_size=4,
                            buffer_wait_timeout=0.5, buffer_min_batch=1, buffer_poll_interval=0.05,
                            buffer_progress_interval=30.0, max_staleness=None, save=None, load=None,
                            openclaw_method=TOY, custom_rm_path=None, n_samples_per_prompt=1,
                            advantage_estimator="grpo", rewards_normalization=False)
    got = bridge.BufferDataSource(ns).take(4)
    assert [bridge.turn_signal(r).kind for r in got.records] == ["hint+score", "hint+score"]
    assert dict(got.skipped) == {"no_hinted_score": 3}
    assert got.skipped_turns and all(reason == "no_hinted_score" for *_, reason in got.skipped_turns)
    assert set(KINDS) > get_method(TOY).trains_on


def test_a_fourth_method_is_accepted_by_the_tinker_trainer(monkeypatch: pytest.MonkeyPatch) -> None:
    train = _tinker()
    cfg = train.parse_args(["--method", TOY, "--base-model", "m", "--baseline", "zero"])
    assert cfg.method.name == "toy" and cfg.consumer_id == "openclaw-tinker-toy"
    with pytest.raises(train.Refused, match="toy trains on one"):
        train.parse_args(["--method", TOY, "--base-model", "m", "--w-rl", "2"])
    monkeypatch.setattr(train, "teacher_logprobs", lambda t, rec, hint: [x + 0.5 for x in rec.response_logprobs])
    rec = SimpleNamespace(judgement={"score": -1.0, "hint": "be brief"}, response_logprobs=[-1.0, -1.0],
                          messages=[{"role": "user", "content": "q"}], tools=None, response_ids=[5, 5], feedback=None)
    adv, metrics = train.token_advantages(SimpleNamespace(cfg=cfg), [rec])
    assert adv == [[-1.0, -1.0]] and metrics["rollout/opd_hinted"] == 0.0  # its score only: no teacher term
    with pytest.raises(train.Refused, match="MAX_STEPS=3 is the tracks'"):
        train.config_from(train.build_parser().parse_args(["--base-model", "m"]), env={"MAX_STEPS": "3"})
