"""Flags of openclaw-combine (`--extra-args-provider-path openclaw-combine/openclaw_combine_args.py`):
the buffer and teacher flags (`openclaw.bridge.flags`), the binary-RL half's reward (`--openclaw-rl-score`)
plus the two loss weights of combine_loss."""

from __future__ import annotations

import argparse

from openclaw.bridge.flags import (
    add_buffer_arguments,
    add_method_argument,
    add_rl_score_argument,
    add_teacher_arguments,
)
from openclaw.bridge.source import check_live_args
from openclaw.environment import env_value
from openclaw.methods import get_method

COMBINE = get_method("combine")
assert COMBINE.weights is not None  # combine weighs its two signals
W_OPD, W_RL = COMBINE.weights


def _env_float(name: str, default: float) -> float:
    value = env_value(name)
    return float(value) if value is not None else default


def add_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    add_buffer_arguments(parser)
    add_method_argument(parser, "combine")
    add_teacher_arguments(parser)
    add_rl_score_argument(parser)  # the binary-RL half's reward: the judge's sign or graded score
    parser.add_argument("--openclaw-combine-w-opd", "--w-opd", dest="openclaw_combine_w_opd", type=float,
                        default=_env_float("OPENCLAW_COMBINE_W_OPD", W_OPD),
                        help="weight of the OPD token advantage (teacher - old) (env OPENCLAW_COMBINE_W_OPD)")
    parser.add_argument("--openclaw-combine-w-rl", "--w-rl", dest="openclaw_combine_w_rl", type=float,
                        default=_env_float("OPENCLAW_COMBINE_W_RL", W_RL),
                        help="weight of the binary-RL advantage (judge score) (env OPENCLAW_COMBINE_W_RL)")


def check_args(args: argparse.Namespace) -> None:
    """Checked when the trainer's command line is parsed, so the launcher refuses it before it starts
    a server: live groups that would give every advantage 0."""
    check_live_args(args)
