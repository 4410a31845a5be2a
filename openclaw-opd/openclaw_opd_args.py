"""Flags of openclaw-opd (`--extra-args-provider-path openclaw-opd/openclaw_opd_args.py`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# The buffer flags live with openclaw-rl (appended to sys.path: a method folder never shadows a library).
sys.path.append(str(Path(__file__).resolve().parents[1] / "openclaw-rl"))

import openclaw_rl_args  # noqa: E402


def add_teacher_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--opd-teacher-concurrency", dest="opd_teacher_concurrency", type=int, default=4,
                        help="teacher scoring requests in flight at once")
    parser.add_argument("--opd-topk", dest="opd_topk", type=int, default=int(os.environ.get("OPD_TOPK", "0") or 0),
                        help="top-k distillation: teacher top-k per response token (0 = token-level OPD only; env OPD_TOPK)")
    parser.add_argument("--opd-topk-cache-dir", dest="opd_topk_cache_dir", default=None,
                        help="where the rollout leaves teacher top-k for topk_distillation_loss.py "
                             "(default <rl-buffer-dir>/opd_topk; must be visible to the train workers)")


def add_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    openclaw_rl_args.add_buffer_arguments(parser)
    openclaw_rl_args.add_method_argument(parser, "opd")
    add_teacher_arguments(parser)
