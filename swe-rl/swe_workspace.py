"""An episode's work tree: the base repository copied in (a git repo, so the patch is `git diff`),
tests run on it, and patches applied to it — all inside the sandbox."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from swe_tests import TestRun, run_tests

from openclaw.sandbox import SandboxSession

BASE_MOUNT = "/base"
DEPS_MOUNT = "/opt/swe-deps"
_PATCH_MOUNT = "/opt/swe-patch"
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


class PatchTooLarge(RuntimeError):
    """The work tree's diff does not fit the output cap: it cannot be recorded, so it is not scored."""


async def current_patch(session: SandboxSession, base_dir: Path) -> str:
    """The episode's patch: every change to the work tree against the pristine base (new files
    included). It is computed with a git dir of our own, made from the read-only base in the
    command's private /tmp: the agent's `.git` (its `base` tag, index, excludes) plays no part."""
    git = "git -c core.excludesFile=/dev/null -c safe.directory='*' -c core.autocrlf=false"
    # chmod first: a file the agent made unreadable must not make the diff fail (or be skipped).
    cmd = ("chmod -R u+rwX /workspace 2>/dev/null; export GIT_DIR=/tmp/openclaw-base.git && git init -q && "
           "printf %s " + shlex.quote(_EXCLUDE) + " > \"$GIT_DIR/info/exclude\" && "
           f"GIT_WORK_TREE={BASE_MOUNT} {git} add -A && "
           f"GIT_WORK_TREE={BASE_MOUNT} {git} commit -q --no-verify -m base && "
           f"GIT_WORK_TREE=/workspace {git} add -A && GIT_WORK_TREE=/workspace {git} diff --cached --binary HEAD")
    r = await session.run(cmd, ro_binds=[(str(base_dir), BASE_MOUNT)], timeout_s=60)
    if r.exit_code != 0:
        raise RuntimeError(f"git diff failed: {r.stderr[-500:]}")
    if r.truncated:
        raise PatchTooLarge(f"the episode's patch is larger than the sandbox's output cap "
                            f"({session.config.limits.max_output_bytes} bytes)")
    return r.stdout


async def clean_tree_with_patch(session: SandboxSession, base_dir: Path, patch: str, test_files: Sequence[str],
                                test_patch: str = "") -> bool:
    """Empty the work dir, copy the pristine base into it and apply `patch` (staged read-only from the
    host, so the agent cannot change what is applied); then the listed test files are put back to
    the base state and `test_patch` applied. False when `patch` does not apply."""
    staged = session.stage("scored-patch", {"patch.diff": patch, "test.diff": test_patch})
    restore = " && ".join(f"mkdir -p \"$(dirname {shlex.quote(f)})\" && cp -a {BASE_MOUNT}/{shlex.quote(f)} {shlex.quote(f)}"
                          for f in test_files)
    cmd = ("chmod -R u+rwX /workspace 2>/dev/null; find /workspace -mindepth 1 -delete && "
           f"cp -a {BASE_MOUNT}/. /workspace/ && "
           f"if [ -s {_PATCH_MOUNT}/patch.diff ]; then git apply --whitespace=nowarn {_PATCH_MOUNT}/patch.diff "
           "|| exit 3; fi" + (f" && {restore}" if restore else "") +
           f" && if [ -s {_PATCH_MOUNT}/test.diff ]; then git apply --whitespace=nowarn {_PATCH_MOUNT}/test.diff "
           "|| exit 4; fi")
    r = await session.run(cmd, ro_binds=[(str(base_dir), BASE_MOUNT), (staged, _PATCH_MOUNT)], timeout_s=120)
    if r.exit_code == 3:
        return False
    if r.exit_code == 4:
        raise RuntimeError("the instance's test_patch does not apply to the base repository")
    if r.exit_code != 0:
        raise RuntimeError(f"could not prepare the scoring tree: {r.stderr[-500:]}")
    return True


async def run_instance_tests(session: SandboxSession, runtime_dir: Path, test_ids: Sequence[str],
                             python_path: Sequence[str], timeout_s: float, deps_dir: Path | None = None) -> TestRun:
    """The instance's tests on the work tree as it is (deps_dir: bound at /opt/swe-deps)."""
    binds = [(str(deps_dir), DEPS_MOUNT)] if deps_dir else []
    paths = [*python_path, *([DEPS_MOUNT] if deps_dir else [])]
    return await run_tests(session, str(runtime_dir), test_ids, paths, timeout_s, extra_binds=binds)
