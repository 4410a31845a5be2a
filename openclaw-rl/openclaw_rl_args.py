"""Flags of openclaw-rl (`--extra-args-provider-path openclaw-rl/openclaw_rl_args.py`): the buffer
flags (`--rl-buffer-dir`, `--buffer-*`) and binary RL's reward signal (`--openclaw-rl-score
sign|graded`, `--openclaw-rl-baseline slime|running`, `--openclaw-rl-baseline-decay`), all defined
once in `openclaw.bridge.flags`."""

from __future__ import annotations

import argparse

from openclaw.bridge.flags import add_buffer_arguments, add_method_argument, add_rl_signal_arguments
from openclaw.bridge.reward import RlSignal
from openclaw.bridge.source import check_live_args


def add_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    add_buffer_arguments(parser)
    add_method_argument(parser, "rl")
    add_rl_signal_arguments(parser)


def check_args(args: argparse.Namespace) -> None:
    """Rules across flags, checked when the trainer's command line is parsed (so the launcher refuses
    them before it starts a server): live groups that would give zero advantages, and a running
    baseline that slime's group centring would undo."""
    check_live_args(args)
    RlSignal.from_args(args)
