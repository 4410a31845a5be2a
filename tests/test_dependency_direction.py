"""Dependencies point one way: `slime` (the generic trainer) never imports `openclaw`.

Every module of the `slime` package (and the two loop scripts) is imported in a fresh
interpreter in which any `openclaw*` import raises: a module that reaches for the runtime, at
import time or through a plugin default, fails here with the module's name.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_PROBE = r"""
import importlib, importlib.abc, importlib.util, json, pkgutil, sys, traceback

class NoOpenclaw(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "openclaw" or name.startswith("openclaw."):
            raise ImportError(f"slime imported {name}: slime must never import openclaw")
        return None

sys.meta_path.insert(0, NoOpenclaw())
import slime
failed, names = {}, []
for info in pkgutil.walk_packages(slime.__path__, "slime."):
    names.append(info.name)
    try:
        importlib.import_module(info.name)
    except BaseException as exc:
        failed[info.name] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
for script in sys.argv[1:]:
    names.append(script)
    try:
        spec = importlib.util.spec_from_file_location("probe_" + script.replace("/", "_").replace(".", "_"), script)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    except BaseException as exc:
        failed[script] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
leaked = sorted(m for m in sys.modules if m == "openclaw" or m.startswith("openclaw."))
print(json.dumps({"names": names, "failed": failed, "leaked": leaked}))
"""


def test_every_slime_module_imports_without_openclaw() -> None:
    scripts = [str(REPO / "slime" / "train.py"), str(REPO / "slime" / "train_async.py")]
    proc = subprocess.run([sys.executable, "-c", _PROBE, *scripts], cwd=REPO / "slime", capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(report["names"]) > 30, report["names"]  # the walk really covered the package
    assert report["failed"] == {}, "\n".join(f"{k}: {v}" for k, v in report["failed"].items())
    assert report["leaked"] == []


def test_the_probe_catches_an_openclaw_import(tmp_path: Path) -> None:
    """The finder really blocks openclaw (so the test above cannot pass vacuously)."""
    probe = _PROBE.replace("import slime\n", "import slime\nimport openclaw.paths\n", 1)
    proc = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "slime must never import openclaw" in proc.stderr
