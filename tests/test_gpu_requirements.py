"""requirements-gpu.txt is an exact, complete pin set that agrees with itself and with requirements.txt.

The static tests read the two files. The resolve tests ask pip for a dry-run install of the whole GPU set
against PyPI, with this machine's pip configuration shut out (a config file or PIP_* variable may add a
local wheel folder or cap torch), so they see what a user's GPU machine sees: any pin that SGLang, torch
or another member of the set disagrees with makes the resolve fail here. They are slow (about three
minutes of PyPI look-ups): `python -m pytest -m slow tests/test_gpu_requirements.py`.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pytest
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
GPU_REQS = REPO / "requirements-gpu.txt"
CPU_REQS = REPO / "requirements.txt"
INDEX_URL = "https://pypi.org/simple"
OVERRIDE_MARK = "overrides requirements.txt:"
# The resolver's own pin, run from its wheel: pip 23.2 downloads every resolved wheel in full even on
# --dry-run (gigabytes of CUDA wheels here), 26.3 reads only metadata (PEP 658 files, or with fast-deps
# HTTP range requests into the wheel where an index serves no metadata files).
RESOLVER_PIP = "pip==26.3"
# Network settings a user's pip would need too; every other PIP_* variable (find-links, constraints,
# index URLs) changes what resolves, so the resolve must not see it.
_NETWORK_PIP_VARS = {"PIP_CERT", "PIP_CLIENT_CERT", "PIP_PROXY", "PIP_DEFAULT_TIMEOUT", "PIP_TIMEOUT", "PIP_RETRIES"}
# Pure-Python sdist. Any other sdist would be compiled on the GPU machine at install time, as flash-attn 2's
# would (its build imports torch), which is what the GPU set avoids.
SDISTS_ALLOWED = {"langdetect"}
_RESOLVE_TIMEOUT_S = 480

_PIN = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[(?P<extras>[A-Za-z0-9._,-]+)\])?"
                  r"==(?P<version>[A-Za-z0-9.+!_-]+)")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Pin:
    name: str  # canonical
    extras: frozenset[str]
    version: str
    lineno: int
    override: str | None  # the reason given after OVERRIDE_MARK


def parse(path: Path) -> tuple[dict[str, Pin], list[str]]:
    """The file's pins by canonical name, and one line per line that is not an exact pin or repeats one."""
    pins: dict[str, Pin] = {}
    problems: list[str] = []
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        body, _, comment = raw.partition("#")
        body = body.strip()
        if not body:
            continue
        match = _PIN.fullmatch(body)
        if not match:
            problems.append(f"{path.name}:{lineno}: not an exact `name==version` pin: {raw.strip()!r}")
            continue
        name = canonical(match["name"])
        if name in pins:
            problems.append(f"{path.name}:{lineno}: {name} is pinned again (first on line {pins[name].lineno})")
            continue
        comment = comment.strip()
        override = comment[len(OVERRIDE_MARK):].strip() if comment.startswith(OVERRIDE_MARK) else None
        extras = frozenset(canonical(e) for e in (match["extras"] or "").split(",") if e)
        pins[name] = Pin(name, extras, match["version"], lineno, override)
    return pins, problems


def test_every_line_is_an_exact_pin() -> None:
    pins, problems = parse(GPU_REQS)
    assert not problems, "\n".join(problems)
    assert {"torch", "sglang", "sglang-router", "megatron-core", "transformers"} <= pins.keys()


def test_gpu_set_contains_all_of_requirements_txt() -> None:
    """setup.sh --gpu installs the GPU set instead of requirements.txt, so nothing of it may be missing."""
    gpu, _ = parse(GPU_REQS)
    cpu, problems = parse(CPU_REQS)
    assert not problems, "\n".join(problems)
    missing = sorted(name for name in cpu if name not in gpu)
    assert not missing, f"in requirements.txt but not in requirements-gpu.txt: {missing}"
    extras = {n: (sorted(cpu[n].extras), sorted(gpu[n].extras)) for n in cpu if cpu[n].extras != gpu[n].extras}
    assert not extras, f"extras differ (requirements.txt, requirements-gpu.txt): {extras}"


def test_shared_pins_agree_unless_declared_overrides() -> None:
    gpu, _ = parse(GPU_REQS)
    cpu, _ = parse(CPU_REQS)
    problems = []
    for name, pin in sorted(gpu.items()):
        theirs = cpu.get(name)
        where = f"requirements-gpu.txt:{pin.lineno} {name}=={pin.version}"
        if pin.override is not None and not pin.override:
            problems.append(f"{where}: the override gives no reason")
        if theirs is None:
            if pin.override is not None:
                problems.append(f"{where}: marked as an override, but requirements.txt does not pin {name}")
        elif theirs.version != pin.version and pin.override is None:
            problems.append(f"{where}: requirements.txt pins {theirs.version}; make them equal, or end the line "
                            f"with '# {OVERRIDE_MARK} <why>'")
        elif theirs.version == pin.version and pin.override is not None:
            problems.append(f"{where}: marked as an override, but requirements.txt pins the same version")
    assert not problems, "\n".join(problems)


def test_setup_refuses_gpu_without_nvidia_smi(tmp_path: Path) -> None:
    # A PATH holding only `dirname` hides nvidia-smi even on a GPU machine, so nothing is installed here.
    (tmp_path / "dirname").symlink_to(subprocess.check_output(["bash", "-c", "command -v dirname"], text=True).strip())
    env = {**os.environ, "PATH": str(tmp_path)}
    res = subprocess.run(["/bin/bash", str(REPO / "scripts/setup.sh"), "--gpu"], env=env, capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 1, res.stderr
    assert "nvidia-smi not found" in res.stderr and "--gpu --force" in res.stderr
    res = subprocess.run(["/bin/bash", str(REPO / "scripts/setup.sh"), "--gpus"], env=env, capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 2 and "unknown option '--gpus'" in res.stderr


def _pypi_only_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in _NETWORK_PIP_VARS}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """pip's --report of a dry-run install of requirements-gpu.txt into an empty environment."""
    tmp = tmp_path_factory.mktemp("gpu-resolve")
    env = _pypi_only_env()
    fetch = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--index-url", INDEX_URL, "--dest", str(tmp), RESOLVER_PIP],
        env=env, capture_output=True, text=True, timeout=300)
    wheels = sorted(tmp.glob("pip-*.whl"))
    if fetch.returncode != 0 or not wheels:
        pytest.fail(f"could not download {RESOLVER_PIP} from {INDEX_URL}: this test resolves the GPU set against "
                    f"PyPI and needs network access to it.\npip said:\n{_tail(fetch.stderr + fetch.stdout)}",
                    pytrace=False)
    report_path = tmp / "report.json"
    # Not --quiet: pip explains a conflict ("The conflict is caused by: ...") only at the normal verbosity.
    cmd = [sys.executable, str(wheels[0] / "pip"), "install", "--dry-run", "--ignore-installed", "--progress-bar=off",
           "--report", str(report_path), "--use-feature=fast-deps", "--index-url", INDEX_URL,
           "-r", str(GPU_REQS)]
    try:
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=_RESOLVE_TIMEOUT_S, cwd=tmp)
    except subprocess.TimeoutExpired:
        pytest.fail(f"resolving requirements-gpu.txt against {INDEX_URL} took over {_RESOLVE_TIMEOUT_S} s",
                    pytrace=False)
    if res.returncode != 0 or not report_path.exists():
        cause = res.stdout.find("The conflict is caused by")
        explained = res.stdout[cause:].strip() if cause >= 0 else _tail(res.stdout, 25)
        pytest.fail(f"requirements-gpu.txt does not resolve against {INDEX_URL} (exit {res.returncode}):\n"
                    f"{explained}\n{_tail(res.stderr, 40)}", pytrace=False)
    return json.loads(report_path.read_text())


def _installed(report: dict) -> dict[str, dict]:
    return {canonical(item["metadata"]["name"]): item for item in report["install"]}


_gpu_platform = pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() != "x86_64" or not (3, 11) <= sys.version_info < (3, 14),
    reason="the GPU set targets Linux x86_64 with Python 3.11-3.13, and pip resolves for the running platform")


@pytest.mark.slow
@_gpu_platform
def test_gpu_set_resolves_to_its_pins(report: dict) -> None:
    pins, _ = parse(GPU_REQS)
    installed = _installed(report)
    missing = sorted(name for name in pins if name not in installed)
    assert not missing, f"pinned but not in the resolved set: {missing}"
    wrong = {name: (pin.version, installed[name]["metadata"]["version"]) for name, pin in pins.items()
             if Version(installed[name]["metadata"]["version"]) != Version(pin.version)}
    assert not wrong, f"resolved to other versions than pinned (pin, resolved): {wrong}"


@pytest.mark.slow
@_gpu_platform
def test_resolved_torch_is_the_cuda_build_from_pypi(report: dict) -> None:
    installed = _installed(report)
    torch = installed["torch"]
    assert "+" not in torch["metadata"]["version"], torch["metadata"]["version"]
    cuda_deps = [r for r in torch["metadata"].get("requires_dist", []) if re.match(r"(nvidia|cuda)-", r)]
    assert cuda_deps, f"torch from {torch['download_info']['url']} declares no CUDA libraries"
    off_pypi = {n: i["download_info"]["url"] for n, i in installed.items()
                if urlparse(i["download_info"]["url"]).hostname != "files.pythonhosted.org"}
    assert not off_pypi, f"resolved from somewhere other than PyPI: {off_pypi}"


@pytest.mark.slow
@_gpu_platform
def test_nothing_but_pure_python_sdists(report: dict) -> None:
    sdists = {n: i["download_info"]["url"] for n, i in _installed(report).items()
              if not i["download_info"]["url"].endswith(".whl")}
    assert set(sdists) <= SDISTS_ALLOWED, f"would be built from source on the GPU machine: {sdists}"
