"""A track's options, declared once as a frozen dataclass: `add_arguments` (slime's
extra-args-provider contract) and `from_args` (the trainer's parsed args back into the dataclass)
both follow from the fields.

    @dataclass(frozen=True)
    class TerminalRLConfig(SandboxedOptions):
        NAME = "terminal"  # --env-type's one choice
        command_timeout: float = option(30.0, help="Wall-clock seconds per command")

A field `command_timeout` is the flag `--command-timeout`. An option with `env` takes its default
from that variable (declared in openclaw/environment.py, read through `env_value`), read when the
parser is built and again when the trainer's args leave the value unset (a caller that builds args
by hand gets the same value the parser would have given).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from openclaw.environment import env_value
from openclaw.sandbox import SandboxConfig, SandboxSession, parallel_envs_from_env
from openclaw.sandbox.episode import pool_for_running_loop

_SPEC = "openclaw.tracks.option"
Options = TypeVar("Options", bound="TrackOptions")


@dataclass(frozen=True)
class OptionSpec:
    """What a field's flag says besides its name and default."""

    help: str | None = None
    env: str | None = None  # the variable that gives the default when it is set
    parse: Callable[[str], Any] | None = None  # int or float; None keeps the text
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    declared: bool = True  # False: the trainer's own flag, read here but declared by slime

    def default(self, static: Any) -> Any:
        raw = env_value(self.env) if self.env else None
        if raw is None:
            return static
        return self.parse(raw) if self.parse else raw

    def value(self, given: Any, static: Any) -> Any:
        """The field's value from what the trainer's args hold (None: unset)."""
        if given is None:
            return self.default(static)
        return self.parse(given) if self.parse else given

    def add_to(self, parser: argparse.ArgumentParser, name: str, static: Any) -> None:
        extra: dict[str, Any] = {"type": self.parse} if self.parse else {}
        parser.add_argument("--" + name.replace("_", "-"), default=self.default(static), help=self.help,
                            choices=self.choices, metavar=self.metavar, **extra)


def _parse_for(default: Any) -> Callable[[str], Any] | None:
    return type(default) if isinstance(default, int | float) and not isinstance(default, bool) else None


def option(default: Any, *, help: str | None = None, env: str | None = None, parse: Callable[[str], Any] | None = None,
           choices: tuple[str, ...] | None = None, metavar: str | None = None) -> Any:
    """A track flag; an int or float default makes the flag parse its text the same way."""
    spec = OptionSpec(help, env, parse or _parse_for(default), choices, metavar)
    return field(default=default, metadata={_SPEC: spec})


def trainer_value(default: Any) -> Any:
    """A value of the trainer's own flag of the same name, with the track's default when unset."""
    return field(default=default, metadata={_SPEC: OptionSpec(parse=_parse_for(default), declared=False)})


def _specs(cls: type) -> Iterator[tuple[dataclasses.Field[Any], OptionSpec]]:
    for f in dataclasses.fields(cls):
        yield f, f.metadata[_SPEC]


@dataclass(frozen=True)
class TrackOptions:
    """What every track has: its name, the model turns per episode, how many episodes run at once,
    and the context budget of one episode (the trainer's --rollout-max-context-len)."""

    NAME: ClassVar[str]  # --env-type's one choice, and ENV_TYPE's default
    DEFAULT_ENVS: ClassVar[int] = 8  # episodes at once when neither --parallel-envs nor PARALLEL_ENVS says

    max_steps: int = option(20, env="MAX_STEPS", help="Model turns per episode [env MAX_STEPS]")
    parallel_envs: int | None = option(None, parse=int,
                                       help="Concurrent sandboxed episodes [env PARALLEL_ENVS, default 8]")
    rollout_max_context_len: int = trainer_value(4096)

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError(f"--max-steps/MAX_STEPS must be >= 1, got {self.max_steps}")

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """The track's flags (slime's extra-args-provider contract); values land in args."""
        parser.add_argument("--env-type", default=env_value("ENV_TYPE") or cls.NAME, choices=[cls.NAME])
        for f, spec in _specs(cls):
            if spec.declared:
                spec.add_to(parser, f.name, f.default)

    @classmethod
    def from_args(cls: type[Options], args: Any) -> Options:
        return cls(**{f.name: spec.value(getattr(args, f.name, None), f.default) for f, spec in _specs(cls)})

    def envs(self) -> int:
        """Episodes at once: --parallel-envs, else PARALLEL_ENVS, else the track's default."""
        return self.parallel_envs or parallel_envs_from_env(self.DEFAULT_ENVS)


@dataclass(frozen=True)
class SandboxedOptions(TrackOptions):
    """A track whose episodes run in the bubblewrap sandbox, one sandbox each."""

    sandbox: str = option("bwrap", env="OPENCLAW_SANDBOX", choices=("bwrap", "none"),
                          help="bwrap (default) or none (trusted local debugging only: NO isolation)")

    def sandbox_config(self) -> SandboxConfig:
        """The track's limits; every sandboxed track says its own."""
        raise NotImplementedError(f"{type(self).__name__} does not say its sandbox limits")

    def session(self) -> AbstractAsyncContextManager[SandboxSession]:
        """One episode's sandbox, from the pool shared by the running event loop's episodes."""
        return pool_for_running_loop(self.sandbox_config(), self.envs()).session()
