"""Trainer-runtime tests: make runtime_helpers importable by name (pytest runs with
--import-mode=importlib, so a test folder is not on the import path): the module is loaded from
its file and registered, instead of adding the folder to the import path. `task` is the learning
task the end-to-end runs share, `engine` a real embedded engine process on the tiny model."""

import importlib.util
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("runtime_helpers", Path(__file__).with_name("runtime_helpers.py"))
runtime_helpers = importlib.util.module_from_spec(_spec)
sys.modules["runtime_helpers"] = runtime_helpers
_spec.loader.exec_module(runtime_helpers)


@pytest.fixture
def task(tmp_path: Path, tiny_model_path: Path, engine_command: str):
    """The learning task in `tmp_path`, on a private copy of the tiny model (runtime_helpers.Task)."""
    model = runtime_helpers.private_model(tiny_model_path, tmp_path / "model")
    prompts, rm = runtime_helpers.write_task(tmp_path)
    return runtime_helpers.Task(tmp=tmp_path, model=model, prompts=prompts, rm=rm, engine_command=engine_command)


@pytest.fixture(scope="module")
def engine(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory, engine_command: str):
    """One engine process per test module; it is gone (or a zombie) once stopped."""
    from slime.ray.engine_process import EngineProcess

    eng = EngineProcess(model_path=str(tiny_model_path), log_path=tmp_path_factory.mktemp("eng") / "engine.log",
                        engine_command=engine_command)
    eng.start()
    yield eng
    pid = eng.pid
    eng.stop()
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
