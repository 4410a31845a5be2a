"""`--config FILE.yaml`: flat flag names, slime's sections (`lora: {lora_rank: 8}`), and the second
public page's nested `model:` / `training:` / `rollout:` / `evaluation:` schema."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from slime.utils.args.fields import ConfigError
from slime.utils.args.flags import coerce, long_options, resolve_key
from slime.utils.args.refusals import CRITIC_FREE, JUDGE_SETTING, REFUSED_FLAGS, refusal, unknown_message
from slime.utils.args.sections import SECTIONS

# The second public page's config/training_config.yaml: nested `model:` / `training:` / `rollout:` /
# `evaluation:` keys. Each maps onto a flat flag here, or is refused with the reason.
PAGE_SECTIONS = ("model", "training", "rollout", "evaluation")
PAGE_KEYS: dict[tuple[str, str], str] = {
    ("model", "name"): "model_name",
    ("model", "checkpoint_path"): "hf_checkpoint",
    ("training", "batch_size"): "rollout_batch_size",
    ("training", "learning_rate"): "lr",
    ("training", "warmup_steps"): "lr_warmup_iters",
    ("training", "max_steps"): "num_rollout",  # one optimizer step per rollout unless --num-steps-per-rollout
    ("training", "ppo_clip_ratio"): "eps_clip",
    ("training", "binary_weight"): "w_rl",  # a combined method's loss weights (its args provider's flags)
    ("training", "opd_weight"): "w_opd",
    ("rollout", "num_workers"): "rollout_num_engines",
    ("rollout", "parallel_envs"): "parallel_envs",  # the agentic tracks' args providers
    ("evaluation", "eval_frequency"): "eval_interval",
}
PAGE_REFUSED: dict[tuple[str, str], str] = {
    ("training", "value_clip_ratio"): CRITIC_FREE,
    ("training", "gae_lambda"): CRITIC_FREE,
    ("training", "teacher_temperature"): (
        "does not apply: OPD's teacher is the policy itself shown the hint, scored at temperature 1 like the "
        "student's log-probs (a different temperature would make teacher - student a fake signal)"
    ),
    ("training", "hint_extraction_model"): JUDGE_SETTING + " (hints are extracted by the judge)",
    ("rollout", "max_turns"): REFUSED_FLAGS["--max-turns"],
    ("evaluation", "judge_model"): JUDGE_SETTING + " (--prm-model-path / --judge-backend there)",
    ("evaluation", "majority_voting"): JUDGE_SETTING + " (--majority-vote-n there)",
    ("evaluation", "num_judges"): JUDGE_SETTING + " (--majority-vote-n there)",
    ("evaluation", "consensus_threshold"): JUDGE_SETTING + " (--majority-vote-threshold there)",
}
# slime knows no training methods: `training.method` is handed, as `args.training_method`, to the
# loaded method folder's check_args (`parse_config`), which refuses a method other than its own.
PAGE_METHOD = ("training", "method")


def _apply_page_key(parser: argparse.ArgumentParser, section: str, key: str, value: Any, source: str,
                    defaults: dict[str, Any]) -> bool:
    """Apply one key of the page's nested schema; False when (section, key) is not one of its keys."""
    where = f"{source} key {section}.{key}"
    if (section, key) in PAGE_REFUSED:
        raise ConfigError(f"{where} {PAGE_REFUSED[(section, key)]}")
    if value is None:
        return True  # `checkpoint_path: null` = not set (the env var / built-in default decides)
    if (section, key) == ("model", "tokenizer_path"):
        # the tokenizer is read from the checkpoint folder; a different one would tokenise differently
        # from the engine, so only the checkpoint's own folder is accepted
        ckpt = defaults.get("hf_checkpoint")
        if ckpt is None or Path(str(value)).resolve() != Path(str(ckpt)).resolve():
            raise ConfigError(f"{where}: the tokenizer is read from model.checkpoint_path (--hf-checkpoint); "
                              "put it in that folder and drop tokenizer_path")
        return True
    if (section, key) == ("training", "gradient_accumulation_steps"):
        steps = int(value)
        batch = int(defaults.get("rollout_batch_size", parser.get_default("rollout_batch_size")))
        if steps < 1 or batch % steps:
            raise ConfigError(f"{where}: {value} must be >= 1 and divide training.batch_size {batch}")
        defaults["micro_batch_size"] = batch // steps  # accumulation = samples per step / micro-batch size
        return True
    if (section, key) == PAGE_METHOD:
        return True  # checked against the loaded method folder once the config is parsed
    if (section, key) == ("rollout", "session_aware"):
        if value is not True:
            raise ConfigError(f"{where}: sessions are always tracked here (the intercept groups turns by session)")
        return True
    dest = PAGE_KEYS.get((section, key))
    if dest is None:
        return False
    found = resolve_key(parser, dest)
    if found is None:
        raise ConfigError(f"{where} maps to --{dest.replace('_', '-')}, which this run does not have "
                          "(it belongs to a method folder's args provider)")
    defaults[found[0].dest] = coerce(found[0], value, where)
    return True


def apply_mapping(
    parser: argparse.ArgumentParser, values: Mapping[str, Any], source: str, defaults: dict[str, Any]
) -> None:
    """Write the values of a config file's mapping into `defaults` (dest -> value), as `parser` would
    store them; a key that is unknown or refused raises ConfigError naming it."""
    for key, value in values.items():
        if key in PAGE_SECTIONS and (value is None or isinstance(value, Mapping)):
            rest: dict[str, Any] = {}
            # keys that read others of the section go last (batch_size before gradient_accumulation_steps)
            later = ("gradient_accumulation_steps", "tokenizer_path")
            for sub, sub_value in sorted((value or {}).items(), key=lambda kv: kv[0] in later):
                if not _apply_page_key(parser, key, str(sub), sub_value, source, defaults):
                    rest[sub] = sub_value
            if rest and key not in SECTIONS:
                raise ConfigError(f"{source}: unknown key {key}.{next(iter(rest))} (the {key}: section takes "
                                  + ", ".join(sorted(k for s_, k in (*PAGE_KEYS, *PAGE_REFUSED) if s_ == key))
                                  + ")")
            if rest:
                apply_mapping(parser, rest, f"{source} [{key}]", defaults)  # `rollout: {rollout_top_p: ..}`
            continue
        if isinstance(value, Mapping) and key in SECTIONS:
            apply_mapping(parser, value, f"{source} [{key}]", defaults)  # nested `lora: {lora_rank: 8}`
            continue
        if key in ("config",):
            raise ConfigError(f"{source}: 'config' cannot be set inside a config file")
        found = resolve_key(parser, str(key))
        if found is None and refusal(str(key)):
            raise ConfigError(f"{source}: key {key!r}: {refusal(str(key))}")
        if found is None:
            raise ConfigError(f"{source}: " + unknown_message(str(key).replace("_", "-"), long_options(parser)))
        action, by_dest = found
        coerced = coerce(action, value, f"{source} key {key!r}")
        if isinstance(action, argparse._StoreFalseAction) and not by_dest:
            coerced = not coerced  # `disable-rewards-normalization: true` stores False
        defaults[action.dest] = coerced


def load_yaml_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The mapping a `--config` file holds (ConfigError when missing, invalid or not a mapping)."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"--config {path}: file not found")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"--config {path}: invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: expected a mapping of flag names to values")
    return data


def page_method(values: Mapping[str, Any]) -> Any:
    """The page schema's `training.method` of a config file's values, or None."""
    training = values.get(PAGE_METHOD[0])
    return training.get(PAGE_METHOD[1]) if isinstance(training, Mapping) else None
