"""Trainer-runtime tests: make runtime_helpers importable by name (pytest runs with
--import-mode=importlib, so a test folder is not on the import path): the module is loaded from
its file and registered, instead of adding the folder to the import path."""

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("runtime_helpers", Path(__file__).with_name("runtime_helpers.py"))
runtime_helpers = importlib.util.module_from_spec(_spec)
sys.modules["runtime_helpers"] = runtime_helpers
_spec.loader.exec_module(runtime_helpers)
