"""An episode's work tree: the base repository copied in (a git repo, so the patch is `git diff`),
tests run on it, and patches applied to it — all inside the sandbox."""

from __future__ import annotations

import base64
import shlex
from collections.abc import Sequence
from pathlib import Path

from swe_tests import TestRun, run_tests

from openclaw.sandbox import SandboxSession

BASE_MOUNT = "/base"
DEPS_MOUNT = "/opt/swe-deps"
# Build artefacts that are never part of a patch.
_EXCLUDE = "__pycache__/\n*.pyc\n.pytest_cache/\n*.egg-info/\n"


async def load_base(session: SandboxSession, base_dir: Path, git: bool = True) -> float:
    """Copy the base tree into /workspace (and commit it as `base`); returns the seconds it took."""
    cmd = f"cp -a {BASE_MOUNT}/. /workspace/"
    if git:
        cmd += (" && git init -q -b main && printf %s " + shlex.quote(_EXCLUDE) + " >> .git/info/exclude"
                " && git add -A && git commit -q --no-verify -m base && git tag base")
    r = await session.run(cmd, ro_binds=[(str(base_dir), BASE_MOUNT)], timeout_s=120)
    if r.exit_code != 0:
        raise RuntimeError(f"could not load the base repository: {r.stderr[-1000:]}")
    return r.duration_s


async def current_patch(session: SandboxSession) -> str:
    """The episode's patch: every change to the work tree since `base` (new files included)."""
    r = await session.run("git add -A && git diff --cached --binary base", timeout_s=60)
    if r.exit_code != 0:
        raise RuntimeError(f"git diff failed: {r.stderr[-500:]}")
    if r.truncated:
        raise RuntimeError("the episode's patch is larger than the sandbox's output cap")
    return r.stdout


async def apply_patch_in_sandbox(session: SandboxSession, patch: str) -> bool:
    """git apply a patch to the work tree; False when it does not apply."""
    if not patch.strip():
        return True
    encoded = base64.b64encode(patch.encode()).decode()
    r = await session.run(f"echo {encoded} | base64 -d > /tmp/p.diff && git apply --whitespace=nowarn /tmp/p.diff",
                          timeout_s=60)
    return r.exit_code == 0


async def restore_tests(session: SandboxSession, base_dir: Path, files: Sequence[str], test_patch: str = "") -> None:
    """Put the instance's test files back to the base state (plus its test_patch), whatever the agent did."""
    parts = []
    for f in files:
        q = shlex.quote(f)
        parts.append(f"mkdir -p \"$(dirname {q})\" && cp -a {BASE_MOUNT}/{q} {q}")
    if parts:
        r = await session.run(" && ".join(parts), ro_binds=[(str(base_dir), BASE_MOUNT)], timeout_s=60)
        if r.exit_code != 0:
            raise RuntimeError(f"could not restore the test files: {r.stderr[-500:]}")
    if test_patch.strip() and not await apply_patch_in_sandbox(session, test_patch):
        raise RuntimeError("the instance's test_patch does not apply to the base repository")


async def evaluate_tree(session: SandboxSession, runtime_dir: Path, base_dir: Path, test_ids: Sequence[str],
                        test_files: Sequence[str], python_path: Sequence[str], test_patch: str,
                        timeout_s: float, deps_dir: Path | None = None) -> TestRun:
    """Restore the test files, then run the instance's tests (deps_dir: bound at /opt/swe-deps)."""
    await restore_tests(session, base_dir, test_files, test_patch)
    binds = [(str(deps_dir), DEPS_MOUNT)] if deps_dir else []
    paths = [*python_path, *([DEPS_MOUNT] if deps_dir else [])]
    return await run_tests(session, str(runtime_dir), test_ids, paths, timeout_s, extra_binds=binds)
