"""The embedded rollout engine is a program slime is configured with (`--rollout-engine-command`),
not a module slime imports, and slime names none of its own: the command line it starts is the
configured program plus the model and address flags, and a run that must start embedded engines
without one is refused, naming the flag, before anything starts."""

from __future__ import annotations

import sys

import pytest
from slime.ray.engine_process import EngineProcess
from slime.ray.rollout_manager import check_engine_command
from slime.ray.setup import run_inputs
from slime.utils.arguments import parse_config

NOT_SET = "--rollout-engine-command is not set"


def test_configured_engine_command_is_what_starts() -> None:
    args = parse_config(["--hf-checkpoint", "/m", "--rollout-engine-command", "python -m my_runtime.serve --quiet"],
                        env={}).to_namespace()
    eng = EngineProcess(model_path="/m", port=4321, engine_command=args.rollout_engine_command, device="cpu")
    assert eng.command() == [sys.executable, "-m", "my_runtime.serve", "--quiet", "--model-path", "/m", "--host",
                             "127.0.0.1", "--port", "4321", "--dtype", "float32", "--max-batch-size", "16",
                             "--device", "cpu"]
    assert EngineProcess(model_path="/m", port=1, engine_command="/opt/bin/serve").command()[0] == "/opt/bin/serve"


def test_slime_names_no_engine_program_of_its_own() -> None:
    assert parse_config(["--hf-checkpoint", "/m"], env={}).cluster.rollout_engine_command is None
    with pytest.raises(ValueError, match=NOT_SET):
        EngineProcess(model_path="/m", port=1).command()


def test_empty_engine_command_is_refused() -> None:
    with pytest.raises(ValueError, match="--rollout-engine-command is empty"):
        EngineProcess(model_path="/m", port=1, engine_command="  ").command()


def test_full_argv_is_run_as_given() -> None:
    argv = [sys.executable, "-m", "sglang.launch_server", "--port", "30000"]
    assert EngineProcess(model_path="/m", port=30000, argv=argv).command() == argv


@pytest.mark.parametrize("backend", ["embedded", "auto"])
def test_a_run_starting_embedded_engines_needs_the_command(backend: str) -> None:
    args = parse_config(["--hf-checkpoint", "/m", "--rollout-backend", backend], env={}).to_namespace()
    with pytest.raises(ValueError, match=f"{NOT_SET}.*--rollout-backend external"):
        check_engine_command(args, use_gpu=False)  # auto on CPU: embedded engines
    given = parse_config(["--hf-checkpoint", "/m", "--rollout-backend", backend, "--rollout-engine-command", "serve"],
                         env={}).to_namespace()
    check_engine_command(given, use_gpu=False)


def test_runs_starting_no_embedded_engine_need_no_command() -> None:
    external = parse_config(["--hf-checkpoint", "/m", "--rollout-backend", "external",
                             "--rollout-external-engine-addrs", "127.0.0.1:1"], env={}).to_namespace()
    check_engine_command(external, use_gpu=False)
    train_only = parse_config(["--hf-checkpoint", "/m", "--debug-train-only"], env={}).to_namespace()
    check_engine_command(train_only, use_gpu=False)  # no engines at all


def test_in_process_setups_refuse_it_before_anything_starts(tmp_path) -> None:
    cfg = parse_config(["--hf-checkpoint", str(tmp_path), "--log-dir", str(tmp_path / "logs")], env={})
    with pytest.raises(ValueError, match=NOT_SET):
        run_inputs(cfg, "torchrun")
    assert not (tmp_path / "logs").exists()
    given = run_inputs(cfg.with_overrides(rollout_engine_command="serve"), "torchrun")
    assert (given.model_path, given.checkpoint, given.meta) == (str(tmp_path), None, None)
