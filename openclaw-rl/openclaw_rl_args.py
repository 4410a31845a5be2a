"""Flags of the buffer-draining rollout (`--extra-args-provider-path openclaw-rl/openclaw_rl_args.py`).

Shared by openclaw-rl, openclaw-opd and openclaw-combine (their providers call `add_buffer_arguments`).
Values land in slime's `args` under the dest names below.
"""

from __future__ import annotations

import argparse
import os


def _env_float(name: str, default: float | None) -> float | None:
    value = os.environ.get(name)
    return float(value) if value not in (None, "") else default


def add_buffer_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--rl-buffer-dir", dest="rl_buffer_dir",
                        default=os.environ.get("RL_BUFFER_DIR") or "./rl_buffer",
                        help="trajectory buffer written by `python -m openclaw.server --enable-rl-intercept` "
                             "(env RL_BUFFER_DIR)")
    parser.add_argument("--buffer-consumer-id", dest="buffer_consumer_id", default=None,
                        help="consumer id in the buffer (default openclaw-<method>); each id sees every turn once")
    parser.add_argument("--buffer-wait-timeout", dest="buffer_wait_timeout", type=float,
                        default=_env_float("BUFFER_WAIT_TIMEOUT", None),
                        help="seconds a rollout waits for rollout_batch_size trainable turns; then it trains on "
                             "what it has (at least --buffer-min-batch) or fails. Default: wait forever")
    parser.add_argument("--buffer-min-batch", dest="buffer_min_batch", type=int, default=1,
                        help="smallest batch trained on when --buffer-wait-timeout expires")
    parser.add_argument("--buffer-poll-interval", dest="buffer_poll_interval", type=float, default=1.0,
                        help="seconds between buffer polls while waiting for judged turns")


def add_method_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup, method: str) -> None:
    parser.add_argument("--openclaw-method", dest="openclaw_method", default=method, choices=("rl", "opd", "combine"),
                        help="which signal kinds are trainable (set by the method folder's provider)")


def add_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """openclaw-rl's flags: the buffer flags (the reward is the judge's score)."""
    add_buffer_arguments(parser)
    add_method_argument(parser, "rl")
