"""terminal-rl environment: task loading, action parsing, reset/step semantics, and rewards of
known-good and known-bad command sequences in the real sandbox."""

from __future__ import annotations

import asyncio
import importlib
import shutil
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

from openclaw.sandbox import SandboxConfig, SandboxPool

ROOT = Path(__file__).resolve().parents[1]

# terminal-rl is a plugin folder, not a package: its modules load the way the trainer loads them
# (by file path; the loader also makes the plugin's sibling modules importable by name).
terminal_env = load_plugin_module("terminal-rl/terminal_env.py")
terminal_tasks = importlib.import_module("terminal_tasks")  # the very module terminal_env uses
INVALID_OBSERVATION, TerminalEnv = terminal_env.INVALID_OBSERVATION, terminal_env.TerminalEnv
episode_reward, parse_action = terminal_env.episode_reward, terminal_env.parse_action
TerminalTask, load_tasks, pytest_summary = terminal_tasks.TerminalTask, terminal_tasks.load_tasks, terminal_tasks.pytest_summary

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
TASKS = load_tasks()


def test_task_set_is_broad():
    assert len(TASKS) >= 20
    cats = {t.category for t in TASKS}
    assert {"files", "text", "git", "python", "archives", "permissions"} <= cats
    assert all(t.solution for t in TASKS), "every bundled task has a reference solution"
    assert any(t.style == "terminal-bench" for t in TASKS)


def test_loader_reads_terminal_bench_folder_and_rejects_bad_input(tmp_path):
    tb = load_tasks(ROOT / "terminal-rl" / "tasks" / "tbench-word-count")[0]
    assert tb.style == "terminal-bench" and "poem.txt" in tb.instruction
    assert set(tb.test_files) == {"test_exists.sh", "test_value.sh"}
    with pytest.raises(FileNotFoundError):
        load_tasks(tmp_path / "missing")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- id: x\n  instruction: do it\n")
    with pytest.raises(ValueError, match="at least one test"):
        load_tasks(bad)
    bad.write_text("- id: x\n  instruction: do it\n  tests: {a: 'true'}\n  oops: 1\n")
    with pytest.raises(ValueError, match="unknown keys"):
        load_tasks(bad)
    # A native task folder with tests/*.sh files.
    folder = tmp_path / "native"
    (folder / "tests").mkdir(parents=True)
    (folder / "task.yaml").write_text("instruction: make a.txt\n")
    (folder / "setup.sh").write_text("echo ready > ready.txt\n")
    (folder / "tests" / "has_a.sh").write_text("test -f a.txt\n")
    task = load_tasks(folder)[0]
    assert (task.id, task.setup, list(task.tests)) == ("native", "echo ready > ready.txt\n", ["has_a"])


def test_parse_action_forms():
    assert parse_action("Let me look.\n```bash\nls -la\n```").content == "ls -la"
    assert parse_action("<command>cat a.txt</command>").kind == "command"
    assert parse_action("All good. <answer>done</answer>").kind == "answer"
    # The first of several is taken.
    assert parse_action("```bash\necho 1\n```\n```bash\necho 2\n```").content == "echo 1"
    assert parse_action("<answer>x</answer> then ```bash\nrm -rf .\n```").kind == "answer"
    assert parse_action("I would run ls").kind == "invalid"
    assert parse_action("```bash\n\n```").kind == "invalid"


def test_pytest_summary_parsing():
    out = "PASSED tests/test_a.py::test_one\nFAILED tests/test_a.py::test_two - assert 0\nnoise\n"
    assert pytest_summary(out) == (1, 2)
    assert pytest_summary("nothing here") is None


def wrap(cmd: str) -> str:
    return f"I'll run:\n```bash\n{cmd}\n```"


async def run_episode(pool: SandboxPool, task: TerminalTask, turns: list[str], max_steps: int = 10):
    async with pool.session() as sb:
        env = TerminalEnv(task, sb, max_steps=max_steps)
        first = await env.reset()
        assert first == task.instruction
        steps = []
        for text in turns:
            steps.append(await env.step(text))
            if steps[-1].done:
                break
        return env, steps, await env.evaluate()


@needs_bwrap
async def test_reference_solutions_score_one_and_doing_nothing_scores_zero():
    pool = SandboxPool(SandboxConfig(), size=4)

    async def check(task: TerminalTask) -> tuple[str, float, float]:
        _, steps, good = await run_episode(pool, task, [wrap(c) for c in task.solution] + ["<answer>done</answer>"])
        assert steps[-1].done and steps[-1].action.kind == "answer"
        _, _, bad = await run_episode(pool, task, ["<answer>done</answer>"])
        return task.id, good.fraction, bad.fraction

    results = await asyncio.gather(*(check(t) for t in TASKS))
    failures = [(tid, good) for tid, good, _ in results if good != 1.0]
    assert not failures, f"reference solutions must pass every test: {failures}"
    # No test may pass without work (a test that does gives reward for nothing).
    trivially_passing = [tid for tid, _, bad in results if bad > 0.0]
    assert not trivially_passing, f"tests pass without any work: {trivially_passing}"


@needs_bwrap
async def test_step_semantics_and_partial_reward():
    task = next(t for t in TASKS if t.id == "git-init-commit")
    pool = SandboxPool(SandboxConfig(), size=1)
    env, steps, result = await run_episode(
        pool,
        task,
        [
            "Hmm, let me think about it.",  # invalid: no command
            wrap("mkdir repo && cd repo && git init -q && echo first > notes.txt"),
            wrap("cd repo && pwd"),  # the cwd does not persist, files do
            wrap("exit 3"),
            wrap("cd repo && git add notes.txt"),  # staged but never committed
        ],
        max_steps=5,
    )
    assert steps[0].observation == INVALID_OBSERVATION and steps[0].step_score == 0.0
    assert steps[1].exec_result.exit_code == 0 and steps[1].step_score == 1.0
    assert "/workspace/repo" in steps[2].observation
    assert "[exit code 3]" in steps[3].observation and steps[3].step_score == 0.0
    assert steps[4].done and env.steps == 5  # MAX_STEPS reached
    with pytest.raises(RuntimeError, match="after the episode ended"):
        await env.step(wrap("ls"))
    # A repo exists but nothing is committed: some tests pass, not all.
    assert result.details["is_repo"] and not result.details["message"]
    assert 0 < result.fraction < 1
    scores = [s.step_score for s in steps]
    assert episode_reward(result, scores, 0.0) == result.fraction
    assert episode_reward(result, scores, 0.1) == pytest.approx(result.fraction + 0.1 * sum(scores) / 5)


@needs_bwrap
async def test_agent_cannot_tamper_with_tests_or_escape():
    task = TerminalTask(id="t", instruction="x", tests={"flag": "test -f flag.txt"},
                        test_files={"check.sh": "exit 0"})
    pool = SandboxPool(SandboxConfig(), size=1)
    env, steps, result = await run_episode(
        pool, task, [wrap("ls /tests; echo 'exit 0' > /tests/check.sh; cat /etc/hostname /root/.bashrc")]
    )
    assert "No such file" in steps[0].observation  # /tests is not mounted during the episode
    assert result.fraction == 0.0


@needs_bwrap
async def test_setup_failure_is_reported():
    task = TerminalTask(id="broken", instruction="x", setup="exit 7", tests={"a": "true"})
    pool = SandboxPool(SandboxConfig(), size=1)
    async with pool.session() as sb:
        with pytest.raises(RuntimeError, match="setup failed"):
            await TerminalEnv(task, sb).reset()


async def test_unsandboxed_debug_mode_runs_the_same_episode(caplog):
    # --sandbox none: no isolation (a loud warning), same env semantics, for trusted debugging.
    task = next(t for t in TASKS if t.id == "tar-extract")
    pool = SandboxPool(SandboxConfig(kind="none"), size=1)
    assert "SANDBOX DISABLED" in caplog.text
    _, steps, good = await run_episode(pool, task, [wrap(c) for c in task.solution])
    assert good.fraction == 1.0 and steps[0].exec_result.exit_code == 0
