"""Run a project's own pytest tests inside an episode's sandbox and read per-test outcomes.

pytest comes from the pinned runtime bound read-only at /opt/swe-pytest, first on PYTHONPATH and
with `python3 -P` (the work dir is not put ahead of it), never from the work tree; `-o addopts=`
ignores a project's own pytest options (coverage plugins, doctest flags) that the bare runtime
cannot honour; `-p no:cacheprovider` writes nothing into the tree; plugin autoloading is off, so a
`*.dist-info` in the work tree cannot register one.

Outcomes and failure texts come from the runtime's report plugin (`swe_report_plugin.py`),
written to a file, never from what the tests print: the code under test can print `PASSED <id>`.
pytest's own output goes to a file too and only its tail is read back, for messages; the report is
printed last, so a suite with a large output loses nothing.
"""

from __future__ import annotations

import json
import shlex
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from openclaw.sandbox import SandboxSession

PYTEST_MOUNT = "/opt/swe-pytest"
REPORT_PLUGIN_MODULE = "openclaw_swe_report"
_OUTPUT_TAIL_BYTES = 16 << 10  # failure excerpts also come in the report


class ReportMissing(RuntimeError):
    """pytest ended without the report plugin writing its report (it crashed, or was made to)."""


@dataclass
class TestRun:
    outcomes: dict[str, str]  # test id -> passed | failed | error | skipped | missing
    failures: dict[str, str] = field(default_factory=dict)  # test id -> pytest's report of it (any test of the run)
    output: str = ""
    exit_code: int = 0
    timed_out: bool = False
    duration_s: float = 0.0
    all_outcomes: dict[str, str] = field(default_factory=dict)  # every test the run reported
    collect_errors: dict[str, str] = field(default_factory=dict)  # file -> error (import failures)
    tamper: list[str] = field(default_factory=list)  # what the report plugin saw steering the run

    def passed(self, test_id: str) -> bool:
        return self.outcomes.get(test_id) == "passed" and not self.tamper


def pytest_command(test_ids: Sequence[str], python_path: Sequence[str], marker: str,
                   workdir: str = "/workspace", own_pid_namespace: bool = True) -> str:
    """pytest with the report plugin; then every other process of the run is killed, the tail of
    pytest's own output is printed, then the report between two `marker` lines, last.

    The kill is `kill -KILL -1`: everything this uid can signal. That is the run's own processes
    only inside the sandbox's pid namespace; without one (`--sandbox none`, no isolation at all)
    it would be the host's, so it is left out there."""
    reap = "kill -KILL -1 2>/dev/null; " if own_pid_namespace else ""
    entries = [p if p.startswith("/") else workdir if p in ("", ".") else f"{workdir}/{p}" for p in python_path]
    paths = ":".join([PYTEST_MOUNT, *entries, workdir])
    ids = " ".join(shlex.quote(t) for t in test_ids)
    return (f"R=$(mktemp -d) && cd {workdir} && PYTHONPATH={shlex.quote(paths)} PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 "
            f"OPENCLAW_SWE_REPORT=$R/report.json python3 -P -m pytest -p {REPORT_PLUGIN_MODULE} -q -rA --tb=short "
            f"-p no:cacheprovider -o addopts= --color=no {ids} >$R/out.txt 2>&1 </dev/null; "
            f"code=$?; {reap}tail -c {_OUTPUT_TAIL_BYTES} $R/out.txt; printf '\\n%s\\n' {marker}; "
            f"cat $R/report.json 2>/dev/null; printf '\\n%s\\n' {marker}; exit $code")


def read_report(stdout: str, marker: str) -> tuple[dict | None, str]:
    """(the plugin's report, pytest's output tail) from a run's stdout. The genuine report is between
    the last two markers, which end the output: the code under test may know the marker and print
    it, but only into pytest's output, which comes first, and its processes are killed by then."""
    parts = stdout.split(f"\n{marker}\n")
    if len(parts) < 3 or parts[-1].strip():
        return None, stdout
    body, tail = parts[-2], f"\n{marker}\n".join(parts[:-2])
    try:
        report = json.loads(body)
    except json.JSONDecodeError:
        return None, tail
    return (report if isinstance(report, dict) else None), tail


async def run_tests(session: SandboxSession, runtime_dir: str, test_ids: Sequence[str],
                    python_path: Sequence[str], timeout_s: float,
                    extra_binds: Sequence[tuple[str, str]] = ()) -> TestRun:
    """One pytest run of exactly `test_ids` in the session's work dir, with its own time limit.
    A run whose report is missing (pytest crashed, or was made to) counts every test as failed."""
    if not test_ids:
        raise ValueError("no tests to run")
    marker = f"--openclaw-swe-report-{uuid.uuid4().hex}--"
    command = pytest_command(test_ids, python_path, marker, own_pid_namespace=session.config.kind == "bwrap")
    r = await session.run(command, timeout_s=timeout_s,
                          ro_binds=[(runtime_dir, PYTEST_MOUNT), *extra_binds])
    report, output = read_report(r.stdout, marker)
    output = output + r.stderr[-4000:]
    if report is None:
        detail = ("timed out" if r.timed_out else "its output passed the sandbox's output cap" if r.truncated
                  else f"exit code {r.exit_code}")
        return TestRun({t: "failed" if r.timed_out else "missing" for t in test_ids}, {}, output, r.exit_code,
                       r.timed_out, r.duration_s,
                       tamper=[] if r.timed_out else [f"pytest wrote no report ({detail})"])
    every = {str(k): str(v) for k, v in report.get("outcomes", {}).items()}
    outcomes = {t: every.get(t, "missing") for t in test_ids}
    if r.timed_out:
        outcomes = {t: ("failed" if o == "missing" else o) for t, o in outcomes.items()}
    failures = {str(tid): str(text) for tid, text in report.get("failures", {}).items()}
    return TestRun(outcomes, failures, output, r.exit_code, r.timed_out, r.duration_s, all_outcomes=every,
                   collect_errors=dict(report.get("collect_errors", {})), tamper=list(report.get("tamper", [])))
