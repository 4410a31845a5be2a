"""Route each command-line flag to the component that declares it.

The owners' own argparse parsers are the source of truth (nothing is listed twice): the server's
(`openclaw.server.config.build_parser` plus the intercept's flags), the judge's
(`openclaw.judge.add_judge_args`) and the trainer's (`slime.utils.arguments.build_parser` with the
method's `--extra-args-provider-path`). A flag declared by several components goes to each of them
(e.g. `--log-level`); a few settings belong to the launcher because every component must agree on
them (`--rl-buffer-dir`, `--model-path`: names.py's flags); a flag nobody declares is an error naming
it. `unique_flags` leaves each setting once on a component's final command line.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from openclaw.launch.names import LAUNCHER_FLAGS, refused_flag
from openclaw.launch.settings import LaunchError

SERVER, JUDGE, TRAINER, LAUNCHER = "server", "judge", "trainer", "launcher"
# Actions whose every occurrence counts (`--rl-redact-pattern A --rl-redact-pattern B`).
_REPEATABLE = (argparse._AppendAction, argparse._ExtendAction, argparse._CountAction)


@dataclass(frozen=True)
class FlagTable:
    """Which component declares which long option, and how many values each one takes."""

    owners: dict[str, list[str]] = field(default_factory=dict)
    nargs: dict[str, object] = field(default_factory=dict)
    prefixes: dict[str, str] = field(default_factory=dict)  # e.g. "--sglang-" -> trainer
    # (component, option) -> the setting it stores: an option's spellings (--lr, --learning-rate;
    # --use-lora, --no-use-lora) are one setting, given once on a command line
    dests: dict[tuple[str, str], str] = field(default_factory=dict)
    repeatable: set[tuple[str, str]] = field(default_factory=set)  # (component, dest)

    def add_parser(self, component: str, parser: argparse.ArgumentParser) -> None:
        for option, action in parser._option_string_actions.items():
            if not option.startswith("--") or option == "--help":
                continue
            owners = self.owners.setdefault(option, [])
            if component not in owners:
                owners.append(component)
            self.nargs.setdefault(option, action.nargs)
            self.dests[(component, option)] = action.dest
            if isinstance(action, _REPEATABLE):
                self.repeatable.add((component, action.dest))

    def option_nargs(self, flag: str) -> object:
        """nargs of a declared option; a prefix-owned one (--sglang-*) takes an optional value."""
        return self.nargs[flag] if flag in self.nargs else "?"

    def dest(self, component: str, flag: str) -> str:
        return self.dests.get((component, flag), flag)


def server_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    """The server's flags, the intercept's included (the in-process judge's are the judge's: the
    launcher runs the judge as its own process)."""
    from openclaw.server.config import build_parser

    return build_parser(env)


def judge_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    from openclaw.judge import add_judge_args

    # a bad value raises (the launcher names it in one line) instead of exiting with the usage
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    add_judge_args(parser, env)
    return parser


def trainer_parser(method_args: Sequence[str]) -> argparse.ArgumentParser:
    """slime's parser with the method's flag provider (named by --extra-args-provider-path)."""
    from slime.utils.arguments import ConfigError, build_parser
    from slime.utils.plugins import PluginError, load_args_provider

    providers = []
    args = list(method_args)
    for i, tok in enumerate(args):
        if tok == "--extra-args-provider-path" and i + 1 < len(args):
            try:
                providers.append(load_args_provider(args[i + 1]))
            except PluginError as exc:
                raise LaunchError(f"--extra-args-provider-path: {exc}") from None
    try:
        return build_parser(providers)
    except ConfigError as exc:
        raise LaunchError(str(exc)) from None


def _did_you_mean(flag: str, table: FlagTable) -> str:
    known = [*table.owners, *LAUNCHER_FLAGS]
    close = difflib.get_close_matches(flag, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def _takes(nargs: object) -> tuple[int, int | None]:
    """(min, max) values an option takes; max None = until the next flag."""
    if nargs == 0:
        return 0, 0
    if nargs is None:
        return 1, 1
    if nargs == "?":
        return 0, 1
    if nargs == "*":
        return 0, None
    if nargs == "+":
        return 1, None
    return int(nargs), int(nargs)  # type: ignore[call-overload]


def take(tokens: Sequence[str], i: int, nargs: object) -> tuple[list[str], int]:
    """The flag at tokens[i] with its values (as argparse would read them), and the next index."""
    tok = tokens[i]
    flag, eq, _ = tok.partition("=")
    if eq:
        return [tok], i + 1
    lo, hi = _takes(nargs)
    j = i + 1
    values: list[str] = []
    while j < len(tokens) and (hi is None or len(values) < hi):
        if tokens[j].startswith("--") and len(values) >= lo:
            break
        values.append(tokens[j])
        j += 1
    if len(values) < lo:
        raise LaunchError(f"{flag} needs {lo} value(s)")
    return [tok, *values], j


def unique_flags(argv: Sequence[str], start: int, component: str, table: FlagTable) -> list[str]:
    """argv with each setting given once from `start` on: where a setting appears several times (a
    recipe's value, then an env var's, then the user's), the last one, the one argparse would use,
    stays in its place and the earlier ones go. Repeatable flags keep every occurrence."""
    head, tail = list(argv[:start]), list(argv[start:])
    groups: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(tail):
        if not tail[i].startswith("--"):
            raise LaunchError(f"unexpected argument {tail[i]!r} on the {component}'s command line")
        flag = tail[i].partition("=")[0]
        group, i = take(tail, i, table.option_nargs(flag))
        key = table.dest(component, flag)
        groups.append((f"{key}#{len(groups)}" if (component, key) in table.repeatable else key, group))
    seen: set[str] = set()
    kept: list[list[str]] = []
    for key, group in reversed(groups):
        if key not in seen:
            seen.add(key)
            kept.append(group)
    return head + [tok for group in reversed(kept) for tok in group]


@dataclass
class Routed:
    """The command line split by owner; `launcher` holds env-var overrides (name -> value)."""

    by_component: dict[str, list[str]] = field(default_factory=dict)
    launcher: dict[str, str] = field(default_factory=dict)
    where: list[tuple[str, list[str]]] = field(default_factory=list)  # (flag, components), for the plan

    def args(self, component: str) -> list[str]:
        return self.by_component.get(component, [])


def route(argv: Sequence[str], table: FlagTable, running: Sequence[str], recipe: str) -> Routed:
    """Split argv among the components that run. Raises LaunchError naming an unknown flag, a flag
    whose only owner does not run in this recipe (e.g. a judge flag for a Track 2 run), or a flag
    names.py refuses for this recipe."""
    out = Routed()
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not tok.startswith("--"):
            raise LaunchError(f"unexpected argument {tok!r} (flags take the form --name value)")
        flag, eq, inline = tok.partition("=")
        reason = refused_flag(flag, recipe)
        if reason:
            raise LaunchError(f"{flag} {reason}")
        if flag in LAUNCHER_FLAGS:
            if not eq and i + 1 >= len(tokens):
                raise LaunchError(f"{flag} needs a value")
            value = inline if eq else tokens[i + 1]
            out.launcher[LAUNCHER_FLAGS[flag]] = value
            out.where.append((flag, [LAUNCHER]))
            i += 1 if eq else 2
            continue
        owners = table.owners.get(flag)
        if owners is None:
            prefix = next((p for p in table.prefixes if flag.startswith(p)), None)
            owners = [table.prefixes[prefix]] if prefix else None
        if owners is None:
            raise LaunchError(f"unknown flag {flag}{_did_you_mean(flag, table)} "
                              f"(not a flag of the {', '.join(running)})")
        targets = [c for c in owners if c in running]
        if not targets:
            raise LaunchError(f"{flag} is a {'/'.join(owners)} flag, but this recipe runs no "
                              f"{'/'.join(owners)} (it runs the {', '.join(running)})")
        group, i = take(tokens, i, table.option_nargs(flag))
        for c in targets:
            out.by_component.setdefault(c, []).extend(group)
        out.where.append((flag, targets))
    return out
