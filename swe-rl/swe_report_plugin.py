"""The pytest plugin that reports test outcomes for swe-rl's reward (runs inside the sandbox).

It is published into the read-only pytest runtime as `openclaw_swe_report` and loaded with
`-p openclaw_swe_report`, before any project code is imported. Outcomes go to a JSON file named by
OPENCLAW_SWE_REPORT (popped from the environment at import), never through stdout, which the code
under test can print to. The code under test runs in this process, so nothing here is absolute:
what the plugin can see, it reports as `tamper` (the scorer then gives 0):

- pytest or its plugins imported from anywhere but the runtime (a shadowing module);
- an `atexit` callback registered by code outside the runtime and the standard library;
- pytest's own reporting functions replaced (runner, reports, hook calling, outcomes);
- a test function's code object swapped after collection;
- a plugin registered from the work tree other than a `conftest.py`;
- threads or processes started by the run still alive when pytest finishes.

After writing the report the process ends with `os._exit`, so no atexit callback, finalizer or
leftover thread runs after it; the runner kills the namespace's other processes before reading.
Standard library only (plus pytest): it runs under the sandbox's system Python.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading

import pytest

REPORT_ENV = "OPENCLAW_SWE_REPORT"
_REPORT_PATH = os.environ.pop(REPORT_ENV, "")
_RUNTIME = os.path.dirname(os.path.dirname(os.path.abspath(pytest.__file__)))
_STDLIB = os.path.dirname(os.__file__)
_FAILURE_CHARS = 3000


def _trusted(path: str | None) -> bool:
    return bool(path) and os.path.abspath(path).startswith((_RUNTIME + os.sep, _STDLIB + os.sep))


# pytest's own functions that decide and carry a test's outcome: (module, attribute path).
_WATCHED = (
    ("_pytest.runner", "call_and_report"), ("_pytest.runner", "runtestprotocol"),
    ("_pytest.runner", "pytest_runtest_makereport"), ("_pytest.runner", "pytest_runtest_call"),
    ("_pytest.runner", "pytest_runtest_protocol"), ("_pytest.runner", "check_interactive_exception"),
    ("_pytest.runner", "CallInfo.from_call"), ("_pytest.reports", "TestReport.from_item_and_call"),
    ("_pytest.reports", "TestReport.__init__"), ("_pytest.reports", "BaseReport.passed"),
    ("_pytest.reports", "BaseReport.failed"), ("_pytest.python", "Function.runtest"),
    ("_pytest.python", "pytest_pyfunc_call"), ("pluggy._callers", "_multicall"),
    ("_pytest.outcomes", "fail"), ("_pytest.outcomes", "skip"), ("_pytest.outcomes", "xfail"),
)


def _internals() -> dict[str, object]:
    """The watched objects by dotted name (class attributes read from __dict__, so a replaced
    classmethod or property shows as a new object)."""
    import importlib

    found: dict[str, object] = {}
    for module_name, path in _WATCHED:
        obj: object = importlib.import_module(module_name)
        for part in path.split("."):
            obj = vars(obj).get(part) if isinstance(obj, type) else getattr(obj, part, None)
        found[f"{module_name}.{path}"] = obj
    return found


class _AtexitGuard:
    """Wraps atexit.register to remember who registered what (the callbacks never run: os._exit)."""

    def __init__(self) -> None:
        self.original = atexit.register
        self.untrusted: list[str] = []
        self.count_at_start = atexit._ncallbacks()
        self.registered = 0
        atexit.register = self.register  # type: ignore[assignment]

    def register(self, func, *args, **kwargs):
        caller = sys._getframe(1).f_code.co_filename
        self.registered += 1
        if not _trusted(caller):
            self.untrusted.append(f"{getattr(func, '__qualname__', func)!s} from {caller}")
        return self.original(func, *args, **kwargs)

    def problems(self) -> list[str]:
        found = [f"atexit callback registered by code under test: {u}" for u in self.untrusted]
        if atexit._ncallbacks() > self.count_at_start + self.registered:
            found.append("atexit callbacks registered around the atexit module")
        return found


class Reporter:
    """Collects every test's outcome from pytest's hooks and checks the run was not steered."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.outcomes: dict[str, str] = {}
        self.failures: dict[str, str] = {}
        self.collect_errors: dict[str, str] = {}
        self.codes: dict[str, object] = {}
        self.tamper: list[str] = []
        self.exit_status = 0
        origin = getattr(pytest, "__file__", "")
        if not _trusted(origin):
            self.tamper.append(f"pytest imported from {origin}, not the runtime")

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items) -> None:
        for item in items:
            fn = getattr(item, "function", None)
            if fn is not None and hasattr(fn, "__code__"):
                self.codes[item.nodeid] = fn.__code__

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.collect_errors[report.nodeid or "<session>"] = str(report.longrepr)[-_FAILURE_CHARS:]

    def pytest_runtest_logreport(self, report) -> None:
        nodeid, previous = report.nodeid, self.outcomes.get(report.nodeid)
        if report.when == "call":
            if hasattr(report, "wasxfail"):
                outcome = "passed"  # xfail and xpass both count as the test's expected behaviour
            else:
                outcome = report.outcome
        elif report.failed:
            outcome = "error"
        elif report.skipped and report.when == "setup":
            outcome = "skipped"
        else:
            return
        if previous in ("failed", "error"):
            return  # a later phase never turns a failure back into a pass
        self.outcomes[nodeid] = outcome
        if report.failed:
            self.failures[nodeid] = str(report.longrepr)[-_FAILURE_CHARS:]

    def pytest_sessionfinish(self, session, exitstatus) -> None:
        self.exit_status = int(exitstatus)
        self.check(session)

    def check(self, session) -> None:
        for name, obj in _internals().items():
            if _INTERNALS.get(name) is not obj:
                self.tamper.append(f"pytest internals replaced: {name}")
        for item in session.items:
            fn = getattr(item, "function", None)
            code = self.codes.get(item.nodeid)
            if code is not None and getattr(fn, "__code__", None) is not code:
                self.tamper.append(f"test function replaced after collection: {item.nodeid}")
        self.tamper += _ATEXIT.problems()
        for plugin in session.config.pluginmanager.get_plugins():
            where = getattr(plugin, "__file__", None) or getattr(sys.modules.get(type(plugin).__module__), "__file__", None)
            if where and not _trusted(where) and os.path.basename(where) != "conftest.py" \
                    and os.path.abspath(where) != os.path.abspath(__file__):
                self.tamper.append(f"pytest plugin registered from the work tree: {where}")
        for name in ("sitecustomize", "usercustomize"):
            mod = sys.modules.get(name)
            if mod is not None and not _trusted(getattr(mod, "__file__", None)):
                self.tamper.append(f"{name} imported from {getattr(mod, '__file__', '?')}")

    def live_strangers(self) -> list[str]:
        threads = [t.name for t in threading.enumerate() if t.is_alive() and t.ident not in _THREADS]
        found = [f"threads still running when pytest finished: {threads}"] if threads else []
        procs = _processes_started_after_us()
        if procs:
            found.append(f"processes started by the run still running: {procs}")
        return found

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config) -> None:
        self.tamper += self.live_strangers()
        report = {"exit_status": self.exit_status, "outcomes": self.outcomes, "failures": self.failures,
                  "collect_errors": self.collect_errors, "tamper": self.tamper}
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        data = json.dumps(report).encode()
        while data:
            data = data[os.write(fd, data):]
        os.fsync(fd)
        os.close(fd)
        os._exit(self.exit_status)


def _processes_started_after_us() -> list[str]:
    """Other processes of this pid namespace that started after this one (pids from /proc)."""
    me = os.getpid()
    try:
        clock = os.sysconf("SC_CLK_TCK")
        with open(f"/proc/{me}/stat") as f:
            my_start = int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return []
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if fields[0] != "Z" and int(fields[19]) > my_start + clock // 100:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    command = f.read().replace(b"\0", b" ").decode(errors="replace")[:80]
                found.append(f"{entry}: {command}")
        except (OSError, ValueError, IndexError):
            continue
    return found


# Taken at import, which `-p` does before any conftest or project module is imported.
_INTERNALS = _internals()
_ATEXIT = _AtexitGuard()
_THREADS = {t.ident for t in threading.enumerate()}


def pytest_configure(config) -> None:
    if not _REPORT_PATH:
        raise pytest.UsageError(f"{REPORT_ENV} is not set: this plugin only runs under swe-rl's test runner")
    config.pluginmanager.register(Reporter(_REPORT_PATH), "openclaw_swe_reporter")
