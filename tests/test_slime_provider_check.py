"""slime's args-provider hook: a provider module's `check_args(args)` runs when the command line is
parsed, so a method's rules across its flags stop `parse_config` (and so the launcher) at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from slime.utils.arguments import ConfigError, parse_config

PROVIDER = '''
import argparse

def add_arguments(parser):
    parser.add_argument("--window-low", type=int, default=0)
    parser.add_argument("--window-high", type=int, default=10)

def check_args(args: argparse.Namespace) -> None:
    if args.window_low >= args.window_high:
        raise ValueError(f"--window-low {args.window_low} must be below --window-high {args.window_high}")
'''


def _parse(provider: Path, *argv: str):
    return parse_config(["--hf-checkpoint", "/nonexistent", "--extra-args-provider-path", str(provider), *argv], env={})


def test_provider_rules_across_flags_stop_parsing_naming_the_provider(tmp_path: Path) -> None:
    provider = tmp_path / "my_args.py"
    provider.write_text(PROVIDER)
    assert _parse(provider, "--window-low", "3").extras["window_low"] == 3
    with pytest.raises(ConfigError, match=r"my_args\.py: --window-low 12 must be below --window-high 10"):
        _parse(provider, "--window-low", "12")


def test_a_check_args_that_is_not_a_function_of_args_is_refused(tmp_path: Path) -> None:
    provider = tmp_path / "bad_args.py"
    provider.write_text(PROVIDER.replace("def check_args(args: argparse.Namespace) -> None:", "def check_args():"))
    with pytest.raises(ConfigError, match="check_args .* must be fn\\(args\\)"):
        _parse(provider)
