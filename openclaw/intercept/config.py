"""Typed configuration of the RL intercept, parsed once from flags (or the server's RLConfig)."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openclaw.buffer.duration import parse_duration as _parse_duration

DEFAULT_IDLE_TIMEOUT_S = 900.0


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
    buffer_dir: Path = Path("./rl_buffer")
    buffer_max_mb: float | None = None
    session_idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S
    retention_ttl: float | None = None  # seconds; None keeps records until purged
    durability: str = "full"  # "full" | "normal" (see openclaw.buffer)
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
    compiled_redact: tuple[re.Pattern[str], ...] = field(default=(), compare=False, repr=False)
    compiled_side_system: tuple[re.Pattern[str], ...] = field(default=(), compare=False, repr=False)
    compiled_side_user: tuple[re.Pattern[str], ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.durability not in ("full", "normal"):
            raise InterceptConfigError("--rl-durability: expected full or normal")
        if self.buffer_max_mb is not None and self.buffer_max_mb <= 0:
            raise InterceptConfigError("--rl-buffer-max-mb: must be > 0")
        if self.session_idle_timeout <= 0:
            raise InterceptConfigError("--session-idle-timeout: must be > 0")
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
            session_idle_timeout=parse_duration(ns.session_idle_timeout, "--session-idle-timeout")
            if ns.session_idle_timeout is not None else DEFAULT_IDLE_TIMEOUT_S,
            retention_ttl=parse_duration(ns.rl_retention_ttl, "--rl-retention-ttl") if ns.rl_retention_ttl else None,
            durability=ns.rl_durability,
            redact=not ns.rl_no_redact,
            extra_redact_patterns=tuple(redact),
            side_system_patterns=tuple(side_sys),
            side_user_patterns=tuple(ns.rl_side_user_pattern or []),
            side_no_history_without_tools=bool(ns.rl_side_no_history_without_tools),
            continuity=not ns.rl_no_continuity,
        )

    @classmethod
    def from_server_config(cls, rl: Any) -> InterceptConfig:
        """From openclaw.server.config.RLConfig (typed fields + pass-through `options` dict of
        the other --rl-* / --session-* flags, string or True) or a ServerConfig (`.rl`)."""
        if hasattr(rl, "rl") and not hasattr(rl, "options"):
            rl = rl.rl
        opts: Mapping[str, Any] = dict(getattr(rl, "options", {}) or {})
        known = {
            "rl_retention_ttl", "rl_durability", "rl_no_redact", "rl_redact_pattern", "rl_redact_patterns_file",
            "rl_side_system_pattern", "rl_side_rules_file", "rl_side_user_pattern",
            "rl_side_no_history_without_tools", "rl_no_continuity",
        }
        unknown = sorted(k for k in opts if k.startswith(("rl_", "session_")) and k not in known)
        if unknown:
            raise InterceptConfigError(
                "unknown RL intercept option(s): " + ", ".join("--" + k.replace("_", "-") for k in unknown)
            )
        ns = argparse.Namespace(
            rl_buffer_dir=str(getattr(rl, "buffer_dir", "./rl_buffer")),
            rl_buffer_max_mb=getattr(rl, "buffer_max_mb", None),
            session_idle_timeout=getattr(rl, "session_idle_timeout", None),
            rl_retention_ttl=_opt_str(opts, "rl_retention_ttl"),
            rl_durability=_opt_str(opts, "rl_durability") or "full",
            rl_no_redact=_opt_bool(opts, "rl_no_redact"),
            rl_redact_pattern=_opt_list(opts, "rl_redact_pattern"),
            rl_redact_patterns_file=_opt_str(opts, "rl_redact_patterns_file"),
            rl_side_system_pattern=_opt_list(opts, "rl_side_system_pattern"),
            rl_side_rules_file=_opt_str(opts, "rl_side_rules_file"),
            rl_side_user_pattern=_opt_list(opts, "rl_side_user_pattern"),
            rl_side_no_history_without_tools=_opt_bool(opts, "rl_side_no_history_without_tools"),
            rl_no_continuity=_opt_bool(opts, "rl_no_continuity"),
        )
        return cls.from_args(ns)


def _opt_str(opts: Mapping[str, Any], key: str) -> str | None:
    v = opts.get(key)
    if v is None or v is True:
        return None if v is None else ""
    return str(v)


def _opt_bool(opts: Mapping[str, Any], key: str) -> bool:
    v = opts.get(key, False)
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise InterceptConfigError(f"--{key.replace('_', '-')}: expected a boolean, got {v!r}")


def _opt_list(opts: Mapping[str, Any], key: str) -> list[str]:
    """A pass-through flag keeps only its last value, so several patterns come as a JSON list."""
    v = opts.get(key)
    if v is None or v is True:
        return []
    s = str(v)
    if s.lstrip().startswith("["):
        try:
            items = json.loads(s)
        except ValueError as e:
            raise InterceptConfigError(f"--{key.replace('_', '-')}: bad JSON list: {e}") from e
        return [str(x) for x in items]
    return [s]


def add_intercept_args(parser: argparse.ArgumentParser, *, include_core: bool = True) -> None:
    """Register the intercept's flags. `include_core=False` skips --rl-buffer-dir,
    --rl-buffer-max-mb and --session-idle-timeout (for a parser that already has them)."""
    g = parser.add_argument_group("RL intercept")
    if include_core:
        g.add_argument("--rl-buffer-dir", default="./rl_buffer", help="trajectory buffer directory (created 0700)")
        g.add_argument("--rl-buffer-max-mb", type=float, default=None,
                       help="bound on live buffer data: evict fully consumed records, then refuse (counted)")
        g.add_argument("--session-idle-timeout", default=None,
                       help=f"end a session after this idle time (default {DEFAULT_IDLE_TIMEOUT_S:.0f}s; 90m, 12h ok)")
    g.add_argument("--rl-retention-ttl", default=None, help="delete records older than this (e.g. 30d); default: keep")
    g.add_argument("--rl-durability", choices=("full", "normal"), default="full",
                   help="full: fsync every commit (power-loss safe); normal: crash safe only")
    g.add_argument("--rl-no-redact", action="store_true", help="disable secret redaction (NOT recommended)")
    g.add_argument("--rl-redact-pattern", action="append", default=None, help="extra secret regex (repeatable)")
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
