"""config/training_config.yaml in the second public page's nested schema is accepted by the
trainer's --config (nested keys onto flat flags; unknown or inapplicable keys are errors naming the key),
and the repository ships that file."""

from __future__ import annotations

from pathlib import Path

import pytest
from slime.utils.arguments import ConfigError, parse_config

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "config" / "training_config.yaml"
# What the launcher passes beside the file on a GPU: the method's flags and its group of 16 live turns
# (a group of one under GRPO would give every advantage 0; openclaw_combine_args.check_args refuses it).
COMBINE = ["--extra-args-provider-path", str(REPO / "openclaw-combine" / "openclaw_combine_args.py"),
           "--n-samples-per-prompt", "16"]
NO_ENV: dict[str, str] = {}

# The page's example, verbatim (openclaw-rl-training-skill-hermes.md, "config/training_config.yaml").
PAGE_EXAMPLE = """\
model:
  name: qwen3.5-4b
  checkpoint_path: /path/to/checkpoint
  tokenizer_path: /path/to/tokenizer

training:
  method: combine  # binary, opd, or combine
  batch_size: 32
  gradient_accumulation_steps: 4
  learning_rate: 1e-6
  warmup_steps: 100
  max_steps: 10000

  # Binary RL params
  ppo_clip_ratio: 0.2
  value_clip_ratio: 0.2
  gae_lambda: 0.95

  # OPD params
  teacher_temperature: 1.0
  hint_extraction_model: gpt-4

  # Hybrid params
  binary_weight: 0.5
  opd_weight: 0.5

rollout:
  num_workers: 4
  max_turns: 10
  session_aware: true
  parallel_envs: 16

evaluation:
  judge_model: gpt-4
  majority_voting: true
  num_judges: 3
  eval_frequency: 100
"""


def test_the_shipped_file_maps_onto_the_trainer_flags():
    cfg = parse_config(["--config", str(SHIPPED), *COMBINE], env=NO_ENV)
    assert cfg.rollout.model_name == "qwen3-4b" and cfg.rollout.hf_checkpoint is None  # null = default model
    assert (cfg.data.rollout_batch_size, cfg.data.micro_batch_size, cfg.data.num_rollout) == (32, 8, 10000)
    assert (cfg.optimizer.lr, cfg.optimizer.lr_warmup_iters, cfg.algorithm.eps_clip) == (1e-6, 100, 0.2)
    assert cfg.extras["openclaw_method"] == "combine"
    assert (cfg.extras["openclaw_combine_w_rl"], cfg.extras["openclaw_combine_w_opd"]) == (0.5, 0.5)
    assert cfg.cluster.rollout_num_engines is None  # left out: a live method's engine is its server
    # flags on the command line win over the file; MODEL_PATH fills a null checkpoint_path
    cfg = parse_config(["--config", str(SHIPPED), *COMBINE, "--lr", "2e-6", "--w-rl", "1.0"], env={"MODEL_PATH": "/m"})
    assert cfg.optimizer.lr == 2e-6 and cfg.extras["openclaw_combine_w_rl"] == 1.0 and cfg.rollout.hf_checkpoint == "/m"


def _error(tmp_path: Path, text: str, argv: list[str] = COMBINE) -> str:
    yml = tmp_path / "training_config.yaml"
    yml.write_text(text)
    with pytest.raises(ConfigError) as err:
        parse_config(["--config", str(yml), *argv], env=NO_ENV)
    return str(err.value)


def test_the_page_example_is_refused_key_by_key_with_reasons(tmp_path):
    text = PAGE_EXAMPLE
    expected = [
        ("model.tokenizer_path", "read from model.checkpoint_path", "  tokenizer_path: /path/to/tokenizer\n"),
        ("training.value_clip_ratio", "critic-free", "  value_clip_ratio: 0.2\n"),
        ("training.gae_lambda", "critic-free", "  gae_lambda: 0.95\n"),
        ("training.teacher_temperature", "temperature 1", "  teacher_temperature: 1.0\n"),
        ("training.hint_extraction_model", "judge setting", "  hint_extraction_model: gpt-4\n"),
        ("rollout.max_turns", "--max-steps", "  max_turns: 10\n"),
        ("rollout.parallel_envs", "args provider", "  parallel_envs: 16\n"),
        ("evaluation.judge_model", "judge setting", "  judge_model: gpt-4\n"),
        ("evaluation.majority_voting", "judge setting", "  majority_voting: true\n"),
        ("evaluation.num_judges", "judge setting", "  num_judges: 3\n"),
        # Evaluation needs something to evaluate on: the page's example names no eval data.
        ("evaluation.eval_frequency", "--eval-prompt-data", "  eval_frequency: 100\n"),
    ]
    for key, reason, line in expected:  # each refusal names its key; remove the line and go on
        message = _error(tmp_path, text)
        assert key in message and reason in message, (key, message)
        assert "did you mean" not in message
        text = text.replace(line, "")
    yml = tmp_path / "training_config.yaml"
    yml.write_text(text)
    cfg = parse_config(["--config", str(yml), *COMBINE], env=NO_ENV)  # what is left is accepted
    assert cfg.rollout.hf_checkpoint == "/path/to/checkpoint" and cfg.cluster.rollout_num_engines == 4
    assert cfg.data.eval_interval is None


def test_unknown_keys_and_wrong_methods_name_the_key(tmp_path):
    assert "training.batch_sise" in _error(tmp_path, "training:\n  batch_sise: 8\n")
    assert "model.revision" in _error(tmp_path, "model:\n  revision: main\n")
    message = _error(tmp_path, "training:\n  method: opd\n")
    assert "training.method" in message and "'combine'" in message and "openclaw-opd" in message
    assert "no method folder is loaded" in _error(tmp_path, "training:\n  method: binary\n", argv=[])
    assert "session_aware" in _error(tmp_path, "rollout:\n  session_aware: false\n")
    assert "divide" in _error(tmp_path, "training:\n  batch_size: 6\n  gradient_accumulation_steps: 4\n")


def test_the_file_alone_gives_live_groups_of_one_and_is_refused_with_the_fix(tmp_path):
    """The page's schema has no group size: alone, the file would train combine on groups of one turn,
    where GRPO gives every advantage 0. Parsing refuses it at once, naming both fixes."""
    with pytest.raises(ConfigError, match="groups of one gives every advantage 0.*--n-samples-per-prompt G"):
        parse_config(["--config", str(SHIPPED), *COMBINE[:2]], env=NO_ENV)
    cfg = parse_config(["--config", str(SHIPPED), *COMBINE[:2], "--disable-rewards-normalization"], env=NO_ENV)
    assert cfg.data.n_samples_per_prompt == 1
