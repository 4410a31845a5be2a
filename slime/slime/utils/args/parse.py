"""`parse_config` / `parse_args`: flags, `--config` YAML and env-var defaults into a validated
`TrainConfig` (precedence: field default < env var < `--config` file < command line)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from slime.utils.args.fields import ConfigError
from slime.utils.args.flags import build_parser, coerce, field_specs, flag_name, long_options
from slime.utils.args.page_schema import PAGE_METHOD, apply_mapping, load_yaml_config, page_method
from slime.utils.args.refusals import unknown_message
from slime.utils.args.sections import SECTIONS
from slime.utils.args.train_config import TrainConfig, build_config
from slime.utils.args.validate import check_eval_files
from slime.utils.environment import env_value

# One logger for everything the config says (callers filter on it), whichever part says it.
logger = logging.getLogger("slime.utils.arguments")


def _env_defaults(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dest, (_, f, _) in field_specs().items():
        name = f.metadata["env"]
        value = env_value(name, env) if name else None
        if value is not None:
            action = parser._option_string_actions[flag_name(dest)]
            out[dest] = coerce(action, value, f"environment variable {name}")
    return out


def _preparse(argv: Sequence[str]) -> argparse.Namespace:
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--config", default=None)
    pre.add_argument("--extra-args-provider-path", default=None)
    ns, _ = pre.parse_known_args(list(argv))
    return ns


def parse_config(
    argv: Sequence[str] | None = None,
    extra_args_providers: Iterable[Callable[[argparse.ArgumentParser], Any]] = (),
    *,
    env: Mapping[str, str] | None = None,
    check_files: bool = False,
) -> TrainConfig:
    """Parse flags (plus --config YAML and env defaults) into a validated TrainConfig.

    Raises ConfigError (a ValueError) with a message naming the offending flag. check_files: also
    refuse input files that do not exist (--eval-prompt-data); the training scripts set it, a launcher
    that parses a command line before preparing its data leaves it off.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if env is None else env
    pre = _preparse(argv)
    yaml_values = load_yaml_config(pre.config) if pre.config else {}

    providers = list(extra_args_providers)
    provider_path = pre.extra_args_provider_path or _yaml_lookup(yaml_values, "extra_args_provider_path")
    provider_check = None
    if provider_path:
        from slime.utils.plugins import PluginError, args_provider_check, load_args_provider

        try:
            providers.append(load_args_provider(provider_path))
            provider_check = args_provider_check(providers[-1])
        except PluginError as exc:
            raise ConfigError(f"--extra-args-provider-path: {exc}") from None

    parser = build_parser(providers)
    defaults = _env_defaults(parser, env)
    yaml_defaults: dict[str, Any] = {}
    if yaml_values:
        apply_mapping(parser, yaml_values, f"--config {pre.config}", yaml_defaults)
    defaults.update(yaml_defaults)
    parser.set_defaults(**defaults)

    ns, unknown = parser.parse_known_args(argv)
    sglang_args, unknown = _split_sglang_args(unknown)
    if sglang_args:
        ns.sglang_args = {**dict(ns.sglang_args or {}), **sglang_args}
    if unknown:
        first = unknown[0]
        if first.startswith("-"):
            raise ConfigError(unknown_message(first.split("=", 1)[0], long_options(parser)))
        raise ConfigError(f"unexpected argument {first!r} (flags take the form --name value)")

    values = vars(ns)
    values.pop("config", None)
    _lora_flags_turn_lora_on(values, set(yaml_defaults) | _explicit_dests(parser, argv))
    specs = field_specs()
    flat = {k: v for k, v in values.items() if k in specs}
    extras = {k: v for k, v in values.items() if k not in specs}
    if flat.get("custom_config_path"):
        for key, value in load_yaml_config(flat["custom_config_path"]).items():
            extras.setdefault(key, value)
    config = build_config(flat, extras)
    if check_files:
        check_eval_files(config.data.eval_prompt_data)
    args = config.to_namespace()
    method = page_method(yaml_values)
    if method is not None:
        if provider_check is None:
            raise ConfigError(_unchecked_method(pre.config, method, bool(providers)))
        args.training_method = method  # slime knows no methods: the method folder's check_args compares it
    if provider_check is not None:
        try:
            provider_check(args)
        except ValueError as exc:
            raise ConfigError(f"{provider_path}: {exc}") from None
    return config


def _unchecked_method(config_path: str, method: Any, providers_loaded: bool) -> str:
    where = f"--config {config_path} key {'.'.join(PAGE_METHOD)}: {method!r} names a training method"
    if not providers_loaded:
        return (f"{where}, but no method folder is loaded: pass that method's args provider "
                "(--extra-args-provider-path), whose check_args checks it")
    return f"{where}, but the loaded args provider has no check_args to check it against its own method"


_LORA_SETTINGS = ("lora_rank", "lora_alpha", "lora_dropout", "lora_target_modules")


def _explicit_dests(parser: argparse.ArgumentParser, argv: Sequence[str]) -> set[str]:
    """Dests of the flags written on the command line (a value equal to the default still counts)."""
    actions = parser._option_string_actions
    return {actions[tok.split("=", 1)[0]].dest for tok in argv if tok.split("=", 1)[0] in actions}


def _lora_flags_turn_lora_on(values: dict[str, Any], explicit: set[str]) -> None:
    """The first public page's LORA_ARGS has --lora-rank/--lora-alpha/--lora-dropout and no --use-lora:
    asking for adapter settings means asking for adapters, so LoRA goes on (one log line says so);
    an explicit --no-use-lora / use_lora: false still wins."""
    given = [name for name in _LORA_SETTINGS if name in explicit]
    if given and "use_lora" not in explicit and not values["use_lora"]:
        values["use_lora"] = True
        logger.warning("%s given without --use-lora: LoRA is on (rank %s, alpha %s, dropout %s)",
                       "/".join(flag_name(n) for n in given), values["lora_rank"], values["lora_alpha"],
                       values["lora_dropout"])


def _split_sglang_args(tokens: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """Pull ``--sglang-<name> [VALUE]`` out of unparsed tokens (slime forwards those to SGLang)."""
    collected: dict[str, Any] = {}
    rest: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("--sglang-"):
            name, eq, value = tok[len("--sglang-") :].partition("=")
            if not eq:
                nxt = tokens[i + 1] if i + 1 < len(tokens) else None
                if nxt is not None and not nxt.startswith("--"):
                    value, i = nxt, i + 1
                else:
                    value = True
            collected[name.replace("-", "_")] = value
        else:
            rest.append(tok)
        i += 1
    return collected, rest


def _yaml_lookup(values: Mapping[str, Any], dest: str) -> Any:
    for key, value in values.items():
        if isinstance(value, Mapping) and key in SECTIONS:
            found = _yaml_lookup(value, dest)
            if found is not None:
                return found
        elif str(key).lstrip("-").replace("-", "_") == dest:
            return value
    return None


def parse_args(
    argv: Sequence[str] | None = None,
    extra_args_providers: Iterable[Callable[[argparse.ArgumentParser], Any]] = (),
    add_custom_arguments: Callable[[argparse.ArgumentParser], Any] | None = None,
) -> argparse.Namespace:
    """slime-style entry: a flat Namespace; on bad input prints the error and exits with status 2."""
    providers = list(extra_args_providers) + ([add_custom_arguments] if add_custom_arguments else [])
    try:
        return parse_config(argv, providers, check_files=True).to_namespace()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


