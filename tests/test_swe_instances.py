"""swe-rl's shipped instances: SWE-bench fields, a fixed split, >= 60 instances from >= 4 real
projects, and for each: the gold patch scores 1, the empty patch 0, the FAIL_TO_PASS tests really
fail at the base state (a sample here, all of them in the slow test).

Needs the pinned sdists (bash swe-rl/setup_swe.sh): skipped without them, except in CI (CI=true)
where their absence fails."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

ROOT = Path(__file__).resolve().parents[1]
# The trainer's plugin loader puts swe-rl on the import path, as in a run; its sibling
# modules are then imported by their own names (one module object each).
load_plugin_module("swe-rl/swe_sources.py")

import swe_sources  # noqa: E402
from swe_env import score_patch  # noqa: E402
from swe_instances import SPLITS, Instance, base_repo, shipped_instances, split_for  # noqa: E402

from openclaw.sandbox import Limits, SandboxConfig, SandboxPool  # noqa: E402

SWE_FIELDS = ("instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch", "FAIL_TO_PASS",
              "PASS_TO_PASS")
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def require_sources(instances: list[Instance]) -> None:
    missing = swe_sources.missing_sources([i.sdist for i in instances])
    if missing:
        msg = f"missing in {swe_sources.cache_dir()}: {missing}; run `bash swe-rl/setup_swe.sh`"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)


def test_shipped_instances_are_swe_bench_shaped_and_split():
    rows = shipped_instances()
    assert len(rows) >= 60
    assert len({i.instance_id for i in rows}) == len(rows)
    assert len({i.sdist for i in rows}) >= 4
    for split in SPLITS:
        part = shipped_instances(split)
        assert part and all(i.split == split == split_for(i.instance_id) for i in part)
    for inst in rows:
        d = inst.to_dict()
        assert all(k in d for k in SWE_FIELDS)
        assert inst.FAIL_TO_PASS and inst.patch.startswith("diff --git a/")
        assert not set(inst.FAIL_TO_PASS) & set(inst.PASS_TO_PASS)
        # The issue is written from the failing behaviour, never from the diff.
        changed = [ln[1:].strip() for ln in inst.patch.splitlines()
                   if ln[:1] in "+-" and not ln.startswith(("+++", "---")) and ln[1:].strip()]
        assert changed and not any(c in inst.problem_statement for c in changed), inst.instance_id
        assert any(t.split("::")[-1] in inst.problem_statement for t in inst.FAIL_TO_PASS)


async def check(instances: list[Instance], parallel: int) -> list[str]:
    """Gold -> resolved (every test passes); empty -> not resolved, every FAIL_TO_PASS fails."""
    runtime = swe_sources.pytest_runtime_dir()
    pool = SandboxPool(SandboxConfig(limits=Limits(wall_timeout_s=120, cpu_seconds=120)), size=parallel)
    problems: list[str] = []

    async def one(inst: Instance) -> None:
        base = await asyncio.to_thread(base_repo, inst)
        async with pool.session() as sb:
            gold = await score_patch(inst, inst.patch, sb, base, runtime)
        async with pool.session() as sb:
            empty = await score_patch(inst, "", sb, base, runtime)
        if not (gold.resolved and gold.reward == 1.0 and all(o == "passed" for o in gold.tests.values())):
            problems.append(f"{inst.instance_id}: gold patch not resolved: {gold.tests}")
        if empty.resolved or empty.reward != 0.0 or empty.fail_to_pass_passed != 0:
            problems.append(f"{inst.instance_id}: FAIL_TO_PASS pass at the base state: {empty.tests}")
        if empty.pass_to_pass_passed != len(inst.PASS_TO_PASS):
            problems.append(f"{inst.instance_id}: PASS_TO_PASS fail at the base state: {empty.tests}")

    await asyncio.gather(*(one(i) for i in instances))
    return problems


@needs_bwrap
async def test_gold_scores_one_and_empty_zero_on_a_sample():
    sample = [shipped_instances("train")[0], shipped_instances("heldout")[0]]
    require_sources(sample)
    assert await check(sample, parallel=2) == []


@needs_bwrap
@pytest.mark.slow
async def test_gold_scores_one_and_empty_zero_on_every_instance():
    rows = shipped_instances()
    require_sources(rows)
    assert await check(rows, parallel=2) == []
