"""`--config FILE` given to a run script: each key becomes the setting or flag it names, on the plan.

The trainer can read such a file itself (`slime/train.py --config`), but behind a run script that
lost every key the recipe also sets: the recipe's presets are command-line flags, and the command line
wins over a file. A file outside the repository would not even reach the Ray job (its working dir is
the repository). So the launcher reads the file with the trainer's own key table (slime's `--config`
schema: the second page's nested `model:` / `training:` / `rollout:` / `evaluation:` keys and flag
names, each refused there with its reason when it does not apply) and turns every key into what it
names: a launcher setting (`model.checkpoint_path` -> MODEL_PATH, `training.max_steps` -> NUM_ROLLOUT),
a server flag (`model.name` -> `--served-model-name`) or a trainer flag. The plan places the trainer's
after the presets and env vars and before the command line's flags (file < command line, as in slime),
and prints one `config:` line saying what each key became. names.py's `key` rows list the keys the
launcher handles itself, and those it refuses for some recipes.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openclaw.launch.names import LAUNCHER_FLAGS, entry, refused_flag
from openclaw.launch.settings import LaunchError

# Keys that read another key of their section go last (slime applies them in the same order).
_LATER = ("gradient_accumulation_steps", "tokenizer_path")


class _Written(dict):
    """The values slime's key table sets, remembering which settings each key wrote (a key may set
    none, as training.method, which is only checked, or another key's setting again)."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[str] = []

    def __setitem__(self, key: str, value: Any) -> None:
        self.written.append(key)
        super().__setitem__(key, value)


@dataclass(frozen=True)
class ConfigFile:
    path: Path
    launcher: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (value, which key)
    trainer: list[str] = field(default_factory=list)
    server: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)  # "key=value -> what it became"

    def line(self) -> str:
        return f"config: {self.path}: " + "; ".join(self.shown)


def config_path(argv: list[str]) -> tuple[list[str], str | None]:
    """argv without `--config FILE`, and FILE (None when not given)."""
    rest: list[str] = []
    found: list[str] = []
    i = 0
    while i < len(argv):
        flag, eq, value = argv[i].partition("=")
        if flag == "--config":
            if not eq and i + 1 >= len(argv):
                raise LaunchError("--config needs a file")
            found.append(value if eq else argv[i + 1])
            i += 1 if eq else 2
            continue
        rest.append(argv[i])
        i += 1
    if len(found) > 1:
        raise LaunchError(f"--config given {len(found)} times ({', '.join(found)}): give one file")
    return rest, (found[0] if found else None)


def _keys(data: Mapping[str, Any]) -> list[tuple[str, dict[str, Any], Any]]:
    """(name shown, the one-key mapping slime applies, value), in the file's order."""
    from slime.utils.arguments import _PAGE_SECTIONS, SECTIONS

    out: list[tuple[str, dict[str, Any], Any]] = []
    for key, value in data.items():
        if (key in _PAGE_SECTIONS and (value is None or isinstance(value, Mapping))) or \
                (key in SECTIONS and isinstance(value, Mapping)):
            items = sorted((value or {}).items(), key=lambda kv: kv[0] in _LATER)
            out += [(f"{key}.{sub}", {key: {sub: sub_value}}, sub_value) for sub, sub_value in items]
        else:
            out.append((str(key), {key: value}, value))
    return out


def _yaml(value: Any) -> str:
    """A value as the file spells it."""
    return json.dumps(value) if value is None or isinstance(value, bool) else str(value)


def _action(parser: argparse.ArgumentParser, dest: str) -> argparse.Action:
    return next(a for a in parser._actions if a.dest == dest and a.option_strings)


def _tokens(action: argparse.Action, value: Any) -> list[str]:
    """The command-line form of one trainer setting."""
    flag = "--" + action.dest.replace("_", "-")
    flag = flag if flag in action.option_strings else next(o for o in action.option_strings if o.startswith("--"))
    if isinstance(action, argparse.BooleanOptionalAction):
        return [flag] if value else ["--no-" + flag[2:]]
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        # a one-way switch: given when the value is the one it stores, else the default holds
        return [flag] if value == action.const else []
    if action.nargs in ("+", "*"):
        return [flag, *(str(v) for v in value)]
    if isinstance(value, Mapping):
        return [flag, json.dumps(dict(value))]
    return [flag, str(value)]


def read_config_file(raw: str, caller_dir: Path, recipe: str, parser: argparse.ArgumentParser) -> ConfigFile:
    """Read FILE (relative: from the folder the run script was started in) with the trainer's parser."""
    from slime.utils.arguments import ConfigError, _apply_mapping, load_yaml_config

    path = Path(raw) if Path(raw).is_absolute() else (caller_dir / raw)
    if not path.is_file():
        raise LaunchError(f"--config {raw}: no such file ({path}; a relative path is read from the folder the "
                          "script was started in)")
    try:
        data = load_yaml_config(path)
    except ConfigError as exc:
        raise LaunchError(str(exc)) from None
    out = ConfigFile(path=path)
    source = f"--config {raw}"
    names = [name for name, _, _ in _keys(data)]
    defaults = _Written()
    set_by: dict[str, str] = {}
    for name, mapping, value in _keys(data):
        row = entry(name, recipe, "key")
        if row is not None and row.refused and recipe in row.recipes:
            raise LaunchError(f"{source}: {name} {row.refused}")
        if name == "training.gradient_accumulation_steps" and "training.batch_size" not in names:
            raise LaunchError(f"{source}: {name} divides training.batch_size, which the file does not set (the "
                              "recipe's batch is not the file's); set training.batch_size too, or use GRAD_ACCUM_STEPS")
        defaults.written.clear()
        try:
            _apply_mapping(parser, mapping, source, defaults)
        except ConfigError as exc:
            raise LaunchError(str(exc)) from None
        changed = list(dict.fromkeys(defaults.written))
        became: list[str] = []
        for dest in changed:
            if dest in set_by:
                raise LaunchError(f"{source}: {name} and {set_by[dest]} set the same setting "
                                  f"(--{dest.replace('_', '-')}); keep one")
            set_by[dest] = name
            action = _action(parser, dest)
            for option in action.option_strings:
                reason = refused_flag(option, recipe)
                if reason:
                    raise LaunchError(f"{source}: {name} sets {option}, which {reason}")
            launcher = next((LAUNCHER_FLAGS[o] for o in action.option_strings if o in LAUNCHER_FLAGS), None)
            if launcher:
                out.launcher[launcher] = (str(defaults[dest]), f"{name} in {source}")
                became.append(launcher)
            elif row is not None and row.to and row.to[0] == "server":
                out.server.extend([row.to[1], str(defaults[dest])])
                became.append(f"server {row.to[1]} {defaults[dest]}")
            else:
                tokens = _tokens(action, defaults[dest])
                out.trainer.extend(tokens)
                became.append(f"trainer {' '.join(tokens)}" if tokens else "the trainer's default")
        what = ", ".join(became) if became else ("not set" if value is None else "checked: the run does this")
        out.shown.append(f"{name}={_yaml(value)} -> {what}")
    return out
