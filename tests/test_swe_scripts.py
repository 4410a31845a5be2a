"""swe-rl's launch scripts and SWE_BENCH_PATH: thin wrappers, what they would submit (dry run), the
message for --benchmark swe-bench-lite without local data, and a user's SWE-bench instance from a
local git mirror run in the sandbox (and the named error when the mirror or deps are missing)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

ROOT = Path(__file__).resolve().parents[1]
# The trainer's plugin loader puts swe-rl on the import path, as in a run; its sibling
# modules are then imported by their own names (one module object each).
load_plugin_module("swe-rl/swe_sources.py")

import swe_sources  # noqa: E402
from swe_bench import SweBenchPath  # noqa: E402
from swe_env import score_patch  # noqa: E402
from swe_instances import MissingRepositoryError, base_repo, dependency_dir  # noqa: E402

from openclaw.sandbox import SandboxConfig, SandboxPool  # noqa: E402

check_shell_script = load_plugin_module(str(Path(__file__).resolve().parent / "track_helpers.py")).check_shell_script

RL, AGENT = ROOT / "swe-rl" / "run_swe_rl.sh", ROOT / "swe-rl" / "run_swe_agent.sh"
NO_GPU = shutil.which("nvidia-smi") is None


@pytest.mark.parametrize("script", [RL, AGENT, ROOT / "swe-rl" / "setup_swe.sh"], ids=lambda p: p.name)
def test_bash_syntax_and_shellcheck(script):
    check_shell_script(script)


def run_script(script: Path, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("MODEL_PATH", "RAY_ADDRESS", "MAX_STEPS",
                                                            "PARALLEL_ENVS", "ENV_TYPE", "SWE_BENCH_PATH")}
    full.update(CKPT_SAVE_DIR=str(tmp_path / "ck"), LOG_DIR=str(tmp_path / "logs"), **env)
    return subprocess.run(["bash", str(script), *args], cwd=tmp_path, env=full, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.skipif(not NO_GPU, reason="the CPU preset applies only without a GPU")
def test_rl_script_cpu_preset_dry_run(tmp_path):
    out = run_script(RL, tmp_path, DRY_RUN="1", CPU_PRESET_MODEL="tiny", MAX_STEPS="3", PARALLEL_ENVS="8",
                     ENV_TYPE="swe", DATA_PATH=str(tmp_path / "train.jsonl"))
    assert out.returncode == 0, out.stderr
    assert "EMBEDDED CPU PRESET" in out.stdout
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("would run submit: "))
    argv = shlex.split(line[len("would run submit: "):])
    assert argv[:3] == ["ray", "job", "submit"]
    cmd = shlex.join(argv[argv.index("--") + 1:])
    for piece in ("--custom-generate-function-path swe-rl/swe_generate.py", "--max-steps 3", "--parallel-envs 8",
                  "--rollout-backend embedded", "--use-lora"):
        assert piece in cmd, piece
    assert not (tmp_path / "train.jsonl").exists()  # a dry run writes nothing: it shows the preparation a real launch runs first; run that here
    prepare = next(ln for ln in out.stdout.splitlines() if ln.startswith("would run prepare: "))
    subprocess.run(shlex.split(prepare[len("would run prepare: "):]), cwd=ROOT, check=True, timeout=300)
    rows = [json.loads(x) for x in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert len(rows) >= 40 and all(r["metadata"]["instance"]["split"] == "train" for r in rows)
    bad = run_script(RL, tmp_path, DRY_RUN="1", CPU_PRESET_MODEL="tiny", ENV_TYPE="terminal")
    assert bad.returncode == 2 and "ENV_TYPE" in bad.stderr


def test_agent_script_says_what_swe_bench_lite_needs(tmp_path):
    out = run_script(AGENT, tmp_path, "--benchmark", "swe-bench-lite")
    assert out.returncode != 0
    for piece in ("SWE-bench_Lite", "SWE_BENCH_PATH", "repos/<owner>__<name>", ".deps", "nothing is downloaded"):
        assert piece in out.stderr, piece


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                                   GIT_COMMITTER_EMAIL="t@t")).stdout.strip()


def make_swe_bench(tmp_path: Path) -> Path:
    """A SWE-bench-format folder: one instance of a local git repository (+ its mirror and deps)."""
    folder = tmp_path / "swe-bench"
    repo = folder / "repos" / "acme__calc"
    (repo / "calc").mkdir(parents=True)
    (repo / "calc" / "__init__.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_calc.py").write_text("from calc import add\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    base_commit = git(repo, "rev-parse", "HEAD")
    (folder / "repos" / "acme__calc.deps").mkdir()
    (folder / "repos" / "acme__calc.deps" / "calc_helpers.py").write_text("ANSWER = 42\n")
    patch = ("diff --git a/calc/__init__.py b/calc/__init__.py\n--- a/calc/__init__.py\n+++ b/calc/__init__.py\n"
             "@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n")
    test_patch = ("diff --git a/tests/test_calc.py b/tests/test_calc.py\n--- a/tests/test_calc.py\n"
                  "+++ b/tests/test_calc.py\n@@ -3,3 +3,12 @@ from calc import add\n \n def test_zero():\n"
                  "     assert add(0, 0) == 0\n+\n+\n+def test_add():\n+    assert add(2, 3) == 5\n+\n+\n"
                  "+def test_deps():\n+    import calc_helpers\n+    assert calc_helpers.ANSWER == 42\n")
    row = {"instance_id": "acme__calc-1", "repo": "acme/calc", "base_commit": base_commit, "patch": patch,
           "test_patch": test_patch, "problem_statement": "add(2, 3) returns -1",
           "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]),
           "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_zero", "tests/test_calc.py::test_deps"]),
           "version": "1.0", "environment_setup_commit": base_commit, "hints_text": "", "created_at": ""}
    (folder / "lite.jsonl").write_text(json.dumps(row) + "\n")
    return folder


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
async def test_swe_bench_instance_from_a_local_mirror_runs_in_the_sandbox(tmp_path):
    if swe_sources.missing_sources([]):
        msg = "the pytest runtime is missing; run `bash swe-rl/setup_swe.sh`"
        pytest.fail(msg) if os.environ.get("CI") else pytest.skip(msg)
    source = SweBenchPath.parse(str(make_swe_bench(tmp_path)))
    (inst,) = source.load()
    assert inst.source == "swe-bench" and inst.FAIL_TO_PASS == ["tests/test_calc.py::test_add"]
    base, deps = base_repo(inst, source.mirrors), dependency_dir(inst, source.mirrors)
    runtime = swe_sources.pytest_runtime_dir()
    pool = SandboxPool(SandboxConfig(), size=1)
    async with pool.session() as sb:
        gold = await score_patch(inst, inst.patch, sb, base, runtime, deps_dir=deps)
    async with pool.session() as sb:
        empty = await score_patch(inst, "", sb, base, runtime, deps_dir=deps)
    assert gold.resolved and set(gold.tests.values()) == {"passed"}
    assert not empty.resolved and empty.tests["tests/test_calc.py::test_add"] == "failed"
    assert empty.pass_to_pass_passed == 2


def test_missing_mirror_and_deps_are_named(tmp_path):
    folder = make_swe_bench(tmp_path)
    source = SweBenchPath.parse(str(folder))
    (inst,) = source.load()
    shutil.rmtree(folder / "repos" / "acme__calc.deps")
    with pytest.raises(MissingRepositoryError, match=r"acme__calc\.deps"):
        dependency_dir(inst, source.mirrors)
    shutil.rmtree(folder / "repos" / "acme__calc")
    with pytest.raises(MissingRepositoryError, match=r"no git mirror of acme/calc at .*acme__calc"):
        base_repo(inst, source.mirrors)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        SweBenchPath.parse(str(tmp_path / "nope.jsonl"))
