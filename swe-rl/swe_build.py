"""Task builder: a pinned PyPI project (NAME==VERSION) in, validated SWE-bench instances (or the
reason the project was rejected) out.

    python swe-rl/swe_build.py fetch toolz==1.0.0            # download the sdist + pytest runtime
    python swe-rl/swe_build.py build toolz==1.0.0 --max-instances 10 --out my.jsonl
    python swe-rl/swe_build.py ship                         # rebuild swe-rl/instances/ from projects.txt

For each project: the sdist's own tests run in the sandbox (those that pass there are the
baseline); then one function at a time is broken (swe_mutate), the test files that name the
function run, and the break is kept only if some baseline test fails (FAIL_TO_PASS); a bounded
sample of still-passing tests from the same files is PASS_TO_PASS. Each kept instance is
validated twice more: FAIL_TO_PASS fail and PASS_TO_PASS pass at the base state, all pass with
the gold patch. The issue text is written from the failures (test, assertion, expected vs actual).
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import json
import random
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import swe_sources
from swe_instances import SHIPPED, Instance, split_for, tree_hash, write_instances
from swe_mutate import Mutation, find_mutations
from swe_tests import TestRun
from swe_workspace import load_base, run_instance_tests

from openclaw.sandbox import Limits, SandboxConfig, SandboxPool, SandboxSession

HERE = Path(__file__).resolve().parent
PROJECTS = HERE / "projects.txt"
_SKIP_DIRS = {"docs", "doc", "examples", "benchmarks", "bench", "build", "tools", "scripts", ".git"}


class Rejected(Exception):
    """The project cannot give instances; the message says why."""


@dataclass
class Project:
    pin: str
    root: Path
    python_path: list[str]
    sources: list[str]  # library modules, relative to root
    test_files: list[str]
    metadata: Path  # bound beside the tree: its metadata and test dependencies (swe_sources.project_deps_dir)

    async def run_tests(self, sb: SandboxSession, runtime: Path, tests: list[str], timeout_s: float) -> TestRun:
        return await run_instance_tests(sb, runtime, tests, self.python_path, timeout_s, self.metadata)


def _is_test(rel: str) -> bool:
    parts = rel.split("/")
    return (any(p in ("tests", "test", "testing") for p in parts[:-1]) or parts[-1].startswith("test_")
            or parts[-1].endswith("_test.py") or parts[-1] == "conftest.py")


def inspect_project(pin: str) -> Project:
    root = swe_sources.unpack_sdist(pin)
    files = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if not set(rel.split("/")[:-1]) & _SKIP_DIRS:
            files.append(rel)
    tests = [f for f in files if _is_test(f) and f.split("/")[-1].startswith("test") and f.endswith(".py")]
    if not tests:
        raise Rejected(f"{pin}: no tests in the sdist (no test_*.py files)")
    python_path = ["src"] if (root / "src").is_dir() else ["."]
    prefix = "src/" if python_path == ["src"] else ""
    sources = [f for f in files if not _is_test(f) and f.startswith(prefix) and "/" in f.removeprefix(prefix)
               or (not _is_test(f) and "/" not in f and f not in ("setup.py", "conftest.py", "noxfile.py"))]
    sources = [f for f in sources if not f.endswith(("setup.py", "_version.py", "version.py", "__main__.py"))]
    if not sources:
        raise Rejected(f"{pin}: no library modules found beside the tests")
    return Project(pin, root, python_path, sources, tests, swe_sources.project_deps_dir(pin))


def builder_pool() -> SandboxPool:
    # A whole suite's report (every test id) can pass the episodes' 64 KiB output cap.
    limits = Limits(wall_timeout_s=300, cpu_seconds=300, address_space_bytes=2 << 30, max_processes=64,
                    max_output_bytes=8 << 20)
    return SandboxPool(SandboxConfig(limits=limits), size=1)


def _test_name(test_id: str) -> str:
    return test_id.split("::")[-1]


def issue_text(pin: str, run: TestRun, failing: list[str], mutated_line: str | None, original_line: str) -> str:
    """A bug report written from the failing behaviour only (never the diff)."""
    name = pin.split("==")[0]
    hidden = {line.strip() for line in (mutated_line, original_line) if line and line.strip()}
    shown = failing[:2]
    parts = [f"{name} {pin.split('==')[1]}: {len(failing)} of the project's own tests fail "
             f"({', '.join('`' + _test_name(t) + '`' for t in shown)}{', ...' if len(failing) > 2 else ''}).", ""]
    for tid in shown:
        excerpt = [ln for ln in run.failures.get(tid, "").splitlines()
                   if ln.strip() and not any(h in ln for h in hidden) and not ln.startswith(("----", "Captured"))]
        errors = [ln for ln in excerpt if ln.startswith("E ")]
        context = [ln for ln in excerpt if not ln.startswith("E ")]
        body = (context[-3:] + errors[:8]) if errors else excerpt[-12:]
        parts += [f"Running `pytest {tid}` fails:", "```", *body, "```", ""]
    parts.append("The tests describe the intended behaviour: fix the library so that they pass, without "
                 "changing the tests.")
    return "\n".join(parts)


def gold_patch(rel: str, mutated: str, original: str) -> str:
    diff = difflib.unified_diff(mutated.splitlines(keepends=True), original.splitlines(keepends=True),
                                f"a/{rel}", f"b/{rel}")
    return f"diff --git a/{rel} b/{rel}\n" + "".join(diff)


def _interleave(mutations: list[tuple[str, Mutation]], seed: int) -> Iterator[tuple[str, Mutation]]:
    """Round-robin over mutation kinds (shuffled within each) so instances mix bug types."""
    rng = random.Random(seed)
    by_kind: dict[str, list[tuple[str, Mutation]]] = {}
    for item in mutations:
        by_kind.setdefault(item[1].kind, []).append(item)
    for items in by_kind.values():
        rng.shuffle(items)
    kinds = sorted(by_kind)
    while any(by_kind.values()):
        for k in kinds:
            if by_kind[k]:
                yield by_kind[k].pop()


async def build_project(pin: str, max_instances: int, max_p2p: int = 8, max_f2p: int = 10, seed: int = 0,
                        max_candidates: int = 200, log=print) -> list[Instance]:
    """Instances for one pinned project; raises Rejected with the reason when it gives none."""
    swe_sources.download_sdist(pin)
    swe_sources.install_test_dependencies(pin)
    project = inspect_project(pin)
    runtime = swe_sources.pytest_runtime_dir()
    pristine = swe_sources.publish_tree(f"pristine/{swe_sources.require_sdist(pin).name}",
                                        lambda tmp: __import__("shutil").copytree(project.root, tmp, dirs_exist_ok=True))
    base_hash_pristine = tree_hash(pristine)
    pool = builder_pool()
    out: list[Instance] = []
    async with pool.session() as sb:
        await load_base(sb, pristine, git=False)
        baseline = await project.run_tests(sb, runtime, project.test_files, timeout_s=300)
        if baseline.timed_out:
            raise Rejected(f"{pin}: the test suite did not finish in 300 s in the sandbox (no network: "
                           "do the tests need it?)")
        if baseline.tamper and baseline.all_outcomes:
            raise Rejected(f"{pin}: the project's own test run trips swe-rl's tamper checks, so no patch could "
                           f"be scored: {baseline.tamper[0]}")
        passing = sorted(t for t, o in baseline.all_outcomes.items() if o == "passed")
        if not passing:
            raise Rejected(f"{pin}: no test passes in the sandbox. {first_error(baseline)}")
        log(f"{pin}: {len(passing)} baseline tests pass ({len(project.test_files)} files, {baseline.duration_s:.1f}s)")
        texts = {f: (project.root / f).read_text() for f in project.test_files}
        candidates = []
        for rel in project.sources:
            try:
                src = (project.root / rel).read_text()
                candidates += [(rel, m) for m in find_mutations(src)]
            except (SyntaxError, UnicodeDecodeError):
                continue
        used_functions: set[str] = set()
        tried = 0
        for rel, mut in _interleave(candidates, seed):
            if len(out) >= max_instances or tried >= max_candidates:
                break
            key = f"{rel}:{mut.function}"
            short = mut.function.split(".")[-1]
            if short.startswith("__"):
                short = mut.function.split(".")[-2] if "." in mut.function else short
            if key in used_functions:
                continue
            files = [f for f in project.test_files if re.search(rf"\b{re.escape(short)}\b", texts[f])]
            if not files:
                continue
            tried += 1
            inst = await _try_mutation(sb, project, runtime, pristine, rel, mut, files, passing,
                                       max_p2p, max_f2p, seed)
            if inst is not None:
                used_functions.add(key)
                inst.base_commit = inst.base_commit or base_hash_pristine
                out.append(inst)
                log(f"  + {inst.instance_id}: {len(inst.FAIL_TO_PASS)} F2P, {len(inst.PASS_TO_PASS)} P2P")
    if not out:
        raise Rejected(f"{pin}: none of {tried} breaks made a baseline test fail (tests do not exercise the code?)")
    return out


_MISSING_MODULE = re.compile(r"No module named '([^']+)'")


def first_error(run: TestRun) -> str:
    """The run's first real error, quoted with where it happened, and what it means offline."""
    failed = sorted(t for t, o in run.all_outcomes.items() if o in ("failed", "error"))
    texts = [*run.collect_errors.items(), *((t, run.failures.get(t, "")) for t in failed)]
    found = [(where, ln.strip()[1:].strip()) for where, text in texts for ln in text.splitlines()
             if ln.strip().startswith("E ") and ln.strip()[1:].strip()]
    if not found:
        detail = f"The test run did not report: {run.tamper[0]}. " if run.tamper else ""
        return f"{detail}pytest said:\n{_tail(run)}"
    where, first = found[0]
    missing = _MISSING_MODULE.search(first)
    if missing:
        why = (f"The tests import `{missing.group(1)}`, which is not in the sandbox (only the project and "
               "pytest are; there is no network to install more).")
    elif "PackageNotFoundError" in first:
        why = "The project reads installed package metadata that the sandbox does not have."
    elif re.search(r"socket|connection|resolve|network|gaierror", first, re.IGNORECASE):
        why = "The tests need the network, which the sandbox does not have."
    else:
        why = "That error stops every test."
    return f"The first error, in {where}: `{first}`. {why}"


def _tail(run: TestRun) -> str:
    return "\n".join(run.output.strip().splitlines()[-15:])


async def _try_mutation(sb: SandboxSession, project: Project, runtime: Path, pristine: Path, rel: str,
                        mut: Mutation, files: list[str], passing: list[str], max_p2p: int, max_f2p: int,
                        seed: int) -> Instance | None:
    original = (project.root / rel).read_text()
    mutated = mut.apply(original)
    sb.write_file(rel, mutated)
    try:
        selected = [t for t in passing if t.split("::")[0] in files]
        if not selected:
            return None
        discover = await project.run_tests(sb, runtime, files, timeout_s=120)
        outcomes = discover.all_outcomes
        failing = [t for t in selected if outcomes.get(t) not in ("passed", None)]
        if discover.timed_out or discover.tamper or not failing or len(failing) == len(selected) and len(selected) > 3:
            return None  # nothing fails, or everything does (a break that kills the module is no task)
        f2p = failing[:max_f2p]
        still = [t for t in selected if outcomes.get(t) == "passed"]
        rng = random.Random(f"{seed}:{rel}:{mut.lineno}")
        p2p = sorted(rng.sample(still, min(max_p2p, len(still))))
        broken = await project.run_tests(sb, runtime, f2p + p2p, timeout_s=120)
        if any(broken.passed(t) for t in f2p) or not all(broken.passed(t) for t in p2p):
            return None
    finally:
        sb.write_file(rel, original)
    fixed = await project.run_tests(sb, runtime, f2p + p2p, timeout_s=120)
    if not all(fixed.passed(t) for t in f2p + p2p):
        return None  # flaky
    name, version = swe_sources.parse_pin(project.pin)
    fn = re.sub(r"[^A-Za-z0-9_.]", "_", mut.function)
    iid = f"{name}-{version}__{fn}__{mut.kind}-L{mut.lineno}"
    patch = gold_patch(rel, mutated, original)
    base = swe_sources.publish_tree(f"check/{iid}", lambda tmp: _base_tree(project.root, rel, mutated, tmp))
    return Instance(
        instance_id=iid, repo=f"pypi/{name}", base_commit=tree_hash(base), version=version, sdist=project.pin,
        problem_statement=issue_text(project.pin, broken, f2p, mut.mutated_line, mut.original_line),
        patch=patch, test_patch="", FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p, python_path=project.python_path,
        split=split_for(iid), source="sdist",
        mutation={"kind": mut.kind, "file": rel, "function": mut.function, "line": mut.lineno},
    )


def _base_tree(root: Path, rel: str, mutated: str, tmp: Path) -> None:
    import shutil

    shutil.copytree(root, tmp, dirs_exist_ok=True, symlinks=True)
    (tmp / rel).write_text(mutated)


def read_projects(path: Path = PROJECTS) -> list[tuple[str, int]]:
    """projects.txt: `NAME==VERSION [max instances]` per line, # comments."""
    rows = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            pin, *rest = line.split()
            rows.append((pin, int(rest[0]) if rest else 16))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download pinned sdists (default: projects.txt) and the pytest runtime")
    f.add_argument("pins", nargs="*")
    b = sub.add_parser("build", help="make instances from pinned projects")
    b.add_argument("pins", nargs="+")
    b.add_argument("--max-instances", type=int, default=10)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--out", required=True)
    s = sub.add_parser("ship", help="rebuild swe-rl/instances/{train,heldout}.jsonl from projects.txt")
    s.add_argument("--out-dir", default=str(SHIPPED))
    args = ap.parse_args(argv)

    if args.cmd == "fetch":
        for pin in args.pins or [p for p, _ in read_projects()]:
            print(swe_sources.download_sdist(pin))
            deps = swe_sources.install_test_dependencies(pin)
            if deps:
                print(deps)
        print(swe_sources.install_pytest_runtime())
        return 0
    swe_sources.install_pytest_runtime()
    plan = [(p, args.max_instances) for p in args.pins] if args.cmd == "build" else read_projects()
    instances: list[Instance] = []
    rejected = 0
    for pin, quota in plan:
        t0 = time.monotonic()
        try:
            got = asyncio.run(build_project(pin, quota, seed=getattr(args, "seed", 0)))
        except Rejected as e:
            rejected += 1
            print(f"REJECTED {e}", file=sys.stderr)
            continue
        print(f"{pin}: {len(got)} instances in {time.monotonic() - t0:.0f}s", file=sys.stderr)
        instances += got
    if args.cmd == "build":
        write_instances(args.out, instances)
        print(json.dumps({"instances": len(instances), "rejected_projects": rejected, "out": args.out}))
    else:
        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for split in ("train", "heldout"):
            write_instances(out / f"{split}.jsonl", [i for i in instances if i.split == split])
        print(json.dumps({"instances": len(instances), "rejected_projects": rejected}))
    return 0 if instances else 1


if __name__ == "__main__":
    sys.exit(main())
