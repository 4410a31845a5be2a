"""Pinned sdists and the in-sandbox pytest runtime: downloaded once, cached, materialized read-only.

The cache (sdists, unpacked trees, the pytest runtime) lives in OPENCLAW_SWE_CACHE
(default ~/.cache/openclaw/swe). What the sandbox must read (the pytest runtime, each instance's
base repository) is copied into a world-traversable runtime dir under the system temp dir,
because the sandbox runs as an unprivileged uid that cannot enter /root.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from openclaw.environment import env_value

# The pytest that runs every project's tests inside the sandbox (pure Python, Python >= 3.10).
PYTEST_RUNTIME = ("pytest==9.0.3", "pluggy==1.6.0", "iniconfig==2.3.0", "packaging==26.3", "pygments==2.20.0")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9._+!-]+)$")


class MissingSourceError(RuntimeError):
    """A pinned sdist (or the pytest runtime) is not in the cache; says how to get it."""


def cache_dir() -> Path:
    return Path(env_value("OPENCLAW_SWE_CACHE") or Path.home() / ".cache" / "openclaw" / "swe")


def runtime_root() -> Path:
    """World-traversable dir for what the sandbox reads (0755 dirs, 0644 files)."""
    root = Path(tempfile.gettempdir()) / "openclaw-swe-runtime"
    root.mkdir(mode=0o755, exist_ok=True)
    os.chmod(root, 0o755)
    return root


def parse_pin(pin: str) -> tuple[str, str]:
    m = _PIN.match(pin.strip())
    if not m:
        raise ValueError(f"expected a pinned project NAME==VERSION, got {pin!r}")
    return m.group(1), m.group(2)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def find_sdist(pin: str) -> Path | None:
    name, version = parse_pin(pin)
    folder = cache_dir() / "sdists"
    if not folder.is_dir():
        return None
    for f in sorted(folder.iterdir()):
        stem = re.sub(r"\.(tar\.gz|tgz|zip|tar\.bz2)$", "", f.name)
        base, _, ver = stem.rpartition("-")
        if ver == version and _norm(base) == _norm(name):
            return f
    return None


def download_sdist(pin: str) -> Path:
    """`pip download --no-binary :all: --no-deps NAME==VER` into the cache (no-op when cached)."""
    found = find_sdist(pin)
    if found:
        return found
    folder = cache_dir() / "sdists"
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "-q", pin, "-d", str(folder)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    found = find_sdist(pin)
    if out.returncode != 0 or found is None:
        raise MissingSourceError(f"could not download the sdist of {pin}: {out.stderr.strip()[-500:]}")
    return found


def require_sdist(pin: str) -> Path:
    found = find_sdist(pin)
    if found is None:
        raise MissingSourceError(
            f"the sdist of {pin} is not in {cache_dir() / 'sdists'}; run `bash swe-rl/setup_swe.sh` "
            f"(or `python swe-rl/swe_build.py fetch {pin}`)"
        )
    return found


def _safe_members(names: list[str], dest: Path) -> None:
    for n in names:
        target = (dest / n).resolve()
        if dest.resolve() not in target.parents and target != dest.resolve():
            raise ValueError(f"archive member {n!r} escapes {dest}")


def unpack_sdist(pin: str) -> Path:
    """The sdist's project root (the single top-level folder), unpacked once into the cache."""
    archive = require_sdist(pin)
    dest = cache_dir() / "trees" / archive.name
    if not dest.is_dir():
        tmp = Path(tempfile.mkdtemp(prefix="unpack-", dir=dest.parent if dest.parent.is_dir() else None))
        dest.parent.mkdir(parents=True, exist_ok=True)
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                _safe_members(z.namelist(), tmp)
                z.extractall(tmp)
        else:
            with tarfile.open(archive) as t:
                _safe_members(t.getnames(), tmp)
                t.extractall(tmp, filter="data")
        try:
            tmp.rename(dest)
        except OSError:  # another process unpacked it first
            shutil.rmtree(tmp, ignore_errors=True)
    tops = [p for p in dest.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise ValueError(f"{archive.name}: expected one top-level folder, found {len(tops)}")
    return tops[0]


def _publish(src_fill, key: str) -> Path:
    """Create runtime_root()/key once (atomically) by calling src_fill(tmpdir); world-readable."""
    target = runtime_root() / key
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(target.parent, 0o755)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    src_fill(tmp)
    for d, _dirs, files in os.walk(tmp):
        os.chmod(d, 0o755)
        for f in files:
            p = os.path.join(d, f)
            if not os.path.islink(p):
                os.chmod(p, 0o755 if os.access(p, os.X_OK) else 0o644)
    try:
        tmp.rename(target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def pytest_runtime_cache() -> Path:
    return cache_dir() / "pytest-runtime" / hashlib.sha1("\n".join(PYTEST_RUNTIME).encode()).hexdigest()[:12]


def install_pytest_runtime() -> Path:
    """pip install --target of the pinned pytest (pure Python) into the cache (no-op when present)."""
    target = pytest_runtime_cache()
    if (target / "pytest").is_dir():
        return target
    cache_dir().mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="pytest-", dir=cache_dir()))
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(tmp), *PYTEST_RUNTIME]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise MissingSourceError(f"could not install the pytest runtime: {out.stderr.strip()[-500:]}")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(target)
    return target


REPORT_PLUGIN = Path(__file__).resolve().parent / "swe_report_plugin.py"
REPORT_PLUGIN_MODULE = "openclaw_swe_report"


def pytest_runtime_dir() -> Path:
    """The pytest runtime plus swe-rl's report plugin, published where the sandbox can read it
    (bind it at /opt/swe-pytest). Keyed by the plugin's content, so an edited plugin is republished."""
    cached = pytest_runtime_cache()
    if not (cached / "pytest").is_dir():
        raise MissingSourceError(f"the pytest runtime is not in {cached}; run `bash swe-rl/setup_swe.sh`")
    plugin = REPORT_PLUGIN.read_bytes()

    def fill(tmp: Path) -> None:
        shutil.copytree(cached, tmp, dirs_exist_ok=True)
        (tmp / f"{REPORT_PLUGIN_MODULE}.py").write_bytes(plugin)

    return _publish(fill, f"pytest-{cached.name}-{hashlib.sha1(plugin).hexdigest()[:8]}")


def publish_tree(key: str, fill) -> Path:
    """A world-readable tree under the runtime root, built once by fill(tmpdir)."""
    return _publish(fill, key)


TEST_EXTRAS = ("test", "tests", "testing")
_REQUIRES = re.compile(r"^Requires-Dist:\s*([^;]+?)\s*;\s*extra\s*==\s*['\"]([^'\"]+)['\"]\s*$", re.MULTILINE)


def _pkg_info(pin: str) -> str:
    name, version = parse_pin(pin)
    pkg_info = unpack_sdist(pin) / "PKG-INFO"
    return (pkg_info.read_text(errors="replace") if pkg_info.is_file()
            else f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_requirements(pin: str) -> list[str]:
    """The project's declared test dependencies (its `test`/`tests`/`testing` extra), minus pytest,
    its plugins and coverage: the sandbox runs the pinned pytest runtime alone."""
    found = []
    for req, extra in _REQUIRES.findall(_pkg_info(pin)):
        dist = _norm(re.split(r"[\s<>=!~\[(]", req.strip(), maxsplit=1)[0])
        if extra in TEST_EXTRAS and dist != "pytest" and not dist.startswith(("pytest-", "coverage")):
            found.append(req.strip())
    return sorted(set(found))


def _test_deps_cache(pin: str) -> Path:
    name, version = parse_pin(pin)
    return cache_dir() / "test-deps" / f"{_norm(name)}-{version}"


def install_test_dependencies(pin: str) -> Path | None:
    """pip install --target of the project's test dependencies into the cache (needs PyPI once)."""
    reqs = test_requirements(pin)
    target = _test_deps_cache(pin)
    if not reqs or target.is_dir():
        return target if reqs else None
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".deps-", dir=target.parent))
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-compile", "--target", str(tmp), *reqs]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise MissingSourceError(f"could not install the test dependencies of {pin} ({reqs}): "
                                 f"{out.stderr.strip()[-500:]}")
    tmp.rename(target)
    return target


def project_deps_dir(pin: str) -> Path:
    """What the sandbox puts on PYTHONPATH beside the work tree, as an install would leave it: the
    project's metadata (`<name>-<version>.dist-info/METADATA` from the sdist's PKG-INFO, so a project
    that asks `importlib.metadata.version(name)` finds itself) and its declared test dependencies."""
    name, version = parse_pin(pin)
    text = _pkg_info(pin)
    deps = _test_deps_cache(pin) if test_requirements(pin) else None
    if deps is not None and not deps.is_dir():
        raise MissingSourceError(f"the test dependencies of {pin} are not in {deps}; run "
                                 f"`python swe-rl/swe_build.py fetch {pin}` (needs PyPI once)")
    dist = f"{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info"

    def fill(tmp: Path) -> None:
        if deps is not None:
            shutil.copytree(deps, tmp, dirs_exist_ok=True, symlinks=True)
        (tmp / dist).mkdir()
        (tmp / dist / "METADATA").write_text(text)
        (tmp / dist / "INSTALLER").write_text("openclaw-swe\n")

    key = hashlib.sha1((text + "\n".join(test_requirements(pin))).encode()).hexdigest()[:8]
    return _publish(fill, f"deps/{_norm(name)}-{version}-{key}")


def missing_sources(pins: list[str]) -> list[str]:
    """What `bash swe-rl/setup_swe.sh` would fetch that is not in the cache yet."""
    missing = sorted({p for p in pins if find_sdist(p) is None})
    missing += sorted({f"the test dependencies of {p}" for p in pins if p not in missing
                       and test_requirements(p) and not _test_deps_cache(p).is_dir()})
    if not (pytest_runtime_cache() / "pytest").is_dir():
        missing.append("the pytest runtime")
    return missing
