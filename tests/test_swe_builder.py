"""swe-rl's task builder on real sdists (tarballs made here, read by the same code as PyPI's):
a project with tests gives validated instances; a project is rejected, with the reason, when its
sdist has no tests or its tests cannot pass offline."""

from __future__ import annotations

import os
import shutil
import tarfile
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

ROOT = Path(__file__).resolve().parents[1]
# The trainer's plugin loader puts swe-rl on the import path, as in a run; its sibling
# modules are then imported by their own names (one module object each).
load_plugin_module("swe-rl/swe_sources.py")

import swe_sources  # noqa: E402
from swe_build import Rejected, build_project  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

LIB = '''def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def mean(values):
    total = sum(values)
    return total / len(values)
'''
TESTS = '''from tinycalc import clamp, mean


def test_clamp_low():
    assert clamp(-5, 0, 10) == 0


def test_clamp_high():
    assert clamp(50, 0, 10) == 10


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5


def test_mean():
    assert mean([1, 2, 3]) == 2
'''


def make_sdist(cache: Path, name: str, files: dict[str, str]) -> None:
    src = cache / "src" / f"{name}-1.0"
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    (cache / "sdists").mkdir(parents=True, exist_ok=True)
    with tarfile.open(cache / "sdists" / f"{name}-1.0.tar.gz", "w:gz") as tar:
        tar.add(src, arcname=f"{name}-1.0")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    real_runtime = swe_sources.pytest_runtime_cache()
    if not (real_runtime / "pytest").is_dir():
        msg = "the pytest runtime is missing; run `bash swe-rl/setup_swe.sh`"
        pytest.fail(msg) if os.environ.get("CI") else pytest.skip(msg)
    monkeypatch.setenv("OPENCLAW_SWE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache" / "pytest-runtime").mkdir(parents=True)
    (tmp_path / "cache" / "pytest-runtime" / real_runtime.name).symlink_to(real_runtime)
    return tmp_path / "cache"


async def test_builder_makes_validated_instances(cache):
    make_sdist(cache, "tinycalc", {"tinycalc/__init__.py": LIB, "tests/test_tinycalc.py": TESTS, "setup.py": ""})
    got = await build_project("tinycalc==1.0", max_instances=2, log=lambda *_: None)
    assert len(got) == 2 and len({i.mutation["function"] for i in got}) == 2
    for inst in got:
        assert inst.sdist == "tinycalc==1.0" and inst.repo == "pypi/tinycalc" and inst.python_path == ["."]
        assert inst.FAIL_TO_PASS and not set(inst.FAIL_TO_PASS) & set(inst.PASS_TO_PASS)
        assert all(t.startswith("tests/test_tinycalc.py::") for t in inst.test_ids)
        assert inst.patch.startswith("diff --git a/tinycalc/__init__.py b/tinycalc/__init__.py")
        assert inst.FAIL_TO_PASS[0].split("::")[1] in inst.problem_statement
        assert "E " in inst.problem_statement  # pytest's assertion lines: expected vs actual
        changed = [ln[1:].strip() for ln in inst.patch.splitlines() if ln[:1] in "+-" and ln[1:2] != ln[:1]]
        assert not any(c and c in inst.problem_statement for c in changed)


async def test_builder_rejects_with_a_reason(cache):
    make_sdist(cache, "notests", {"notests/__init__.py": LIB, "README": "no tests here"})
    with pytest.raises(Rejected, match="no tests in the sdist"):
        await build_project("notests==1.0", max_instances=1, log=lambda *_: None)
    net_tests = ("import socket\n\n\ndef test_fetch():\n"
                 "    socket.create_connection(('pypi.org', 443), timeout=2)\n")
    make_sdist(cache, "needsnet", {"needsnet/__init__.py": LIB, "tests/test_net.py": net_tests})
    with pytest.raises(Rejected, match="no test passes in the sandbox") as err:
        await build_project("needsnet==1.0", max_instances=1, log=lambda *_: None)
    assert "test_fetch" in str(err.value)  # pytest's own words say which test failed and why
    assert "need the network" in str(err.value)
    missing_dep = "import not_in_the_sandbox\n\n\ndef test_x():\n    assert not_in_the_sandbox\n"
    make_sdist(cache, "needsdep", {"needsdep/__init__.py": LIB, "tests/test_dep.py": missing_dep})
    with pytest.raises(Rejected) as err:
        await build_project("needsdep==1.0", max_instances=1, log=lambda *_: None)
    assert "No module named 'not_in_the_sandbox'" in str(err.value) and "tests/test_dep.py" in str(err.value)
    with pytest.raises(ValueError, match="NAME==VERSION"):
        await build_project("needsnet", max_instances=1)


# A project whose package reads its own installed version, and whose suite's -rA output (about
# 200 KB) is far past a sandbox command's 64 KiB output cap.
SELF_VERSIONED = '''from importlib.metadata import version

__version__ = version("bigcalc")
''' + LIB
BIG_SUITE = TESTS + '''
import pytest


@pytest.mark.parametrize("n", range(1500))
def test_clamp_keeps_values_inside_a_wide_range_unchanged_whatever_their_size(n):
    assert clamp(n, 0, 10_000) == n
'''


async def test_builder_installs_the_project_and_reads_a_large_suite(cache):
    make_sdist(cache, "bigcalc", {"bigcalc/__init__.py": SELF_VERSIONED,
                                  "tests/test_bigcalc.py": BIG_SUITE.replace("tinycalc", "bigcalc"),
                                  "PKG-INFO": "Metadata-Version: 2.1\nName: bigcalc\nVersion: 1.0\n"})
    lines: list[str] = []
    got = await build_project("bigcalc==1.0", max_instances=1, log=lines.append)
    assert got and "1504 baseline tests pass" in lines[0]


@pytest.mark.slow  # downloads two sdists, freezegun and the pytest runtime from PyPI, then ~80 s of builds
@pytest.mark.parametrize("pin", ["tabulate==0.9.0", "humanize==4.9.0"])
def test_real_projects_build_from_a_clean_cache(pin, tmp_path):
    import json
    import subprocess
    import sys

    env = dict(os.environ, OPENCLAW_SWE_CACHE=str(tmp_path / "cache"))
    out = tmp_path / "got.jsonl"
    r = subprocess.run([sys.executable, str(ROOT / "swe-rl" / "swe_build.py"), "build", pin, "--max-instances", "5",
                        "--out", str(out)], env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["instances"] >= 5
