"""Typed configuration of the RL intercept, parsed once from flags into a frozen InterceptConfig.

`python -m openclaw.server` registers these flags on its own parser (`add_intercept_args`) and
builds the InterceptConfig with `from_args`; lists are repeated flags (`--rl-redact-pattern A
--rl-redact-pattern B`), each value kept.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from openclaw.buffer.duration import parse_duration as _parse_duration
from openclaw.buffer.location import DEFAULT_BUFFER_DIR as _BUFFER_DIR
from openclaw.buffer.location import buffer_dir_from_env

# The one definition of each intercept default (the server registers these flags through
# add_intercept_args, so it never restates them).
DEFAULT_BUFFER_DIR = Path(_BUFFER_DIR)
DEFAULT_IDLE_TIMEOUT_S = 900.0
DEFAULT_DURABILITY = "full"
# Whether a turn's think block (found by the server's --reasoning-parser) is trained:
# keep = the whole generated response; mask = its tokens stay in the sample (the rollout
# log-probs keep lining up with what the engine generated) with loss mask 0.
TRAIN_REASONING = ("keep", "mask")
DEFAULT_TRAIN_REASONING = "keep"


class InterceptConfigError(ValueError):
    """A bad intercept option (the message names the flag)."""


def parse_duration(value: str | float | int, flag: str) -> float:
    try:
        return _parse_duration(value, flag)
    except ValueError as e:
        raise InterceptConfigError(str(e)) from None


def _compile(patterns: list[str], flag: str) -> list[re.Pattern[str]]:
    out = []
    for p in patterns:
        try:
            out.append(re.compile(p))
        except re.error as e:
            raise InterceptConfigError(f"{flag}: invalid regular expression {p!r}: {e}") from e
    return out


def _read_patterns(path: str, flag: str) -> list[str]:
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise InterceptConfigError(f"{flag}: cannot read {path}: {e}") from e
    return [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


@dataclass(frozen=True)
class InterceptConfig:
    buffer_dir: Path = DEFAULT_BUFFER_DIR
    buffer_max_mb: float | None = None
    session_idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S
    retention_ttl: float | None = None  # seconds; None keeps records until purged
    durability: str = DEFAULT_DURABILITY  # "full" | "normal" (see openclaw.buffer)
    redact: bool = True
    extra_redact_patterns: tuple[str, ...] = ()
    # A request is a `side` turn when its system prompt / last user message matches one of these.
    side_system_patterns: tuple[str, ...] = ()
    side_user_patterns: tuple[str, ...] = ()
    # A request with no tools and a single user message that continues no session is `side`
    # (utility calls: titles, summaries). Off by default: a fresh chat looks the same.
    side_no_history_without_tools: bool = False
    continuity: bool = True
    max_batch: int = 256  # records per group commit
    maintenance_interval: float = 5.0  # idle sweep / retention check period (s)
    train_reasoning: str = DEFAULT_TRAIN_REASONING  # TRAIN_REASONING
    compiled_redact: tuple[re.Pattern[str], ...] = field(default=(), compare=False, repr=False)
    compiled_side_system: tuple[re.Pattern[str], ...] = field(default=(), compare=False, repr=False)
    compiled_side_user: tuple[re.Pattern[str], ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.durability not in ("full", "normal"):
            raise InterceptConfigError("--rl-durability: expected full or normal")
        if self.train_reasoning not in TRAIN_REASONING:
            raise InterceptConfigError(f"--rl-train-reasoning: expected one of {', '.join(TRAIN_REASONING)}")
        if self.buffer_max_mb is not None and self.buffer_max_mb <= 0:
            raise InterceptConfigError("--rl-buffer-max-mb: must be > 0")
        if self.session_idle_timeout <= 0:
            raise InterceptConfigError("--session-idle-timeout: must be > 0")
        if self.retention_ttl is not None and self.retention_ttl <= 0:
            raise InterceptConfigError("--rl-retention-ttl: must be > 0")
        object.__setattr__(self, "buffer_dir", Path(self.buffer_dir))
        object.__setattr__(self, "compiled_redact", tuple(_compile(list(self.extra_redact_patterns), "--rl-redact-pattern")))
        object.__setattr__(self, "compiled_side_system", tuple(_compile(list(self.side_system_patterns), "--rl-side-system-pattern")))
        object.__setattr__(self, "compiled_side_user", tuple(_compile(list(self.side_user_patterns), "--rl-side-user-pattern")))

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_args(cls, ns: argparse.Namespace) -> InterceptConfig:
        """From a namespace produced by a parser that `add_intercept_args` was called on."""
        redact = list(ns.rl_redact_pattern or [])
        if ns.rl_redact_patterns_file:
            redact += _read_patterns(ns.rl_redact_patterns_file, "--rl-redact-patterns-file")
        side_sys = list(ns.rl_side_system_pattern or [])
        if ns.rl_side_rules_file:
            side_sys += _read_patterns(ns.rl_side_rules_file, "--rl-side-rules-file")
        return cls(
            buffer_dir=Path(ns.rl_buffer_dir),
            buffer_max_mb=ns.rl_buffer_max_mb,
            session_idle_timeout=parse_duration(ns.session_idle_timeout, "--session-idle-timeout"),
            retention_ttl=parse_duration(ns.rl_retention_ttl, "--rl-retention-ttl") if ns.rl_retention_ttl else None,
            durability=ns.rl_durability,
            redact=not ns.rl_no_redact,
            extra_redact_patterns=tuple(redact),
            side_system_patterns=tuple(side_sys),
            side_user_patterns=tuple(ns.rl_side_user_pattern or []),
            side_no_history_without_tools=bool(ns.rl_side_no_history_without_tools),
            continuity=not ns.rl_no_continuity,
            train_reasoning=ns.rl_train_reasoning,
        )

    @classmethod
    def from_server_config(cls, config: object) -> InterceptConfig:
        """The typed config the server composed (openclaw.server.config.RLConfig.intercept), from
        an RLConfig or a whole ServerConfig."""
        rl = getattr(config, "rl", config)
        intercept = getattr(rl, "intercept", None)
        if not isinstance(intercept, InterceptConfig):
            raise InterceptConfigError(f"expected a server RLConfig with an InterceptConfig, got {type(config).__name__}")
        return intercept


def add_intercept_args(parser: argparse.ArgumentParser, env: Mapping[str, str] | None = None, *,
                       include_core: bool = True) -> argparse.ArgumentParser:
    """Register the intercept's flags (the server's `--rl-*` / `--session-*`); RL_BUFFER_DIR in
    `env` is the default of --rl-buffer-dir. `include_core=False` leaves out --rl-buffer-dir,
    --rl-buffer-max-mb and --session-idle-timeout (for a parser that declares them already)."""
    env = os.environ if env is None else env
    g = parser.add_argument_group("RL intercept")
    if include_core:
        g.add_argument("--rl-buffer-dir", default=buffer_dir_from_env(env),
                       help=f"trajectory buffer directory, created 0700 (env RL_BUFFER_DIR; default {_BUFFER_DIR})")
        g.add_argument("--rl-buffer-max-mb", type=float, default=None,
                       help="bound on live buffer data: evict fully consumed records, then refuse (counted)")
        g.add_argument("--session-idle-timeout", default=str(DEFAULT_IDLE_TIMEOUT_S),
                       help=f"end a session after this idle time (default {DEFAULT_IDLE_TIMEOUT_S:.0f}s; 90m, 12h ok)")
    g.add_argument("--rl-retention-ttl", default=None, help="delete records older than this (e.g. 30d); default: keep")
    g.add_argument("--rl-durability", choices=("full", "normal"), default=DEFAULT_DURABILITY,
                   help="full: fsync every commit (power-loss safe); normal: crash safe only")
    g.add_argument("--rl-no-redact", action="store_true", help="disable secret redaction (NOT recommended)")
    g.add_argument("--rl-redact-pattern", action="append", default=None,
                   help="extra secret regex; repeat the flag for several (every one applies)")
    g.add_argument("--rl-redact-patterns-file", default=None, help="file of extra secret regexes, one per line")
    g.add_argument("--rl-side-system-pattern", action="append", default=None,
                   help="regex on the system prompt marking a request as a side turn (repeatable)")
    g.add_argument("--rl-side-rules-file", default=None, help="file of system-prompt side regexes, one per line")
    g.add_argument("--rl-side-user-pattern", action="append", default=None,
                   help="regex on the last user message marking a request as a side turn (repeatable)")
    g.add_argument("--rl-side-no-history-without-tools", action="store_true",
                   help="treat tool-less single-message requests that continue no session as side turns")
    g.add_argument("--rl-no-continuity", action="store_true",
                   help="do not group header-less requests into sessions by conversation continuity")
    g.add_argument("--rl-train-reasoning", choices=TRAIN_REASONING, default=DEFAULT_TRAIN_REASONING,
                   help="keep: train on the whole response, think block included (default); mask: keep the "
                        "think tokens in the sample with loss mask 0, so only the answer is trained "
                        "(needs the server's --reasoning-parser)")
    return parser
