"""Trainer flags of the buffer-draining methods, added by each method folder's args provider
(`--extra-args-provider-path openclaw-<method>/openclaw_<method>_args.py`).

Values land in slime's `args` under the dest names below. Defaults are written here once.
"""

from __future__ import annotations

import argparse

from openclaw.buffer.location import buffer_dir_from_env
from openclaw.environment import env_value
from openclaw.httpapi.identity import USER_ID_PATTERN, valid_user_id
from openclaw.methods import get_method, method_arg, method_names

# Finite by default: a trainer pointed at a buffer nobody writes to stops with a message
# instead of waiting forever (set --buffer-wait-timeout 0 to wait without limit).
DEFAULT_WAIT_TIMEOUT_S = 3600.0
DEFAULT_PROGRESS_INTERVAL_S = 30.0

# Binary RL's reward signal (openclaw-rl/README.md, "Reward signal"). The defaults keep the reference's
# binary RL: the judge's sign, slime's own baseline (the batch mean of a GRPO group, or 0).
RL_SCORES = ("sign", "graded")
DEFAULT_RL_SCORE = "sign"
RL_BASELINES = ("slime", "running")
DEFAULT_RL_BASELINE = "slime"
DEFAULT_RL_BASELINE_DECAY = 0.9  # weight of the past: ~10 steps (80 turns at 8 per step) carry the mean

Parser = argparse.ArgumentParser | argparse._ArgumentGroup


def _env_float(name: str, default: float | None) -> float | None:
    value = env_value(name)
    return float(value) if value is not None else default


def check_buffer_user(value: str | None) -> str | None:
    """`--buffer-user`'s value, held to the server's user-id rule: a name no user can have would
    select no turn at all, and the trainer would wait on an empty stream instead of failing."""
    if value is None:
        return None
    if not isinstance(value, str) or not valid_user_id(value):
        raise ValueError(f"--buffer-user {value!r} is not a user id: it must match {USER_ID_PATTERN.pattern} "
                         "(letters, digits, '_', '.', '-'; 1 to 64), as the server's --api-keys-file names users")
    return value


def _buffer_user(text: str) -> str:
    try:
        return str(check_buffer_user(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_buffer_arguments(parser: Parser) -> None:
    parser.add_argument("--rl-buffer-dir", dest="rl_buffer_dir",
                        default=buffer_dir_from_env(),
                        help="trajectory buffer written by `python -m openclaw.server --enable-rl-intercept "
                             "--rl-buffer-dir DIR` (env RL_BUFFER_DIR); it must exist")
    parser.add_argument("--buffer-consumer-id", dest="buffer_consumer_id", default=None,
                        help="consumer id in the buffer (default openclaw-<method>, with --buffer-user U "
                             "openclaw-<method>-U); each id sees every turn once")
    parser.add_argument("--buffer-user", dest="buffer_user", type=_buffer_user, default=None,
                        help="train only on this user's turns (the user id the server recorded on each turn), "
                             "for a per-user trainer that pushes that user's adapter (--lora-adapter-name, "
                             "the same name: the server serves a user the adapter loaded under their id); "
                             "other users' turns are never handed out, skipped or consumed by it")
    parser.add_argument("--buffer-wait-timeout", dest="buffer_wait_timeout", type=float,
                        default=_env_float("BUFFER_WAIT_TIMEOUT", DEFAULT_WAIT_TIMEOUT_S),
                        help="seconds a rollout waits for rollout_batch_size trainable turns; then it trains on "
                             "what it has (at least --buffer-min-batch) or fails (env BUFFER_WAIT_TIMEOUT; "
                             f"default {DEFAULT_WAIT_TIMEOUT_S:g}; 0 = wait forever)")
    parser.add_argument("--buffer-min-batch", dest="buffer_min_batch", type=int, default=1,
                        help="smallest batch trained on when --buffer-wait-timeout expires")
    parser.add_argument("--buffer-poll-interval", dest="buffer_poll_interval", type=float, default=1.0,
                        help="seconds between buffer polls while waiting for judged turns")
    parser.add_argument("--buffer-progress-interval", dest="buffer_progress_interval", type=float,
                        default=DEFAULT_PROGRESS_INTERVAL_S,
                        help="seconds between 'waiting for N judged turns' lines while a rollout waits")


def add_method_argument(parser: Parser, method: str) -> None:
    parser.add_argument("--openclaw-method", dest="openclaw_method", default=method, type=method_arg,
                        help="which signal kinds are trainable (set by the method folder's provider): "
                             f"{', '.join(method_names())}, or a method file's path (openclaw.methods)")


def _decay(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return value


def _add_choice(parser: Parser, flag: str, choices: tuple[str, ...], default: str, help: str) -> None:
    """A flag taking one of `choices`, stored under its own name; its help ends with the default."""
    parser.add_argument(flag, dest=flag.lstrip("-").replace("-", "_"), choices=choices, default=default,
                        help=f"{help} (default {default})")


def add_rl_score_argument(parser: Parser) -> None:
    """The reward of a judged turn: openclaw-rl's, and the binary-RL half of openclaw-combine's."""
    _add_choice(parser, "--openclaw-rl-score", RL_SCORES, DEFAULT_RL_SCORE,
                "reward of a judged turn: 'sign' = the judge's +1/-1 (turns scored 0 are skipped); "
                "'graded' = the judge's graded score in [-1, 1] (CPU head: P(good) - P(bad); LLM "
                "judge: the mean vote), so a mild complaint and a harsh one differ")


def add_rl_signal_arguments(parser: Parser) -> None:
    """Binary RL's reward signal and baseline (openclaw-rl's provider)."""
    add_rl_score_argument(parser)
    _add_choice(parser, "--openclaw-rl-baseline", RL_BASELINES, DEFAULT_RL_BASELINE,
                "'slime' = slime's own (group mean with --n-samples-per-prompt G, or 0 with "
                "--disable-rewards-normalization); 'running' = a mean of past steps' rewards carried "
                "across steps and checkpoints (needs --n-samples-per-prompt 1 --disable-rewards-normalization)")
    parser.add_argument("--openclaw-rl-baseline-decay", dest="openclaw_rl_baseline_decay", type=_decay,
                        default=DEFAULT_RL_BASELINE_DECAY,
                        help="running baseline: weight of the past per step, b <- d*b + (1-d)*batch mean "
                             f"(default {DEFAULT_RL_BASELINE_DECAY})")


def add_teacher_arguments(parser: Parser) -> None:
    """OPD's teacher (the policy shown the judge's hint), for openclaw-opd and openclaw-combine."""
    parser.add_argument("--opd-teacher-concurrency", dest="opd_teacher_concurrency", type=int, default=4,
                        help="teacher scoring requests in flight at once")
    parser.add_argument("--opd-topk", dest="opd_topk", type=int, default=int(env_value("OPD_TOPK") or 0),
                        help="top-k distillation: teacher top-k per response token (0 = token-level OPD only; env OPD_TOPK)")
    parser.add_argument("--opd-topk-cache-dir", dest="opd_topk_cache_dir", default=None,
                        help="where the rollout leaves teacher top-k for topk_distillation_loss.py "
                             "(default <rl-buffer-dir>/opd_topk; must be visible to the train workers)")


# The second public page's `training.method` values (its --config schema) -> the method they name.
PAGE_METHODS = {"binary": "rl", **{name: name for name in method_names()}}


def check_training_method(args: argparse.Namespace) -> None:
    """A --config file's `training.method` (slime hands it over as `args.training_method`) must be the
    method this trainer loaded: a file asking for another method is refused, never trained as this one."""
    asked = getattr(args, "training_method", None)
    if asked is None:
        return
    if asked not in PAGE_METHODS:
        raise ValueError(f"training.method {asked!r} is not one of {', '.join(PAGE_METHODS)}")
    loaded = get_method(getattr(args, "openclaw_method", None) or "rl")
    if PAGE_METHODS[asked] != loaded.name:
        wanted = get_method(PAGE_METHODS[asked])
        raise ValueError(f"training.method {asked!r} but the loaded method is {loaded.name!r}; run that method's "
                         f"script (its run_*.sh passes --extra-args-provider-path {wanted.provider})")
