"""SWE-bench-format instances: load/save, the fixed split, and each instance's base repository.

Field names are SWE-bench's (`instance_id`, `repo`, `base_commit`, `problem_statement`, `patch`,
`test_patch`, `FAIL_TO_PASS`, `PASS_TO_PASS`, `version`); ours add `source` ("sdist" for the
shipped instances, "swe-bench" for a user's file), `sdist`, `python_path` and `split`.
For a shipped instance, the base repository is the pinned sdist with the gold `patch`
reverse-applied, and `base_commit` is the content hash of that tree (checked on every rebuild).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import swe_sources

HERE = Path(__file__).resolve().parent
SHIPPED = HERE / "instances"
SPLITS = ("train", "heldout")


@dataclass
class Instance:
    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    patch: str
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str]
    test_patch: str = ""
    version: str = ""
    source: str = "sdist"  # "sdist" (built here) or "swe-bench" (a user's file + local mirror)
    sdist: str = ""  # NAME==VERSION for source == "sdist"
    python_path: list[str] = field(default_factory=lambda: ["."])
    split: str = "train"
    mutation: dict[str, Any] = field(default_factory=dict)  # how the bug was made (never shown to the agent)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Instance:
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):  # SWE-bench's HF export stores JSON strings
            if isinstance(known.get(key), str):
                known[key] = json.loads(known[key])
        missing = [k for k in ("instance_id", "repo", "base_commit", "problem_statement", "patch",
                               "FAIL_TO_PASS", "PASS_TO_PASS") if k not in known]
        if missing:
            raise ValueError(f"instance {d.get('instance_id', '?')}: missing SWE-bench fields {missing}")
        if "source" not in d:
            known["source"] = "sdist" if d.get("sdist") else "swe-bench"
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def test_ids(self) -> list[str]:
        return list(self.FAIL_TO_PASS) + list(self.PASS_TO_PASS)

    @property
    def test_files(self) -> list[str]:
        return sorted({t.split("::", 1)[0] for t in self.test_ids})


def read_instances(path: str | Path) -> list[Instance]:
    """A JSON list or JSONL file of instances."""
    text = Path(path).read_text()
    if text.lstrip().startswith("["):
        rows = json.loads(text)
    else:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [Instance.from_dict(r) for r in rows]


def write_instances(path: str | Path, instances: list[Instance]) -> None:
    Path(path).write_text("".join(json.dumps(i.to_dict(), sort_keys=True) + "\n" for i in instances))


def shipped_instances(split: str | None = None) -> list[Instance]:
    out: list[Instance] = []
    for s in SPLITS if split is None else (split,):
        if s not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {s!r}")
        out += read_instances(SHIPPED / f"{s}.jsonl")
    return out


def split_for(instance_id: str) -> str:
    """The fixed split: a quarter of the instances (by a hash of the id) are held out."""
    return "heldout" if int(hashlib.sha1(instance_id.encode()).hexdigest(), 16) % 4 == 0 else "train"


def tree_hash(root: Path) -> str:
    """Content hash of a tree (paths + bytes), the base_commit of our instances. File modes are left
    out: they depend on the umask and archive tool, not on the code."""
    h = hashlib.sha1()
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(files):
            p = Path(dirpath) / name
            h.update(str(p.relative_to(root)).encode() + b"\0")
            h.update(hashlib.sha1(p.read_bytes()).digest())
    return h.hexdigest()


def apply_patch(tree: Path, patch: str, reverse: bool = False) -> None:
    """`git apply` (works outside a git repository) of a unified diff with a/ b/ prefixes."""
    if not patch.strip():
        return
    cmd = ["git", "apply", "--whitespace=nowarn", *(["-R"] if reverse else []), "-"]
    out = subprocess.run(cmd, cwd=tree, input=patch, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"git apply{' -R' if reverse else ''} failed in {tree}: {out.stderr.strip()}")


class MissingRepositoryError(RuntimeError):
    """A SWE-bench instance's repository or dependencies are not available locally."""


def mirror_dir_for(instance: Instance, mirrors: str | Path) -> Path:
    return Path(mirrors) / instance.repo.replace("/", "__")


def base_repo(instance: Instance, mirrors: str | Path | None = None) -> Path:
    """A read-only, world-readable copy of the instance's base state (built once per process tree)."""
    if instance.source == "sdist":
        def fill(tmp: Path) -> None:
            shutil.copytree(swe_sources.unpack_sdist(instance.sdist), tmp, dirs_exist_ok=True, symlinks=True)
            apply_patch(tmp, instance.patch, reverse=True)
            got = tree_hash(tmp)
            if got != instance.base_commit:
                raise RuntimeError(f"{instance.instance_id}: rebuilt base tree hash {got} != base_commit "
                                   f"{instance.base_commit} (different sdist?)")
        return swe_sources.publish_tree(f"repos/{instance.instance_id}-{instance.base_commit[:10]}", fill)
    if mirrors is None:
        raise MissingRepositoryError(
            f"{instance.instance_id}: SWE-bench instances need local repository mirrors: set "
            f"SWE_BENCH_REPOS=DIR (default: repos/ beside the instances file) where "
            f"DIR/{instance.repo.replace('/', '__')} is a git clone of {instance.repo}")
    mirror = mirror_dir_for(instance, mirrors)
    if not (mirror / ".git").exists() and not (mirror / "HEAD").exists():
        raise MissingRepositoryError(
            f"{instance.instance_id}: no git mirror of {instance.repo} at {mirror} "
            f"(git clone https://github.com/{instance.repo} {mirror} on a machine with network)")
    have = subprocess.run(["git", "-C", str(mirror), "cat-file", "-e", f"{instance.base_commit}^{{commit}}"],
                          capture_output=True)
    if have.returncode != 0:
        raise MissingRepositoryError(
            f"{instance.instance_id}: commit {instance.base_commit} is not in {mirror} (git fetch it there)")

    def fill_git(tmp: Path) -> None:
        archive = subprocess.run(["git", "-C", str(mirror), "archive", "--format=tar", instance.base_commit],
                                 capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
    return swe_sources.publish_tree(f"repos/{instance.instance_id}-{instance.base_commit[:10]}", fill_git)


def dependency_dir(instance: Instance, mirrors: str | Path | None = None) -> Path:
    """What is bound read-only on PYTHONPATH beside the work tree. SWE-bench instances: the
    repository's Python dependencies, pip-installed with --target into <mirrors>/<owner>__<name>.deps.
    Our sdist instances: the project's installed metadata and its declared test dependencies
    (swe_sources.project_deps_dir)."""
    if instance.source == "sdist":
        return swe_sources.project_deps_dir(instance.sdist)
    assert mirrors is not None
    deps = Path(f"{mirror_dir_for(instance, mirrors)}.deps")
    if not deps.is_dir():
        raise MissingRepositoryError(
            f"{instance.instance_id}: the Python dependencies of {instance.repo} are not at {deps}; "
            f"create it with `pip install --target {deps} <the repo's requirements at "
            f"{instance.base_commit[:10]}>` (the sandbox has no network to install them)")
    return swe_sources.publish_tree(f"deps/{deps.name}-{tree_hash(deps)[:10]}",
                                    lambda tmp: shutil.copytree(deps, tmp, dirs_exist_ok=True, symlinks=True))


def temp_copy(src: Path) -> Path:
    dst = Path(tempfile.mkdtemp(prefix="swe-copy-"))
    shutil.copytree(src, dst, dirs_exist_ok=True, symlinks=True)
    return dst
