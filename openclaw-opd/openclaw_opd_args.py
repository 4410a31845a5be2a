"""Flags of openclaw-opd (`--extra-args-provider-path openclaw-opd/openclaw_opd_args.py`): the
buffer flags and the teacher's (`--opd-teacher-concurrency`, `--opd-topk`, `--opd-topk-cache-dir`),
both defined in `openclaw.bridge.flags`."""

from __future__ import annotations

import argparse

from openclaw.bridge.flags import add_buffer_arguments, add_method_argument, add_teacher_arguments
from openclaw.bridge.source import check_live_args


def add_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    add_buffer_arguments(parser)
    add_method_argument(parser, "opd")
    add_teacher_arguments(parser)


def check_args(args: argparse.Namespace) -> None:
    """Checked when the trainer's command line is parsed, so the launcher refuses it before it starts
    a server: live groups that would give every advantage 0."""
    check_live_args(args)
