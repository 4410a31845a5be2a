"""Environment variables are read in one module per package, from one documented table.

openclaw/environment.py declares every variable the runtime reads outside the launcher (whose own
names are openclaw/launch/names.py's), slime/slime/utils/environment.py every variable slime reads.
Here:
  (a) no module reads the environment except through `env_value` (an AST walk names file:line);
  (b) every name read is declared, and every declared name is read somewhere (the table cannot rot);
  (c) openclaw/ENVIRONMENT.md and slime/README.md hold the tables `markdown_table()` renders.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from slime.utils import environment as slime_environment

from openclaw import environment as openclaw_environment

REPO = Path(__file__).resolve().parents[1]
TRACK_FOLDERS = ("openclaw-rl", "openclaw-opd", "openclaw-combine", "openclaw-tinker", "openclaw-test",
                 "terminal-rl", "toolcall-rl", "swe-rl", "gui-rl")
UPPER = re.compile(r"[A-Z][A-Z0-9_]*")


@dataclass(frozen=True)
class Package:
    name: str
    table: ModuleType
    table_file: Path
    doc: Path
    roots: tuple[Path, ...]
    skip: tuple[Path, ...] = ()

    def files(self) -> list[Path]:
        found = [f for root in self.roots for f in sorted(root.rglob("*.py"))]
        return [f for f in found if f != self.table_file and not any(f.is_relative_to(s) for s in self.skip)]

    def declared(self) -> set[str]:
        return {v.name for v in self.table.VARIABLES}


OPENCLAW = Package("openclaw", openclaw_environment, REPO / "openclaw" / "environment.py",
                   REPO / "openclaw" / "ENVIRONMENT.md", (REPO / "openclaw", *(REPO / f for f in TRACK_FOLDERS)),
                   skip=(REPO / "openclaw" / "launch",))
SLIME = Package("slime", slime_environment, REPO / "slime" / "slime" / "utils" / "environment.py",
                REPO / "slime" / "README.md", (REPO / "slime" / "slime",))
PACKAGES = (OPENCLAW, SLIME)


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


# ---- (a) reads that bypass the table ------------------------------------------------------------------
def _is_os_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and \
        isinstance(node.value, ast.Name) and node.value.id == "os"


def _is_env_name(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in ("env", "environ")


def _upper_literal(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(UPPER.fullmatch(node.value))


def _call_bypass(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name) and func.id == "getenv":
        return "getenv(...)"
    if not isinstance(func, ast.Attribute):
        return None
    if func.attr == "get" and _is_os_environ(func.value):
        return "os.environ.get(...)"
    if func.attr == "getenv" and isinstance(func.value, ast.Name) and func.value.id == "os":
        return "os.getenv(...)"
    if func.attr == "get" and _is_env_name(func.value) and node.args and _upper_literal(node.args[0]):
        return f"{ast.unparse(func.value)}.get({ast.unparse(node.args[0])})"
    return None


def _bypass(node: ast.AST) -> str | None:
    """How `node` reads the environment without `env_value`, or None."""
    if isinstance(node, ast.Call):
        return _call_bypass(node)
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        if _is_os_environ(node.value):
            return "os.environ[...]"
        if _is_env_name(node.value) and _upper_literal(node.slice):
            return ast.unparse(node)
    if isinstance(node, ast.Compare):
        if any(isinstance(op, ast.In | ast.NotIn) and _is_os_environ(right)
               for op, right in zip(node.ops, node.comparators, strict=True)):
            return "... in os.environ"
    return None


def bypasses(tree: ast.AST) -> list[tuple[int, str]]:
    return sorted((node.lineno, how) for node in ast.walk(tree) if (how := _bypass(node)))


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_every_read_goes_through_the_table(package: Package) -> None:
    files = package.files()
    assert len(files) > 30, files  # the walk really covered the package
    found = [f"{_rel(f)}:{line}: {how} (use env_value)" for f in files for line, how in bypasses(_parse(f))]
    assert found == [], "\n".join(found)


def test_the_walk_sees_every_kind_of_bypass() -> None:
    """Each pattern is found (so a read of that kind cannot pass unseen)."""
    source = "\n".join([
        "import os",
        "a = os.environ.get('A')",
        "b = os.getenv('B')",
        "c = os.environ['C']",
        "d = 'D' in os.environ",
        "e = env.get('E')",
        "f = environ.get('F', '')",
        "g = env['G']",
        "os.environ['H'] = '1'",  # a write: not a read
        "i = env.get(name)",  # a Mapping lookup of a computed key: not flagged (the table's helpers do this)
        "j = 'J' not in os.environ",
    ])
    assert [line for line, _ in bypasses(ast.parse(source))] == [2, 3, 4, 5, 6, 7, 8, 11]


# ---- (b) every name read is declared, every declared name is read --------------------------------------
def _constants(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """Module-level names bound to a string or a tuple of strings (a variable's name kept in a constant)."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            items = value.elts if isinstance(value, ast.Tuple) else [value]
            if all(isinstance(i, ast.Constant) and isinstance(i.value, str) for i in items):
                out[node.targets[0].id] = tuple(i.value for i in items)  # type: ignore[union-attr]
    return out


def _loop_sources(tree: ast.AST) -> dict[str, ast.expr]:
    """Loop variable -> what it iterates over (`for name in API_KEY_ENVS: env_value(name)`)."""
    return {node.target.id: node.iter for node in ast.walk(tree)
            if isinstance(node, ast.For) and isinstance(node.target, ast.Name)}


def _calls(tree: ast.AST, names: set[str]) -> Iterator[ast.Call]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if called in names:
                yield node


def _helpers(trees: list[ast.Module]) -> set[str]:
    """Functions that pass a parameter to env_value (`_number(env, "X", 1.0)`): their literal
    arguments are names read."""
    out = set()
    for tree in trees:
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef):
                params = {a.arg for a in (*fn.args.args, *fn.args.kwonlyargs, fn.args.vararg) if a}
                loops = {k for k, v in _loop_sources(fn).items() if isinstance(v, ast.Name) and v.id in params}
                if any(c.args and isinstance(c.args[0], ast.Name) and c.args[0].id in params | loops
                       for c in _calls(fn, {"env_value"})):
                    out.add(fn.name)
    return out


def _resolve(node: ast.expr, constants: dict[str, tuple[str, ...]], loops: dict[str, ast.expr]) -> tuple[str, ...]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return (node.value,)
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    if isinstance(node, ast.Name) and node.id in loops:
        return _resolve(loops[node.id], constants, loops)
    return ()


def names_read(package: Package) -> dict[str, list[str]]:
    """Every name the package reads that a static walk can see -> where (file:line): literal
    `env_value` arguments, constants passed to it, literal arguments of helpers that pass theirs
    to it, and `env="NAME"` declarations (track options, slime's config fields)."""
    trees = {f: _parse(f) for f in package.files()}
    helpers = _helpers(list(trees.values()))
    out: dict[str, list[str]] = {}
    for f, tree in trees.items():
        constants, loops = _constants(tree), _loop_sources(tree)
        found = [(c.lineno, n) for c in _calls(tree, {"env_value"}) if c.args
                 for n in _resolve(c.args[0], constants, loops)]
        found += [(c.lineno, a.value) for c in _calls(tree, helpers) for a in c.args if _upper_literal(a)]
        found += [(node.lineno, kw.value.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
                  for kw in node.keywords if kw.arg == "env" and _upper_literal(kw.value)]  # type: ignore[union-attr]
        for line, name in found:
            out.setdefault(name, []).append(f"{_rel(f)}:{line}")
    return out


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_every_name_read_is_declared(package: Package) -> None:
    undeclared = {n: w for n, w in names_read(package).items() if n not in package.declared()}
    assert undeclared == {}, f"declare these in {_rel(package.table_file)}: " + \
        "; ".join(f"{n} ({', '.join(w)})" for n, w in sorted(undeclared.items()))


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_every_declared_name_is_read(package: Package) -> None:
    unread = sorted(package.declared() - names_read(package).keys())
    assert unread == [], f"declared in {_rel(package.table_file)} but read nowhere: {unread}"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_the_table_has_one_row_per_name(package: Package) -> None:
    names = [v.name for v in package.table.VARIABLES]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert all(UPPER.fullmatch(v.name) and v.meaning and v.read_by for v in package.table.VARIABLES)


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_env_value(package: Package) -> None:
    env_value = package.table.env_value
    assert env_value("MODEL_PATH", {"MODEL_PATH": "/m"}) == "/m"
    assert env_value("MODEL_PATH", {"MODEL_PATH": ""}) is None  # empty means unset
    assert env_value("MODEL_PATH", {}) is None
    with pytest.raises(KeyError) as info:
        env_value("NOT_A_DECLARED_NAME", {"NOT_A_DECLARED_NAME": "1"})
    assert "env_value('NOT_A_DECLARED_NAME')" in str(info.value) and "not declared" in str(info.value)


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_the_table_module_imports_only_the_standard_library(package: Package) -> None:
    """It is the bottom layer: every module of its package may import it. The runtime's table uses
    slime's table type, whose module is itself standard library only."""
    tree = _parse(package.table_file)
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    allowed = set(sys.stdlib_module_names) | {"__future__", "slime.utils.environment"}
    assert {m for m in imported if m.split(".")[0] not in allowed and m not in allowed} == set(), imported


# ---- (c) the documentation is the table -------------------------------------------------------------
def _doc_table(path: Path) -> str:
    """The first Markdown table whose header starts with `| variable |`."""
    lines = path.read_text().splitlines() if path.is_file() else []
    start = next((i for i, line in enumerate(lines) if line.startswith("| variable |")), len(lines))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[start:end])


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_the_documentation_is_the_table(package: Package) -> None:
    assert _doc_table(package.doc) == package.table.markdown_table(), \
        f"{_rel(package.doc)} is not the table: paste {package.name}'s environment markdown_table() output there"
