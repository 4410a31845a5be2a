"""Every script in bench/ runs end to end at its smallest size, so that none can rot between the full
runs recorded in bench/RESULTS.md. Each runs as a user runs it (a subprocess, its own flags) on the
tiny model where it takes one, with its reports, work dirs and temp files under tmp_path, and must
print its ratio on its last line.

The scripts are found by a glob: a new bench fails here until it has a smoke size in SMOKE."""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py"))

# script -> (its smallest flags, the headline its last line must hold: one group, the number).
# {tiny} is the tiny random Qwen3, {out} a folder under tmp_path.
SMOKE: dict[str, tuple[list[str], str]] = {
    "backend_step.py": (
        ["--model", "tiny", "--samples", "2", "--prompt-len", "8", "--response-len", "8", "--micro-batch-size", "1",
         "--reps", "1", "--out", "{out}/backend_step.md"],
        r"Megatron / FSDP step time: (\d+\.\d+)x"),
    "cli_latency.py": (
        ["--model-path", "{tiny}", "--turns", "2", "--max-tokens", "8", "--out", "{out}/cli_latency.md"],
        r"RATIO later turns cache on/off = (\d+\.\d+)"),
    "grouped_micro_batches.py": (
        # two prompts: the fewest for which micro-batches by length mix GRPO groups
        ["--reps", "1", "--groups", "2", "--model-path", "{tiny}"],
        r"grouped/by-length = (\d+\.\d+)"),
    "intercept_overhead.py": (
        ["--history-tokens", "300", "--records", "32", "--e2e-requests", "2", "--workdir", "{out}/work",
         "--out", "{out}/intercept_overhead.md"],
        r"on/off p50 at concurrency 1 = (\d+\.\d+)"),
    "judge_throughput.py": (
        ["--cpu-turns", "8", "--llm-turns", "2", "--llm-m", "1", "--llm-max-tokens", "4", "--workers", "1,2",
         "--llm-model-path", "{tiny}", "--out", "{out}/judge_throughput.md"],
        r"cpu judge 2 workers / 1 = (\d+\.\d+)"),
    "main_loop_speed.py": (
        # HEAD as the baseline: the clone's last commit, always present
        ["--baseline-ref", "HEAD", "--rounds", "1", "--minutes", "0.5", "--out", "{out}/main_loop_speed.md",
         "--workdir", "{out}/work", "--", "--model-path", "{tiny}", "--batch-size", "4", "--eval-limit", "2",
         "--max-tokens", "8", "--eval-max-tokens", "8", "--lr", "1e-2"],
        r"steps per minute = (\d+\.\d+)"),
    "methods_learning.py": (
        ["--personas", "brief", "--methods", "combine", "--seeds", "0", "--out", "{out}/runs",
         "--report", "{out}/methods_learning.md",
         # the rest goes to the demo run
         "--model-path", "{tiny}", "--interactions", "4", "--batch-size", "4", "--evals", "1", "--eval-limit", "2",
         "--max-tokens", "8", "--eval-max-tokens", "8", "--minutes", "5", "--lr", "1e-2"],
        r"combine ([-+]\d+\.\d+)"),
    "multi_user_learning.py": (
        ["--minutes", "5", "--out", "{out}/runs", "--report", "{out}/multi_user_learning.md", "--",
         "--model-path", "{tiny}", "--interactions", "8", "--batch-size", "4", "--evals", "1", "--eval-limit", "2",
         "--max-tokens", "8", "--eval-max-tokens", "8", "--lr", "1e-2"],
        r"smallest own-gain margin \(two users - alone\) = ([-+]\d+\.\d+)"),
    "multi_user_serving.py": (
        ["--model-path", "{tiny}", "--users", "2", "--max-tokens", "4", "--rounds", "1", "--rank", "2"],
        r"users' adapters / base at concurrency 2 = (\d+\.\d+)"),
    "prefix_cache.py": (
        ["--reps", "1", "--groups", "2", "--model-path", "{tiny}"],
        r"prefix cache / full prefill = (\d+\.\d+)"),
    "sandbox_throughput.py": (
        ["--episodes", "4", "--parallel-envs", "2", "--out", "{out}/sandbox_throughput.md"],
        r"sandbox/plain episodes per second: (\d+\.\d+)"),
    "serve_vs_llamacpp.py": (
        ["--max-tokens", "4", "--rounds", "1", "--c1-prompts", "1", "--logprob-replies", "1"],
        r"concurrency1 = (\d+\.\d+)"),
    "serve_throughput.py": (
        ["--model-path", "{tiny}", "--max-tokens", "4", "--rounds", "1", "--c1-prompts", "1",
         "--overhead-samples", "1", "--out", "{out}/serve_throughput.md"],
        r"concurrency1 server/raw = (\d+\.\d+)"),
    "step_prefix.py": (
        # two prompts: the fewest that make two micro-batches, which the step prefix needs
        ["--reps", "1", "--groups", "2", "--model-path", "{tiny}"],
        r"once/per-micro-batch = (\d+\.\d+)"),
    "swe_episode_cost.py": (
        ["--instances", "1", "--reps", "1"],
        r"RATIO hardened/plain = (\d+\.\d+)"),
    "train_step_vs_trl.py": (
        ["--reps", "1", "--prompt-len", "16", "--completion-len", "16", "--model-path", "{tiny}",
         "--out", "{out}/train_step_vs_trl.md"],
        r"ours/TRL = (\d+\.\d+)"),
    "weight_swap_latency.py": (
        ["--model-path", "{tiny}", "--rounds", "1", "--window", "3", "--update-every", "1", "--warmup", "1",
         "--clients", "1", "--max-tokens", "2"],
        r"p99 ratio with/without updates: (\d+\.\d+)"),
}

# The sandbox runs as an unprivileged uid that cannot enter pytest's 0700 tmp_path, so these keep the
# system temp dir (their work dirs there are the sandbox's own, removed after each episode).
SYSTEM_TMP = {"sandbox_throughput.py", "swe_episode_cost.py"}

TIMEOUT_S = 300


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    """The bench in its own process group, so that a hung run's servers and children go with it."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{cmd[1]} ran past {TIMEOUT_S} s\n--- stdout\n{out[-3000:]}\n--- stderr\n{err[-3000:]}")
    return proc.returncode, out, err


def test_every_smoke_size_is_a_bench() -> None:
    assert not set(SMOKE) - set(SCRIPTS), f"smoke sizes of scripts no longer in bench/: {sorted(set(SMOKE) - set(SCRIPTS))}"


# Benches that drive the real OpenClaw CLI: as in tests/test_intercept_openclaw_e2e.py, a machine
# without it skips outside CI, and in CI (CI=true) a missing CLI fails.
NEEDS_CLI = {"cli_latency.py"}
CLI = Path(os.environ.get("OPENCLAW_NODE_DIR", Path.home() / ".cache/openclaw/node")) / "node_modules/.bin/openclaw"


@pytest.mark.parametrize("script", SCRIPTS)
def test_bench_runs_at_smoke_size(script: str, tiny_model_path: Path, tmp_path: Path) -> None:
    assert script in SMOKE, f"bench/{script} has no smoke size: add its smallest flags to SMOKE in {__file__}"
    if script in NEEDS_CLI and not CLI.exists() and not os.environ.get("CI"):
        pytest.skip(f"the OpenClaw CLI is not installed at {CLI} (run scripts/setup-system.sh)")
    flags, headline = SMOKE[script]
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    args = [a.format(tiny=tiny_model_path, out=out_dir) for a in flags]
    # The working dir (and the temp dir where the sandbox allows) are the test's own: whatever a bench
    # writes to a relative path or with tempfile lands under tmp_path, not in the repository.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    if script not in SYSTEM_TMP:
        (tmp_path / "tmp").mkdir()
        env["TMPDIR"] = str(tmp_path / "tmp")
    rc, out, err = _run([sys.executable, str(BENCH / script), *args], tmp_path, env)
    assert rc == 0, f"bench/{script} exited {rc}\n--- stdout\n{out[-3000:]}\n--- stderr\n{err[-3000:]}"
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert lines, f"bench/{script} printed nothing\n--- stderr\n{err[-3000:]}"
    m = re.search(headline, lines[-1])
    assert m, f"bench/{script}'s last line does not hold its ratio ({headline!r}): {lines[-1]!r}"
    assert math.isfinite(float(m.group(1))), lines[-1]
