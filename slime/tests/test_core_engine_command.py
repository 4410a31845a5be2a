"""The embedded rollout engine is a program slime is configured with (`--rollout-engine-command`),
not a module slime imports: the command line it starts is the configured program plus the
model and address flags."""

from __future__ import annotations

import sys

import pytest
from slime.ray.engine_process import DEFAULT_ENGINE_COMMAND, EngineProcess
from slime.utils.arguments import parse_config


def test_configured_engine_command_is_what_starts() -> None:
    args = parse_config(["--hf-checkpoint", "/m", "--rollout-engine-command", "python -m my_runtime.serve --quiet"],
                        env={}).to_namespace()
    eng = EngineProcess(model_path="/m", port=4321, engine_command=args.rollout_engine_command, device="cpu")
    assert eng.command() == [sys.executable, "-m", "my_runtime.serve", "--quiet", "--model-path", "/m", "--host",
                             "127.0.0.1", "--port", "4321", "--dtype", "float32", "--max-batch-size", "16",
                             "--device", "cpu"]
    default = parse_config(["--hf-checkpoint", "/m"], env={}).to_namespace().rollout_engine_command
    assert default == DEFAULT_ENGINE_COMMAND  # one default, written once
    assert EngineProcess(model_path="/m", port=1, engine_command="/opt/bin/serve").command()[0] == "/opt/bin/serve"


def test_empty_engine_command_is_refused() -> None:
    with pytest.raises(ValueError, match="--rollout-engine-command is empty"):
        EngineProcess(model_path="/m", port=1, engine_command="  ").command()


def test_full_argv_is_run_as_given() -> None:
    argv = [sys.executable, "-m", "sglang.launch_server", "--port", "30000"]
    assert EngineProcess(model_path="/m", port=30000, argv=argv).command() == argv
