"""Judge configuration: flags (`add_judge_args`), env vars, and the typed `JudgeConfig`.

Env vars from the reference are honoured as defaults: MAJORITY_VOTE_N (also PRM_M),
MAJORITY_VOTE_THRESHOLD, PRM_MODEL_PATH / JUDGE_MODEL_PATH. The API key of a remote judge is
read from OPENCLAW_JUDGE_API_KEY or OPENAI_API_KEY only (never a flag: flags leak into `ps`),
and never logged.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from openclaw.environment import env_value
from openclaw.judge.hints import DEFAULT_MIN_HINT_CHARS
from openclaw.judge.votes import DEFAULT_THRESHOLD, validate_threshold

BACKENDS = ("cpu", "llm", "custom")
API_KEY_ENVS = ("OPENCLAW_JUDGE_API_KEY", "OPENAI_API_KEY")

# The one definition of the judge defaults users see. The judge CLI, the server's in-process
# judge (`--judge-workers N`), the launcher and the READMEs all take them from here.
DEFAULT_MAJORITY_VOTE_N = 3  # votes per turn: --majority-vote-n / --prm-m / MAJORITY_VOTE_N
DEFAULT_MAJORITY_VOTE_THRESHOLD = DEFAULT_THRESHOLD  # --majority-vote-threshold / MAJORITY_VOTE_THRESHOLD
DEFAULT_NUM_JUDGE_WORKERS = 1  # --num-judge-workers of `python -m openclaw.judge`
DEFAULT_JUDGE_TIMEOUT_S = 60.0  # --judge-timeout: deadline of one whole judge call, retries included
DEFAULT_JUDGE_RETRIES = 2  # --judge-retries


class JudgeConfigError(ValueError):
    """A judge configuration that cannot work (message is shown to the user)."""


@dataclass(frozen=True)
class JudgeConfig:
    backend: str = "cpu"
    num_workers: int = DEFAULT_NUM_JUDGE_WORKERS
    # LLM judge
    judge_url: str | None = None  # OpenAI-compatible base URL, e.g. http://127.0.0.1:8001/v1
    judge_model: str | None = None  # model name sent to the endpoint (default: first of /v1/models)
    prm_model_path: str | None = None  # launch `python -m openclaw.server` on this model
    prm_backend: str = "hf"  # that server's engine: hf, or sglang over prm_tp_size GPUs
    prm_tp_size: int = 1
    m: int = DEFAULT_MAJORITY_VOTE_N  # votes per turn (--prm-m / --majority-vote-n)
    threshold: float = DEFAULT_MAJORITY_VOTE_THRESHOLD
    temperature: float = 0.6
    max_tokens: int = 512
    timeout_s: float = DEFAULT_JUDGE_TIMEOUT_S  # deadline of one judge call, retries included
    retries: int = DEFAULT_JUDGE_RETRIES  # extra attempts (within the deadline) after a transport error / 5xx / 429
    # hints (OPD)
    extract_hints: bool = True
    hint_m: int | None = None  # default: m
    hint_min_chars: int = DEFAULT_MIN_HINT_CHARS
    # plugin
    custom_rm_path: str | None = None
    # worker loop
    batch_size: int = 8
    poll_interval_s: float = 0.5
    lease_seconds: float | None = None  # default: derived from the worst-case batch time
    # reward-collapse guard
    collapse_window: int = 200
    collapse_threshold: float = 0.9

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise JudgeConfigError(f"--judge-backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.num_workers < 1:
            raise JudgeConfigError("--num-judge-workers must be >= 1")
        if self.m < 1:
            raise JudgeConfigError("--prm-m / --majority-vote-n must be >= 1")
        if self.hint_m is not None and self.hint_m < 1:
            raise JudgeConfigError("--hint-m must be >= 1")
        try:
            validate_threshold(self.threshold)
        except ValueError as e:
            raise JudgeConfigError(str(e)) from None
        if self.timeout_s <= 0 or self.retries < 0 or self.batch_size < 1 or self.poll_interval_s <= 0:
            raise JudgeConfigError("judge timeout, batch size and poll interval must be > 0, retries >= 0")
        if not (0.0 < self.collapse_threshold <= 1.0) or self.collapse_window < 1:
            raise JudgeConfigError("collapse threshold must be in (0, 1] and the window >= 1")
        if self.backend == "llm" and not (self.judge_url or self.prm_model_path):
            raise JudgeConfigError("--judge-backend llm needs --judge-url or --prm-model-path (or JUDGE_MODEL_PATH)")
        if self.backend == "custom" and not self.custom_rm_path:
            raise JudgeConfigError("--judge-backend custom needs --custom-rm-path")
        if self.prm_tp_size < 1 or (self.prm_backend == "hf" and self.prm_tp_size > 1):
            raise JudgeConfigError(f"--prm-tp-size {self.prm_tp_size}: tensor parallelism of the judge model needs "
                                   "--prm-backend sglang (and >= 1)")

    @property
    def hint_votes(self) -> int:
        return self.hint_m or self.m

    @property
    def effective_lease_seconds(self) -> float:
        """Long enough that a live worker never loses its lease: every call of a batch may run to
        its deadline (`timeout_s`, retries included), plus margin."""
        if self.lease_seconds:
            return self.lease_seconds
        return max(60.0, self.batch_size * self.timeout_s * 2 + 30.0)

    def api_key(self) -> str | None:
        for name in API_KEY_ENVS:
            value = env_value(name)
            if value:
                return value
        return None

    def redacted(self) -> dict[str, Any]:
        """For logs: everything but secrets (there are none in the config; the key stays in env)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> JudgeConfig:
        backend = args.judge_backend
        if args.custom_rm_path and backend == "cpu" and not args.judge_backend_explicit:
            backend = "custom"
        if backend == "cpu" and not args.judge_backend_explicit and (args.judge_url or args.prm_model_path):
            backend = "llm"
        return cls(
            backend=backend, num_workers=args.num_judge_workers, judge_url=args.judge_url,
            judge_model=args.judge_model, prm_model_path=args.prm_model_path, prm_backend=args.prm_backend,
            prm_tp_size=args.prm_tp_size, m=args.prm_m,
            threshold=args.majority_vote_threshold, temperature=args.judge_temperature,
            max_tokens=args.judge_max_tokens, timeout_s=args.judge_timeout, retries=args.judge_retries,
            extract_hints=args.judge_hints, hint_m=args.hint_m, hint_min_chars=args.hint_min_chars,
            custom_rm_path=args.custom_rm_path, batch_size=args.judge_batch_size,
            poll_interval_s=args.judge_poll_interval, lease_seconds=args.judge_lease_seconds,
            collapse_window=args.collapse_window, collapse_threshold=args.collapse_threshold,
        )

    def with_(self, **changes: Any) -> JudgeConfig:
        return replace(self, **changes)


def _env(env: Mapping[str, str], *names: str) -> str | None:
    for n in names:
        value = env_value(n, env)
        if value:
            return value
    return None


def _env_number(env: Mapping[str, str], kind: type, default: float, *names: str) -> Any:
    """A default from the environment, or a JudgeConfigError naming the variable."""
    for n in names:
        raw = env_value(n, env)
        if raw:
            try:
                return kind(raw)
            except ValueError:
                raise JudgeConfigError(f"environment variable {n}={raw!r} is not a valid {kind.__name__}") from None
    return default


class _BackendAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):  # noqa: ANN001
        setattr(namespace, self.dest, values)
        namespace.judge_backend_explicit = True


# Set on the server's parser: `--judge-workers` absent means no judge in the server process.
NO_IN_PROCESS_JUDGE = 0


def add_judge_args(parser: argparse.ArgumentParser, env: Mapping[str, str] | None = None, *,
                   in_server: bool = False) -> argparse.ArgumentParser:
    """Add every judge flag to `parser`: the judge CLI's and, with `in_server=True`, the server's
    (there `--judge-workers N` defaults to none: judging in the server is opt-in).
    Raises JudgeConfigError for an unreadable MAJORITY_VOTE_N / MAJORITY_VOTE_THRESHOLD."""
    env = os.environ if env is None else env
    g = parser.add_argument_group("judge")
    g.add_argument("--judge-backend", choices=BACKENDS, default="cpu", action=_BackendAction,
                   help="cpu: embedding + trained head (default); llm: an LLM judge; custom: --custom-rm-path")
    parser.set_defaults(judge_backend_explicit=False)
    workers_default = NO_IN_PROCESS_JUDGE if in_server else DEFAULT_NUM_JUDGE_WORKERS
    g.add_argument("--num-judge-workers", "--judge-workers", dest="num_judge_workers", type=int,
                   default=workers_default,
                   help=("judge worker threads in this server, on its buffer (default: none)" if in_server
                         else f"judge worker threads (default {DEFAULT_NUM_JUDGE_WORKERS})"))
    g.add_argument("--judge-url", default=_env(env, "JUDGE_URL"),
                   help="OpenAI-compatible endpoint of the judge (key from $OPENCLAW_JUDGE_API_KEY or $OPENAI_API_KEY)")
    g.add_argument("--judge-model", default=None, help="model name for --judge-url (default: first listed)")
    g.add_argument("--prm-model-path", "--judge-model-path", dest="prm_model_path",
                   default=_env(env, "PRM_MODEL_PATH", "JUDGE_MODEL_PATH"),
                   help="launch `python -m openclaw.server` on this model as the judge")
    g.add_argument("--prm-backend", choices=("hf", "sglang"), default="hf",
                   help="the --prm-model-path server's engine (sglang: on the GPUs it is given, --prm-tp-size of them)")
    g.add_argument("--prm-tp-size", "--prm-num-gpus-per-engine", dest="prm_tp_size", type=int, default=1,
                   help="tensor parallelism of the sglang judge engine")
    g.add_argument("--prm-m", "--majority-vote-n", dest="prm_m", type=int,
                   default=_env_number(env, int, DEFAULT_MAJORITY_VOTE_N, "MAJORITY_VOTE_N", "PRM_M"),
                   help=f"judge votes per turn (env MAJORITY_VOTE_N; default {DEFAULT_MAJORITY_VOTE_N})")
    g.add_argument("--majority-vote-threshold", type=float,
                   default=_env_number(env, float, DEFAULT_MAJORITY_VOTE_THRESHOLD, "MAJORITY_VOTE_THRESHOLD"),
                   help="share of valid votes a label needs to win, else 0 "
                        f"(env MAJORITY_VOTE_THRESHOLD; default {DEFAULT_MAJORITY_VOTE_THRESHOLD})")
    g.add_argument("--judge-temperature", "--prm-temperature", dest="judge_temperature", type=float, default=0.6)
    g.add_argument("--judge-max-tokens", "--prm-max-new-tokens", dest="judge_max_tokens", type=int, default=512)
    g.add_argument("--judge-timeout", type=float, default=DEFAULT_JUDGE_TIMEOUT_S,
                   help="deadline in seconds for one whole judge call, retries included "
                        f"(default {DEFAULT_JUDGE_TIMEOUT_S:g})")
    g.add_argument("--judge-retries", type=int, default=DEFAULT_JUDGE_RETRIES,
                   help="retries within the deadline after a transport error, 429 or 5xx")
    g.add_argument("--judge-hints", action=argparse.BooleanOptionalAction, default=True,
                   help="also extract OPD hints (default on)")
    g.add_argument("--hint-m", type=int, default=None, help="hint votes per turn (default: --prm-m)")
    g.add_argument("--hint-min-chars", type=int, default=DEFAULT_MIN_HINT_CHARS)
    g.add_argument("--custom-rm-path", default=None,
                   help="reward plugin replacing the scorer: ./x.py[:attr] or pkg.module[:attr]")
    g.add_argument("--judge-batch-size", type=int, default=8)
    g.add_argument("--judge-poll-interval", type=float, default=0.5)
    g.add_argument("--judge-lease-seconds", type=float, default=None)
    g.add_argument("--collapse-window", type=int, default=200)
    g.add_argument("--collapse-threshold", type=float, default=0.9)
    return parser


def judge_arg_dests() -> frozenset[str]:
    """The namespace keys add_judge_args fills (the server uses them to refuse judge flags given
    without --judge-workers: a flag that would be accepted and ignored)."""
    return frozenset(vars(add_judge_args(argparse.ArgumentParser(add_help=False), env={}).parse_args([])))
