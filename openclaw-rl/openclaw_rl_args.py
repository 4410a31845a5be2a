"""Flags of openclaw-rl (`--extra-args-provider-path openclaw-rl/openclaw_rl_args.py`): the buffer
flags (`--rl-buffer-dir`, `--buffer-*`, defined in `openclaw.bridge.flags`); the reward is the
judge's score, so binary RL adds none of its own."""

from __future__ import annotations

import argparse

from openclaw.bridge.flags import add_buffer_arguments, add_method_argument


def add_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    add_buffer_arguments(parser)
    add_method_argument(parser, "rl")
