"""The toy method's trainer flags: the buffer's, and its name (this folder's method file)."""

from __future__ import annotations

import argparse
from pathlib import Path

from openclaw.bridge.flags import add_buffer_arguments, add_method_argument, add_rl_score_argument


def add_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    add_buffer_arguments(parser)
    add_method_argument(parser, str(Path(__file__).with_name("toy_method.py")))
    add_rl_score_argument(parser)
