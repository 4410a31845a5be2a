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


# The openclaw packages from the bottom up. A module may import its own package and the layers
# below it, at top level or inside a function, never a layer above: the buffer knows nothing of the
# server, the server nothing of the trainer's bridge, and only the entry points (demo, launch,
# evaluation) see everything.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("paths", "proctree", "methods", "httpapi", "environment"),
    ("models", "sandbox", "buffer"),
    ("judge", "engines", "tracks"),
    ("intercept",),
    ("control",),
    ("server",),
    ("bridge",),
    ("demo", "launch", "evaluation"),
)
LAYER = {pkg: i for i, names in enumerate(LAYERS) for pkg in names}


def _openclaw_imports() -> list[tuple[str, str, str, int]]:
    """(importing module, its package, imported module, line) for every openclaw import in openclaw/."""
    import ast

    out = []
    for f in sorted((REPO / "openclaw").rglob("*.py")):
        rel = f.relative_to(REPO).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        pkg = rel.parts[1] if len(rel.parts) > 2 else rel.stem
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
            out += [(module, pkg, n, node.lineno) for n in names if n.startswith("openclaw.")]
    return out


def test_openclaw_layers_import_only_downward() -> None:
    imports = _openclaw_imports()
    packages = {pkg for _, pkg, _, _ in imports} - {"__init__"}
    assert packages <= set(LAYER), f"packages without a layer: {sorted(packages - set(LAYER))}"
    upward = [f"{mod}:{line} imports {target} ({LAYER[target.split('.')[1]]} above {LAYER[pkg]})"
              for mod, pkg, target, line in imports
              if pkg in LAYER and LAYER[target.split(".")[1]] > LAYER[pkg]]
    assert upward == [], "\n".join(upward)
    sideways = {(pkg, target.split(".")[1]) for _, pkg, target, _ in imports
                if pkg in LAYER and target.split(".")[1] != pkg and LAYER[target.split(".")[1]] == LAYER[pkg]}
    assert not {(a, b) for a, b in sideways if (b, a) in sideways}, f"packages importing each other: {sideways}"


def test_the_layer_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    """A function-level import is found (so an import hidden in a function cannot pass)."""
    found = [(mod, target) for mod, _, target, _ in _openclaw_imports() if mod == "openclaw.demo.evaluate"]
    source = (REPO / "openclaw" / "demo" / "evaluate.py").read_text()
    assert "    from openclaw.server.prompting import user_prompt_ids" in source  # inside chat_prompt_ids
    assert ("openclaw.demo.evaluate", "openclaw.server.prompting") in found


def test_slime_names_no_openclaw_module_or_method() -> None:
    """slime's package text names no openclaw module (an engine command, a plugin default) and no
    personal-agent method folder: those are given to it by the caller."""
    import re

    pattern = re.compile(r"\bopenclaw\.[a-z_]+|openclaw-(rl|opd|combine|tinker)\b|openclaw_(rl|opd|combine)_")
    found = [f"{f.relative_to(REPO)}:{n}: {line.strip()}" for f in sorted((REPO / "slime" / "slime").rglob("*.py"))
             for n, line in enumerate(f.read_text().splitlines(), 1) if pattern.search(line)]
    assert found == [], "\n".join(found)
