"""Run a project's own pytest tests inside an episode's sandbox and read per-test outcomes.

pytest comes from the pinned runtime bound read-only at /opt/swe-pytest (PYTHONPATH), never from
the work tree; `-o addopts=` ignores a project's own pytest options (coverage plugins, doctest
flags) that the bare runtime cannot honour; `-p no:cacheprovider` writes nothing into the tree.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from openclaw.sandbox import SandboxSession

PYTEST_MOUNT = "/opt/swe-pytest"
_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s+(\S+?)(?:\s+-\s+(.*))?$")
_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")


@dataclass
class TestRun:
    outcomes: dict[str, str]  # test id -> passed | failed | error | skipped | missing
    failures: dict[str, str] = field(default_factory=dict)  # test id -> traceback excerpt
    output: str = ""
    exit_code: int = 0
    timed_out: bool = False
    duration_s: float = 0.0

    def passed(self, test_id: str) -> bool:
        return self.outcomes.get(test_id) == "passed"


def pytest_command(test_ids: Sequence[str], python_path: Sequence[str], workdir: str = "/workspace") -> str:
    entries = [p if p.startswith("/") else workdir if p in ("", ".") else f"{workdir}/{p}" for p in python_path]
    paths = ":".join([*entries, PYTEST_MOUNT])
    ids = " ".join(shlex.quote(t) for t in test_ids)
    return (f"cd {workdir} && PYTHONPATH={shlex.quote(paths)} python3 -m pytest -q -rA --tb=short "
            f"-p no:cacheprovider -o addopts= --color=no {ids}")


def parse_pytest_output(text: str, test_ids: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Outcomes from `-rA`'s summary lines, failure excerpts from `--tb=short` sections."""
    outcomes: dict[str, str] = {}
    for line in text.splitlines():
        m = _SUMMARY.match(line.strip())
        if m:
            kind = m.group(1).lower()
            outcomes[m.group(2)] = {"xfail": "passed", "xpass": "passed"}.get(kind, kind)
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        m = _SECTION.match(line)
        if m:
            current = sections.setdefault(m.group(1).strip(), [])
            continue
        if line.startswith("=") and current is not None:
            current = None
            continue
        if current is not None:
            current.append(line)
    failures: dict[str, str] = {}
    for tid in test_ids:
        head = tid.split("::", 1)[1].replace("::", ".") if "::" in tid else tid
        for name in (head, f"ERROR at setup of {head}", tid):
            if name in sections:
                failures[tid] = "\n".join(sections[name]).strip()
                break
    result = {tid: outcomes.get(tid, "missing") for tid in test_ids}
    return result, failures


async def run_tests(session: SandboxSession, runtime_dir: str, test_ids: Sequence[str],
                    python_path: Sequence[str], timeout_s: float,
                    extra_binds: Sequence[tuple[str, str]] = ()) -> TestRun:
    """One pytest run of exactly `test_ids` in the session's work dir, with its own time limit."""
    if not test_ids:
        raise ValueError("no tests to run")
    r = await session.run(pytest_command(test_ids, python_path), timeout_s=timeout_s,
                          ro_binds=[(runtime_dir, PYTEST_MOUNT), *extra_binds])
    outcomes, failures = parse_pytest_output(r.stdout, test_ids)
    if r.timed_out:
        outcomes = {t: ("failed" if o == "missing" else o) for t, o in outcomes.items()}
    return TestRun(outcomes, failures, r.stdout[-20000:] + r.stderr[-4000:], r.exit_code, r.timed_out, r.duration_s)
