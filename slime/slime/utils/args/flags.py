"""The argparse side of the config: the parser built from the section fields, and how a value from
a YAML file or an env var is converted as the command line would convert it."""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from slime.utils.args.fields import ConfigError
from slime.utils.args.sections import SECTIONS


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Show defaults, except the uninformative None / False."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, argparse.SUPPRESS) or action.help is None:
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse that raises ConfigError instead of exiting (callers decide how to report)."""

    def error(self, message: str) -> typing.NoReturn:
        raise ConfigError(message)


def flag_name(name: str) -> str:
    """The canonical flag of a field: `lora_rank` -> `--lora-rank`."""
    return "--" + name.replace("_", "-")


def _field_kind(tp: Any) -> tuple[str, Any, tuple[Any, ...] | None]:
    """Map a field annotation to (kind, element type, choices). kind: bool|scalar|list|json."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        non_none = [a for a in args if a is not type(None)]
        return _field_kind(non_none[0])
    if origin is Literal:
        return "scalar", type(args[0]), tuple(args)
    if tp is bool:
        return "bool", bool, None
    if origin is tuple:
        return "list", args[0], None
    if tp is Mapping or origin in (Mapping, dict) or origin is typing.Mapping:
        return "json", dict, None
    return "scalar", tp, None


def field_specs() -> dict[str, tuple[str, dataclasses.Field, Any]]:
    """dest -> (section, field, annotation) for every core field."""
    specs: dict[str, tuple[str, dataclasses.Field, Any]] = {}
    for section, cls in SECTIONS.items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.name in specs:
                raise RuntimeError(f"duplicate config field {f.name}")
            specs[f.name] = (section, f, hints[f.name])
    return specs


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


def build_parser(extra_args_providers: Iterable[Callable[[argparse.ArgumentParser], Any]] = ()) -> argparse.ArgumentParser:
    """The full argparse parser: core flags grouped by section, then method providers' flags."""
    parser = _Parser(
        usage="%(prog)s [--config FILE.yaml] [--flag value ...]",
        formatter_class=_HelpFormatter,
        description="slime trainer (OpenClaw-RL). Flags may also come from --config FILE.yaml.",
        allow_abbrev=False,  # prefix matching would silently accept typos
    )
    parser.add_argument("--config", type=str, default=None, help="YAML file; keys are flag names.")
    groups = {name: parser.add_argument_group(name) for name in SECTIONS}
    for dest, (section, f, tp) in field_specs().items():
        group = groups[section]
        kind, elem, choices = _field_kind(tp)
        meta = f.metadata
        help_text = meta["help"]
        if meta["env"]:
            help_text += f" [env {meta['env']}]"
        names = [flag_name(dest), *meta["flags"]]
        if kind == "bool":
            if meta["negative_flag"]:
                group.add_argument(meta["negative_flag"], dest=dest, action="store_false", help=help_text + " (turn off)")
            else:
                group.add_argument(*names, dest=dest, action=argparse.BooleanOptionalAction, help=help_text)
        elif kind == "list":
            group.add_argument(*names, dest=dest, type=elem, nargs="+", help=help_text)
        elif kind == "json":
            group.add_argument(*names, dest=dest, type=_json_object, help=help_text)
        else:
            group.add_argument(*names, dest=dest, type=elem, choices=choices, help=help_text)
    parser.set_defaults(**{dest: f.default for dest, (_, f, _) in field_specs().items()})
    for provider in extra_args_providers:
        try:
            provider(parser.add_argument_group(getattr(provider, "__name__", "method")))
        except argparse.ArgumentError as exc:
            raise ConfigError(f"extra args provider {getattr(provider, '__name__', provider)!r} conflicts: {exc}") from None
    return parser


def long_options(parser: argparse.ArgumentParser) -> list[str]:
    """Every `--` spelling the parser knows (the candidates of a did-you-mean)."""
    return [opt for opt in parser._option_string_actions if opt.startswith("--")]


def coerce(action: argparse.Action, value: Any, source: str) -> Any:
    """Convert a YAML / env value to what the action would store from the command line."""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse.BooleanOptionalAction)):
        if isinstance(value, str):
            lowered = value.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                value = True
            elif lowered in ("0", "false", "no", "off", ""):
                value = False
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: expected true/false, got {value!r}")
        return value
    convert = action.type or (lambda v: v)
    try:
        if action.nargs in ("+", "*"):
            items = value if isinstance(value, (list, tuple)) else str(value).split()
            out = [convert(v) if isinstance(v, str) else v for v in items]
        elif action.type is _json_object and isinstance(value, dict):
            out = value
        elif isinstance(value, str):
            out = convert(value)
        elif action.type in (int, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
            out = action.type(value)
            if action.type is int and out != value:
                raise ValueError("not an integer")
        else:
            out = value
    except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
        raise ConfigError(f"{source}: invalid value {value!r} ({exc})") from None
    if action.choices is not None and out not in action.choices:
        raise ConfigError(f"{source}: {out!r} is not one of {list(action.choices)}")
    return out


def resolve_key(parser: argparse.ArgumentParser, key: str) -> tuple[argparse.Action, bool] | None:
    """Find the action for a YAML key given as a flag name (dashes or underscores) or a dest.

    Returns (action, negate): negate is True for store_false flags given by dest name the
    "positive" way round is handled by the caller (``rewards_normalization: false``)."""
    flag = "--" + key.lstrip("-").replace("_", "-")
    action = parser._option_string_actions.get(flag)
    if action is not None:
        return action, False
    for action in parser._actions:
        if action.dest == key.lstrip("-").replace("-", "_") and action.option_strings:
            return action, True
    return None

