"""Evaluation during training (--eval-prompt-data, --eval-interval): the loop's `finish_step`
scores the weights just pushed on the eval prompts and logs eval/<name>/reward; the eval samples
never reach training. Against a real embedded engine (tiny model) with the in-process driver
(`setup(where="local")`), and through `python slime/train.py` / `train_async.py` (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runtime_helpers import metrics, private_model, run_script
from slime.ray.loop import run_loop
from slime.ray.setup import setup
from slime.rollout.engine_io import sampling_params_from_args
from slime.utils.arguments import ConfigError, parse_config

# Training and eval prompts are told apart by their text. Each reward is a dict: --reward-key
# picks "train" (1 for a training prompt), --eval-reward-key "eval" (1 for an eval prompt whose
# response kept to --eval-max-response-len), so each metric says which prompts and which key it saw.
EVAL_RM = '''
async def reward_func(args, sample):
    is_eval = sample.prompt.startswith("EVAL")
    return {"train": float(not is_eval), "eval": float(is_eval and sample.response_length <= 3)}
'''
EVAL_PROMPTS, EVAL_SAMPLES_PER_PROMPT = 3, 2


def _write(tmp_path: Path) -> tuple[Path, Path, Path]:
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"input": f"Question {i}: write something."}) + "\n" for i in range(16)))
    evals = tmp_path / "eval.jsonl"
    evals.write_text("".join(json.dumps({"input": f"EVAL {i}: count."}) + "\n" for i in range(EVAL_PROMPTS)))
    rm = tmp_path / "eval_rm.py"
    rm.write_text(EVAL_RM)
    return train, evals, rm


def _flags(model: Path, tmp_path: Path) -> list[str]:
    train, evals, rm = _write(tmp_path)
    return ["--hf-checkpoint", str(model), "--prompt-data", str(train), "--custom-rm-path", str(rm),
            "--reward-key", "train", "--rollout-batch-size", "2", "--n-samples-per-prompt", "2",
            "--rollout-max-response-len", "8", "--lr", "1e-3", "--use-dynamic-batch-size", "--max-tokens-per-gpu", "4096",
            "--log-dir", str(tmp_path / "logs"), "--no-progress-bar",
            "--eval-prompt-data", "tiny", str(evals), "--eval-interval", "1",
            "--n-samples-per-eval-prompt", str(EVAL_SAMPLES_PER_PROMPT), "--eval-max-response-len", "3",
            "--eval-temperature", "0", "--eval-reward-key", "eval",
            "--save-debug-rollout-data", str(tmp_path / "trained" / "{rollout_id}.jsonl")]


def _check_run(rows: list[dict], tmp_path: Path, steps: int) -> None:
    assert [r["step"] for r in rows] == list(range(steps))
    for r in rows:
        assert r["eval/tiny/reward"] == 1.0  # every eval prompt, scored with --eval-reward-key
        assert r["eval/tiny/samples"] == EVAL_PROMPTS * EVAL_SAMPLES_PER_PROMPT
        assert r["time/eval"] > 0
        assert r["reward/mean"] == 1.0 and r["rollout/num_samples"] == 4  # training saw training prompts only
    trained = [json.loads(line) for rid in range(steps)
               for line in (tmp_path / "trained" / f"{rid}.jsonl").read_text().splitlines()]
    assert len(trained) == 4 * steps
    assert not [s for s in trained if s["prompt"].startswith("EVAL") or "eval_dataset" in s["metadata"]]
    assert sorted(s["metadata"]["prompt_index"] for s in trained[::2]) == list(range(2 * steps))


def test_every_step_logs_eval_reward_and_eval_samples_are_never_trained(engine, tiny_model_path, tmp_path):
    argv = _flags(tiny_model_path, tmp_path) + [
        "--num-rollout", "2", "--rollout-backend", "external", "--rollout-external-engine-addrs", engine.url]
    run = setup(parse_config(argv, check_files=True), where="local", echo_steps=False)
    try:
        run_loop(run)
        assert sorted(run.trained_indices) == list(range(8))  # eval samples carry no training index
        assert run.rollout.m.data_source.state_dict()["offset"] == 4  # eval took no training prompt
    finally:
        run.shutdown()
    _check_run(metrics(tmp_path / "logs"), tmp_path, steps=2)


def test_eval_interval_and_the_last_step(engine, tiny_model_path, tmp_path):
    argv = _flags(tiny_model_path, tmp_path) + [
        "--num-rollout", "3", "--eval-interval", "2", "--update-weights-interval", "3",
        "--rollout-backend", "external", "--rollout-external-engine-addrs", engine.url]
    run = setup(parse_config(argv, check_files=True), where="local", echo_steps=False)
    try:
        run_loop(run)
    finally:
        run.shutdown()
    rows = metrics(tmp_path / "logs")
    assert ["eval/tiny/reward" in r for r in rows] == [False, True, True]  # step 2 of every 2, and the last
    # an evaluation step pushes the weights it scores, although --update-weights-interval 3 would not
    assert [r["weights/version"] for r in rows] == [0, 1, 2]


@pytest.mark.slow
@pytest.mark.parametrize("script", ["train.py", "train_async.py"])
def test_the_training_scripts_evaluate_through_the_ray_rollout_manager(script, tiny_model_path, tmp_path,
                                                                       engine_command):
    model = private_model(tiny_model_path, tmp_path / "model")
    res = run_script(script, _flags(model, tmp_path) + ["--num-rollout", "2", "--rollout-engine-command", engine_command])
    assert res.returncode == 0, res.stderr[-4000:]
    _check_run(metrics(tmp_path / "logs"), tmp_path, steps=2)
    assert "eval/tiny/reward=1" in res.stderr  # the per-step line shows it too


# ---------------------------------------------------------------------------------------------
# Refused when the command line is parsed, each naming the flags or the path
# ---------------------------------------------------------------------------------------------

BASE = ["--hf-checkpoint", "/m", "--prompt-data", "/p"]


def _refusal(argv: list[str]) -> str:
    with pytest.raises(ConfigError) as err:
        parse_config(BASE + argv, env={}, check_files=True)
    return str(err.value)


def test_interval_and_data_go_together(tmp_path):
    evals = tmp_path / "e.jsonl"
    evals.write_text('{"input": "x"}\n')
    for argv in (["--eval-interval", "5"], ["--eval-prompt-data", "gsm8k", str(evals)]):
        message = _refusal(argv)
        assert "--eval-interval" in message and "--eval-prompt-data" in message, message
    yml = tmp_path / "c.yaml"
    yml.write_text("evaluation:\n  eval_frequency: 5\n")  # the second page's key is --eval-interval
    message = _refusal(["--config", str(yml)])
    assert "--eval-interval" in message and "--eval-prompt-data" in message, message
    cfg = parse_config(BASE + ["--config", str(yml), "--eval-prompt-data", "gsm8k", str(evals)], env={}, check_files=True)
    assert cfg.data.eval_interval == 5 and cfg.data.eval_prompt_data == ("gsm8k", str(evals))


def test_eval_prompt_data_is_name_path_pairs_of_existing_files(tmp_path):
    evals = tmp_path / "e.jsonl"
    evals.write_text('{"input": "x"}\n')
    interval = ["--eval-interval", "1"]
    assert "NAME PATH pairs" in _refusal(["--eval-prompt-data", str(evals), *interval])
    assert "'/'" in _refusal(["--eval-prompt-data", str(evals), str(evals), *interval])  # two paths, no name
    assert "repeat" in _refusal(["--eval-prompt-data", "a", str(evals), "a", str(evals), *interval])
    missing = tmp_path / "missing.jsonl"
    assert str(missing) in _refusal(["--eval-prompt-data", "a", str(evals), "b", str(missing), *interval])
    # a launcher parses before it prepares the data files: the file check is the training scripts'
    parse_config(BASE + ["--eval-prompt-data", "b", str(missing), *interval], env={})


def test_eval_settings_without_evaluation_are_refused_not_ignored():
    for argv in (["--eval-temperature", "0"], ["--eval-max-response-len", "16"], ["--n-samples-per-eval-prompt", "4"],
                 ["--eval-reward-key", "acc"], ["--eval-function-path", "m.py:f"]):
        message = _refusal(argv)
        assert argv[0] in message and "--eval-prompt-data" in message, message


def test_modes_that_cannot_evaluate_are_refused(tmp_path):
    evals = tmp_path / "e.jsonl"
    evals.write_text('{"input": "x"}\n')
    on = ["--eval-prompt-data", "a", str(evals), "--eval-interval", "1"]
    assert "--debug-rollout-only" in _refusal([*on, "--debug-rollout-only"])
    assert "--debug-train-only" in _refusal([*on, "--load-debug-rollout-data", str(tmp_path)])
    # a rollout function written for a data-source plugin (a live buffer) does not read prompt files
    message = _refusal([*on, "--data-source-path", "src.py:Source", "--rollout-function-path", "ro.py:generate"])
    assert "--eval-function-path" in message and "--data-source-path" in message, message
    parse_config(BASE + [*on, "--data-source-path", "src.py:Source", "--rollout-function-path", "ro.py:generate",
                         "--eval-function-path", "slime.rollout.sglang_rollout.generate_rollout"], env={})


def test_eval_sampling_settings(tmp_path):
    evals = tmp_path / "e.jsonl"
    evals.write_text('{"input": "x"}\n')
    args = parse_config(BASE + ["--eval-prompt-data", "a", str(evals), "--eval-interval", "1", "--eval-temperature",
                                "0", "--eval-max-response-len", "3", "--rollout-max-response-len", "8"], env={}).to_namespace()
    assert sampling_params_from_args(args, evaluation=True)["temperature"] == 0.0
    assert sampling_params_from_args(args, evaluation=True)["max_new_tokens"] == 3
    assert sampling_params_from_args(args)["max_new_tokens"] == 8


def test_an_eval_function_that_cannot_evaluate_is_refused_at_setup(tmp_path, tiny_model_path):
    from slime.ray.rollout_manager import RolloutManager

    train, evals, _ = _write(tmp_path)
    plugin = tmp_path / "ro.py"
    plugin.write_text("def generate(args, rollout_id, data_source):\n    return []\n")
    cfg = parse_config(["--hf-checkpoint", str(tiny_model_path), "--prompt-data", str(train), "--rollout-function-path",
                        f"{plugin}:generate", "--eval-prompt-data", "tiny", str(evals), "--eval-interval", "1",
                        "--log-dir", str(tmp_path / "logs")], env={})
    with pytest.raises(ValueError, match="--rollout-function-path .* takes no `evaluation`.*--eval-function-path"):
        RolloutManager(cfg, str(tiny_model_path))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "x"}\n')
    cfg = cfg.with_overrides(rollout_function_path="slime.rollout.sglang_rollout.generate_rollout",
                             eval_prompt_data=("tiny", str(bad)))
    with pytest.raises(ValueError, match="--eval-prompt-data tiny: .*missing input key"):
        RolloutManager(cfg, str(tiny_model_path))
