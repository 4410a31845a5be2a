"""Terminal tasks: the native format and a loader for terminal-bench style task folders.

Native (a YAML list in a file, or one task.yaml per folder):
    id, instruction, setup (optional bash), tests {name: bash | {run: bash, stdout: text}},
    solution (optional, reference). A bash test passes when it exits 0; an output test when `run`
    exits 0 and prints `stdout` (compared outside the sandbox, so the programs it runs never see it).
    A native folder may instead hold setup.sh and tests/<name>.sh files.
terminal-bench folder:
    task.yaml with `instruction` (or `descriptions[0].description`), run-tests.sh, tests/ (copied
    read-only to /tests, TEST_DIR=/tests). The pytest `-rA` summary (PASSED/FAILED lines) gives the
    fraction of tests passed; without one, the exit status gives 1 or 0. The task's Dockerfile is
    not used: the sandbox runs on the host's read-only system.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

TASKS_DIR = Path(__file__).resolve().parent / "tasks"


@dataclass(frozen=True)
class OutputTest:
    """Run `run` in the sandbox; pass when it exits 0 and its stdout is `stdout` (trailing
    whitespace ignored). The expected text stays on the host: a program the test runs (the
    agent's own) can neither read it nor decide the verdict by its exit status."""

    run: str
    stdout: str

    def __post_init__(self) -> None:
        if not self.stdout.strip():
            # A program that exits early prints nothing: an empty expectation is no test at all.
            raise ValueError(f"output test {self.run!r}: the expected stdout must not be empty")

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str) -> OutputTest:
        if set(d) != {"run", "stdout"}:
            raise ValueError(f"{where}: an output test has exactly the keys run and stdout, got {sorted(d)}")
        return cls(run=str(d["run"]), stdout=str(d["stdout"]))

    def passes(self, exit_code: int, stdout: str) -> bool:
        return exit_code == 0 and stdout.rstrip() == self.stdout.rstrip()


Test = str | OutputTest


def _test_from_yaml(value: Any, where: str) -> Test:
    return OutputTest.from_dict(value, where) if isinstance(value, dict) else str(value)


def _test_to_dict(test: Test) -> str | dict[str, str]:
    return {"run": test.run, "stdout": test.stdout} if isinstance(test, OutputTest) else test


@dataclass(frozen=True)
class TerminalTask:
    id: str
    instruction: str
    tests: dict[str, Test]  # name -> bash or OutputTest (native); {"run-tests.sh": ...} for terminal-bench
    setup: str | None = None
    solution: tuple[str, ...] = ()
    category: str = "misc"
    # Extra read-only files for the tests, bound at /tests (terminal-bench's tests/ folder).
    test_files: dict[str, str] = field(default_factory=dict)
    style: str = "native"  # "native" | "terminal-bench"

    def __post_init__(self) -> None:
        if not self.id or not self.instruction.strip():
            raise ValueError(f"task {self.id!r}: id and instruction are required")
        if not self.tests:
            raise ValueError(f"task {self.id!r}: at least one test is required")
        if self.style not in ("native", "terminal-bench"):
            raise ValueError(f"task {self.id!r}: unknown style {self.style!r}")
        if self.style == "terminal-bench" and not isinstance(self.tests.get("run-tests.sh"), str):
            raise ValueError(f"task {self.id!r}: a terminal-bench task's test is its run-tests.sh script")

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "instruction": self.instruction,
            "tests": {name: _test_to_dict(t) for name, t in self.tests.items()}, "setup": self.setup,
            "solution": list(self.solution), "category": self.category, "test_files": dict(self.test_files),
            "style": self.style,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TerminalTask:
        known = {"id", "instruction", "tests", "setup", "solution", "category", "test_files", "style"}
        extra = set(d) - known
        if extra:
            raise ValueError(f"task {d.get('id')!r}: unknown keys {sorted(extra)}")
        tests = d.get("tests") or {}
        if not isinstance(tests, dict):
            raise ValueError(f"task {d.get('id')!r}: tests must map names to bash scripts")
        return cls(
            id=str(d.get("id", "")), instruction=str(d.get("instruction", "")),
            tests={str(k): _test_from_yaml(v, f"task {d.get('id')!r}, test {k!r}") for k, v in tests.items()},
            setup=d.get("setup"),
            solution=tuple(str(s) for s in d.get("solution") or ()), category=str(d.get("category", "misc")),
            test_files={str(k): str(v) for k, v in (d.get("test_files") or {}).items()},
            style=str(d.get("style", "native")),
        )


def _read_text_files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def _tbench_instruction(meta: dict[str, Any], where: Path) -> str:
    if meta.get("instruction"):
        return str(meta["instruction"])
    for desc in meta.get("descriptions") or ():
        if isinstance(desc, dict) and desc.get("description"):
            return str(desc["description"])
    raise ValueError(f"{where}: task.yaml has no instruction")


def load_task_folder(folder: Path) -> TerminalTask:
    """One task folder: terminal-bench style (run-tests.sh) or native (tests in yaml or tests/*.sh)."""
    meta_path = folder / "task.yaml"
    if not meta_path.is_file():
        raise FileNotFoundError(f"{folder}: no task.yaml")
    meta = yaml.safe_load(meta_path.read_text()) or {}
    if not isinstance(meta, dict):
        raise ValueError(f"{meta_path}: expected a mapping")
    setup_path = folder / "setup.sh"
    setup = setup_path.read_text() if setup_path.is_file() else meta.get("setup")
    if (folder / "run-tests.sh").is_file():
        tests_dir = folder / "tests"
        return TerminalTask(
            id=str(meta.get("id", folder.name)), instruction=_tbench_instruction(meta, meta_path),
            tests={"run-tests.sh": (folder / "run-tests.sh").read_text()}, setup=setup,
            solution=tuple(meta.get("solution") or ()), category=str(meta.get("category", "terminal-bench")),
            test_files=_read_text_files(tests_dir) if tests_dir.is_dir() else {}, style="terminal-bench",
        )
    tests = dict(meta.get("tests") or {})
    if (folder / "tests").is_dir():
        tests.update({p.stem: p.read_text() for p in sorted((folder / "tests").glob("*.sh"))})
    data = {k: v for k, v in meta.items() if k not in ("tests", "setup")}
    data.setdefault("id", folder.name)
    return TerminalTask.from_dict({**data, "tests": tests, "setup": setup})


def load_tasks(path: str | Path | None = None) -> list[TerminalTask]:
    """Tasks from a YAML list file, a task folder, or a directory of those (default: tasks/ here)."""
    root = Path(path) if path is not None else TASKS_DIR
    if not root.exists():
        raise FileNotFoundError(f"task path {str(root)!r} does not exist")
    if root.is_file():
        data = yaml.safe_load(root.read_text()) or []
        if not isinstance(data, list):
            raise ValueError(f"{root}: expected a YAML list of tasks")
        return [TerminalTask.from_dict(d) for d in data]
    if (root / "task.yaml").is_file():
        return [load_task_folder(root)]
    tasks: list[TerminalTask] = []
    for child in sorted(root.iterdir()):
        if child.is_file() and child.suffix in (".yaml", ".yml"):
            tasks.extend(load_tasks(child))
        elif child.is_dir() and (child / "task.yaml").is_file():
            tasks.append(load_task_folder(child))
    ids = [t.id for t in tasks]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise ValueError(f"duplicate task ids under {root}: {sorted(dupes)}")
    return tasks


_PYTEST_LINE = re.compile(r"^(PASSED|FAILED|ERROR)\s+(\S+)", re.MULTILINE)
_SUMMARY_HEADER = re.compile(r"^=+ short test summary info =+$", re.MULTILINE)
_SECTION_END = re.compile(r"^=", re.MULTILINE)


def _summary_section(output: str) -> str:
    """The last `short test summary info` section, up to pytest's closing `=== N passed ... ===`
    line; the whole output when there is none. Output of the programs under test comes before
    it (pytest prints captured output in earlier sections), so a program that prints
    `PASSED name` lines cannot add tests to the count."""
    headers = list(_SUMMARY_HEADER.finditer(output))
    if not headers:
        return output
    section = output[headers[-1].end():]
    end = _SECTION_END.search(section)
    return section[:end.start()] if end else section


def pytest_summary(output: str) -> tuple[int, int] | None:
    """(passed, total) from pytest's `-rA` short summary lines, or None when there are none."""
    results: dict[str, bool] = {}
    for status, name in _PYTEST_LINE.findall(_summary_section(output)):
        results[name] = status == "PASSED" and results.get(name, True)
    if not results:
        return None
    return sum(results.values()), len(results)
